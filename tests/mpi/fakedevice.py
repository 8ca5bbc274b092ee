"""A CPU stand-in for a CuPy array, so the device path runs without a GPU.

``FakeDeviceArray`` behaves like ``cupy.ndarray`` where it matters to
mpicoll: it has no buffer protocol and refuses implicit conversion to and
from NumPy (so a device array can never reach MPI, nor be mixed with host
data, by accident), it dispatches NumPy ufuncs and functions to itself, and
it exposes ``__cuda_array_interface__`` -- whose pointer is host memory, so a
CPU-only MPI can follow it exactly as a CUDA-aware MPI follows a CuPy
array's. Every export through that interface is counted: on the staged path
the count must stay zero.

``FakeAdapter`` is its :mod:`mpicoll._device` adapter; it counts stream
synchronisations, copies each way and pinned allocations.
"""
import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["FakeDeviceArray", "FakeAdapter", "ADAPTER", "install", "to_device", "to_host"]


class _Device:
    id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeDeviceArray(NDArrayOperatorsMixin):
    """A 'device' array whose memory is a private NumPy array."""

    __slots__ = ("_a",)
    exports = 0             # __cuda_array_interface__ reads (i.e. MPI saw a device pointer)

    def __init__(self, a):
        assert isinstance(a, np.ndarray)
        self._a = a

    # array attributes -----------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    ndim = property(lambda self: self._a.ndim)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    device = property(lambda self: _Device())
    T = property(lambda self: FakeDeviceArray(self._a.T))

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return f"FakeDeviceArray({self._a!r})"

    def __getitem__(self, key):
        return FakeDeviceArray(np.asarray(self._a[key]))

    def __setitem__(self, key, value):
        self._a[key] = _unwrap(value)

    def reshape(self, *shape):
        return FakeDeviceArray(self._a.reshape(*shape))

    def ravel(self):
        return FakeDeviceArray(self._a.ravel())

    def copy(self):
        return FakeDeviceArray(self._a.copy())

    def view(self, dtype):
        return FakeDeviceArray(self._a.view(dtype))

    def astype(self, dtype):
        return FakeDeviceArray(self._a.astype(dtype))

    # CuPy's explicit transfers -------------------------------------------
    def get(self, out=None):
        if out is None:
            return self._a.copy()
        out[...] = self._a
        return out

    def set(self, host):
        if not isinstance(host, np.ndarray):
            raise TypeError(f"set: expected a NumPy array; got {type(host).__name__}")
        self._a[...] = host

    # what CuPy refuses ----------------------------------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed "
                        "(fake device array; use .get())")

    @property
    def __cuda_array_interface__(self):
        FakeDeviceArray.exports += 1
        a = self._a
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
                "version": 3, "strides": None, "stream": None}

    # NumPy dispatch ---------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [_unwrap(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(x) for x in kwargs["out"])
        res = getattr(ufunc, method)(*inputs, **kwargs)
        return _wrap(res)

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*[_unwrap(a) for a in args],
                          **{k: _unwrap(v) for k, v in kwargs.items()}))


def _unwrap(x):
    if isinstance(x, FakeDeviceArray):
        return x._a
    if isinstance(x, np.ndarray):
        raise TypeError("Unsupported type <class 'numpy.ndarray'> (fake device arrays, like "
                        "CuPy's, do not mix with host arrays)")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return FakeDeviceArray(x)
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    return x


class FakeAdapter:
    """mpicoll._device adapter for FakeDeviceArray, with counters."""

    name = "fake"

    def __init__(self):
        self.reset()

    def reset(self):
        self.syncs = self.d2h = self.h2d = self.pinned_blocks = 0

    @staticmethod
    def matches(obj):
        return isinstance(obj, FakeDeviceArray)

    @staticmethod
    def ptr(a):
        return a._a.__array_interface__["data"][0]

    @staticmethod
    def device_id(a):
        return 0

    @staticmethod
    def on_device(device):
        return _Device()

    def sync(self):
        self.syncs += 1

    def to_host(self, dev, host):
        assert isinstance(host, np.ndarray)
        host.reshape(dev.shape)[...] = dev._a
        self.d2h += 1

    def to_device(self, host, dev):
        assert isinstance(host, np.ndarray)
        dev._a[...] = host.reshape(dev.shape)
        self.h2d += 1

    def pinned(self, nbytes):
        self.pinned_blocks += 1
        return np.empty(nbytes, np.uint8)

    @staticmethod
    def empty(like, shape, dtype):
        return FakeDeviceArray(np.empty(shape, dtype=dtype))

    @staticmethod
    def ufunc(name):
        fn = getattr(np, name)

        def device_ufunc(*args, out=None):
            with np.errstate(all="ignore"):
                fn(*[_unwrap(a) for a in args], out=_unwrap(out))
            return out
        return device_ufunc

    @staticmethod
    def asnumpy(a):
        return a._a.copy()


ADAPTER = FakeAdapter()


def install():
    """Register the adapter with mpicoll (idempotent); return it."""
    from mpicoll import _device
    _device.register_adapter(ADAPTER)
    return ADAPTER


def to_device(a):
    return FakeDeviceArray(np.array(a, copy=True))


def to_host(x):
    return x._a.copy() if isinstance(x, FakeDeviceArray) else np.asarray(x)
