"""Tensors as the arrays mpicoll's algorithms run on: views of the tensors' own memory.

A CPU tensor becomes a NumPy view, a CUDA tensor a CuPy view (both through
DLPack: no copy; the storage stays resizable, as FSDP needs). Small views (the memo's 64 KiB) are
kept in a small cache keyed by address, length and dtype, so that a repeated
call on the same tensor hands mpicoll the same array object and takes its
memo's fast path; the cache keeps those few tensors' memory alive (at most
:data:`_CACHE_ENTRIES` of them, 64 KiB each).

Dtypes: NumPy has no bfloat16, and an MPI library may lack a 16-bit float
type. Such tensors travel as 16-bit integers (their bits) and are reduced by
the user ops of :mod:`._ops`, which do the arithmetic in torch on the real
dtype. Every other torch dtype that MPI can send maps to its NumPy twin.
"""
from collections import OrderedDict

import numpy as np
import torch
from mpi4py import MPI

from ..core.errors import ArgumentError, ArgumentTypeError, describe

__all__ = ["SUPPORTED", "Carrier", "carrier", "view", "flat_views", "consecutive", "cuda_stream"]

_CACHE_ENTRIES = 256
_CACHE_BYTES = 1 << 16          # the memo's limit: larger calls gain nothing from the cache
_cache = OrderedDict()


class Carrier:
    """How one torch dtype travels.

    The NumPy dtype of its view, and whether MPI and NumPy can reduce it as they are (else
    :mod:`._ops` reduces it in torch).
    """

    __slots__ = ("torch_dtype", "view_as", "np_dtype", "native_math")

    def __init__(self, torch_dtype, view_as, native_math):
        self.torch_dtype = torch_dtype
        self.view_as = view_as            # torch dtype of the view handed to NumPy/CuPy
        self.np_dtype = np.dtype(torch.empty(0, dtype=view_as).numpy().dtype)
        self.native_math = native_math


def _mpi_has(np_dtype):
    try:
        t = MPI.Datatype.fromcode(np.dtype(np_dtype).char)
        return t != MPI.DATATYPE_NULL and t.Get_size() == np.dtype(np_dtype).itemsize
    except (KeyError, ValueError, TypeError):
        return False


def _carriers():
    out = {}
    plain = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
             torch.float32, torch.float64, torch.complex64, torch.complex128]
    plain += [getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)]
    for dt in plain:
        out[dt] = Carrier(dt, dt, True)
    out[torch.float16] = (Carrier(torch.float16, torch.float16, True) if _mpi_has(np.float16)
                          else Carrier(torch.float16, torch.int16, False))
    out[torch.bfloat16] = Carrier(torch.bfloat16, torch.int16, False)
    return out


#: torch dtype -> :class:`Carrier`, for every dtype the backend runs.
SUPPORTED = _carriers()


def carrier(argname, t):
    """The :class:`Carrier` of tensor ``t``'s dtype; ArgumentError naming the argument if none."""
    c = SUPPORTED.get(t.dtype)
    if c is None:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED)
        raise ArgumentError(
            f"{argname}: the mpicoll backend runs tensors of dtype {names}; got {t.dtype}",
            MPI.ERR_TYPE)
    return c


def _check(argname, t):
    if not isinstance(t, torch.Tensor):
        raise ArgumentTypeError(f"{argname}: expected a torch.Tensor; got {describe(t)}")
    if t.layout != torch.strided:
        raise ArgumentError(
            f"{argname}: expected a dense (strided) tensor; got layout {t.layout}",
            MPI.ERR_BUFFER)
    if t.device.type not in ("cpu", "cuda"):
        raise ArgumentError(
            f"{argname}: expected a CPU or CUDA tensor; got one on {t.device}", MPI.ERR_BUFFER)
    if not t.is_contiguous():
        raise ArgumentError(
            f"{argname}: Tensors must be contiguous (got shape {tuple(t.shape)} with strides "
            f"{t.stride()}; use .contiguous())", MPI.ERR_BUFFER)


def view(argname, t):
    """A flat NumPy (CPU) or CuPy (CUDA) view of tensor ``t``'s memory, in its carrier dtype.

    Raises :class:`mpicoll.ArgumentError` naming ``argname`` for what the backend
    cannot run: not a tensor, sparse, another device, non-contiguous, another dtype.
    """
    try:
        key = (t.data_ptr(), t.numel(), t.dtype, t.device)
    except (AttributeError, RuntimeError, TypeError):
        key = None                       # not a tensor, or one without storage: checked below
    else:
        a = _cache.get(key)
        if a is not None and t.is_contiguous():   # a transposed view has the same key
            return a
    _check(argname, t)
    c = carrier(argname, t)
    flat = t.detach().reshape(-1)
    if c.view_as is not c.torch_dtype:
        flat = flat.view(c.view_as)
    if t.device.type == "cpu":
        # DLPack, not tensor.numpy(): .numpy() marks the storage not resizable, and FSDP frees
        # and regrows its flat parameters' storage (resize_) between the calls that fill them.
        a = np.from_dlpack(flat)
    else:
        import cupy
        a = cupy.from_dlpack(flat)
    if key is not None and a.nbytes <= _CACHE_BYTES:
        if t.device.type == "cpu":
            # A view of the DLPack array: its base is then an array of the tensor's own size,
            # which the memo can key on (it refuses views of bases it cannot size).
            a = a.view()
        _cache[key] = a
        if len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return a


def flat_views(argname, tensors):
    """:func:`view` of each tensor of a list (``argname[i]`` named in errors)."""
    if not isinstance(tensors, (list, tuple)):
        raise ArgumentTypeError(f"{argname}: expected a list of tensors; got {describe(tensors)}")
    return [view(f"{argname}[{i}]", t) for i, t in enumerate(tensors)]


def consecutive(tensors):
    """True when the tensors lie back to back in one storage, in list order.

    As the chunks of one tensor do (as ``torch.chunk`` makes them): one buffer then holds
    them all.
    """
    if not tensors:
        return False
    first = tensors[0]
    try:
        storage = first.untyped_storage().data_ptr()
    except RuntimeError:
        return False
    ptr = first.data_ptr()
    for t in tensors:
        if (t.data_ptr() != ptr or t.untyped_storage().data_ptr() != storage
                or t.dtype != first.dtype or t.device != first.device or not t.is_contiguous()):
            return False
        ptr += t.numel() * t.element_size()
    return True


def cuda_stream(t):
    """A context that makes CuPy work on torch's current stream of tensor ``t``'s device.

    So mpicoll's kernels and copies follow torch's stream order. For a CPU tensor, or None:
    nothing.
    """
    if t is None or not t.is_cuda:
        return _NULL
    import cupy
    stream = torch.cuda.current_stream(t.device)
    return cupy.cuda.ExternalStream(stream.cuda_stream, t.device.index)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _Null()
