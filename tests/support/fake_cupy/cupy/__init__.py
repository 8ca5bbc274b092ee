"""A stand-in for CuPy on the CPU, enough for ``--xp cupy`` / ``--device gpu`` and the GPU tests.

Put ``tests/support/fake_cupy`` first on ``PYTHONPATH`` and ``import cupy`` finds this
module: its arrays are ``tests/support/fakedevice.py``'s fake device arrays (host
memory that mpicoll treats as device memory: no buffer protocol, explicit
``get``/``set``), in shared-memory allocations a peer maps as CUDA IPC maps a
peer's block, so the ``ipc`` transport runs too. Importing it registers the
fake adapter with mpicoll (:func:`fakedevice.install`); mpicoll's own
``CupyAdapter`` is therefore not what moves these arrays.

What it is for: ``scripts/gpu_proof.sh`` end to end on a machine without a GPU
(``tests/test_gpu_script.py``): every step -- the device tests with
``MPICOLL_TEST_XP=cupy``, the bench and latency with ``--xp cupy``, the demo
and an example with ``--device gpu``, the reports and the targets table --
runs and must pass, so the one run on a lent GPU does not fail on bookkeeping.
Its figures are the CPU's and say nothing about a GPU.

Settings: ``FAKE_CUPY_DEVICES`` (the device count, default 1: every rank
shares "GPU 0"), ``FAKE_CUPY_IPC=0`` (private arrays, no IPC stand-in).
"""
import os
import sys

import numpy as _np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import fakedevice as _fd  # tests/support, put on the path just above

from . import cuda  # noqa: F401

__version__ = "0.0-standin"

ndarray = _fd.FakeDeviceArray
_fd.install()
_fd.enable_ipc(os.environ.get("FAKE_CUPY_IPC", "1") != "0")


def _host(x, dtype=None):
    if isinstance(x, ndarray):
        raise TypeError("expected host data")
    return _np.asarray(x, dtype=dtype)


def asarray(x, dtype=None):
    """A device array of ``x`` (``x`` itself when it is one of that dtype already)."""
    if isinstance(x, ndarray):
        return x if dtype is None or x.dtype == _np.dtype(dtype) else x.astype(dtype)
    return _fd.to_device(_host(x, dtype))


def array(x, dtype=None):
    """A new device array holding a copy of ``x``."""
    if isinstance(x, ndarray):
        return x.astype(x.dtype if dtype is None else dtype)
    return _fd.to_device(_host(x, dtype))


def asnumpy(a, out=None):
    """A host copy of ``a`` (into ``out`` when given), as ``cupy.asnumpy``."""
    if not isinstance(a, ndarray):
        return _np.asarray(a)
    return a.get(out=out)


def empty(shape, dtype=float):
    return _fd.device_empty(shape, dtype)


def empty_like(a, dtype=None):
    return empty(a.shape, a.dtype if dtype is None else dtype)


def _filled(shape, dtype, value):
    a = empty(shape, dtype)
    a[...] = value
    return a


def zeros(shape, dtype=float):
    return _filled(shape, dtype, 0)


def ones(shape, dtype=float):
    return _filled(shape, dtype, 1)


def full(shape, value, dtype=None):
    return _filled(shape, _np.asarray(value).dtype if dtype is None else dtype, value)


def zeros_like(a, dtype=None):
    return zeros(a.shape, a.dtype if dtype is None else dtype)


def arange(*args, dtype=None):
    return _fd.to_device(_np.arange(*args, dtype=dtype))


def copyto(dst, src):
    dst[...] = src


def from_dlpack(obj):
    raise NotImplementedError("the CuPy stand-in imports no DLPack objects")


def __getattr__(name):
    # NumPy's dtypes and ufuncs: the ufuncs dispatch to the fake arrays (__array_ufunc__).
    obj = getattr(_np, name, None)
    if isinstance(obj, (_np.ufunc, type)) and (not isinstance(obj, type) or
                                               issubclass(obj, _np.generic)):
        return obj
    raise AttributeError(f"module 'cupy' (the CPU stand-in) has no attribute {name!r}")
