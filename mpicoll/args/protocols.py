"""Buffers with only DLPack or only the CUDA array interface, as arrays sharing their memory.

mpi4py takes, after the buffer protocol, any object with ``__dlpack__`` /
``__dlpack_device__`` and any object with ``__cuda_array_interface__``
(what JAX, PyTorch, Numba and CuPy hand over). :class:`mpicoll.P2PComm`
takes them too, through :func:`as_shared_array`, which returns a NumPy array
(host memory) or a CuPy array (device memory) over the *same* memory — no
copy, so what a collective writes lands in the caller's object:

- DLPack on the host (``kDLCPU``): borrowed as mpi4py borrows it
  (``MPI.buffer(obj)`` holds the capsule without consuming it, so the
  producer's capsule destructor releases the tensor when the view dies, as
  with mpi4py; ``numpy.from_dlpack`` would take ownership, which producers
  that free the tensor with their capsule — mpi4py's own test helper among
  them — do not survive), typed by the tensor's ``DLDataType``.
- DLPack on a CUDA device (``kDLCUDA``, ``kDLCUDAManaged``):
  ``cupy.from_dlpack``, then mpicoll's device path (CUDA-aware MPI or
  staging through pinned memory); without CuPy, an error.
- ``__cuda_array_interface__``: mpi4py passes the pointer to MPI as it is,
  whatever memory it points to. mpicoll reads and reduces the data itself,
  so it asks CUDA where the pointer lives: host memory (a CAI object over a
  NumPy array, pinned host memory, or any pointer in a process where no CUDA
  driver is present) becomes a NumPy view; device memory a CuPy array
  (``cupy.asarray``), or an error without CuPy. A pointer CUDA cannot place
  is refused rather than dereferenced on the host.

Other DLPack devices (ROCm, OneAPI, ...) are refused with their name.
"""
import ctypes
import ctypes.util
import sys

import numpy as np
from mpi4py import MPI

from ..core.errors import ArgumentError, ArgumentTypeError, describe
from ..device.arrays import adapter_of

__all__ = ["as_base_array", "as_shared_array", "pointer_memory"]

# dlpack.h's DLDeviceType values
_KDL = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
        8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
        13: "kDLCUDAManaged", 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon", 17: "kDLMAIA"}
_CPU, _CUDA, _CUDA_MANAGED = 1, 2, 13


def as_base_array(argname, buf):
    """Any buffer mpi4py takes -> a NumPy or device array over its memory (no copy).

    NumPy and device arrays as they are; the buffer protocol (bytearray,
    array.array, memoryview, ...) typed by its format, else as bytes; then
    DLPack and the CUDA array interface, in mpi4py's order.
    """
    if isinstance(buf, np.ndarray) or adapter_of(buf) is not None:
        return buf
    try:
        mem = memoryview(buf)
    except TypeError:
        arr = as_shared_array(argname, buf)
        if arr is None:
            raise ArgumentTypeError(
                f"{argname}: expected a buffer (NumPy array, bytearray, array.array, an object "
                f"with __dlpack__ or __cuda_array_interface__, ...) or an mpi4py buffer "
                f"specification [buf, count, datatype]; got {describe(buf)}") from None
        return arr
    try:
        return np.frombuffer(mem, dtype=np.dtype(mem.format) if mem.format else np.uint8)
    except (ValueError, TypeError):
        return np.frombuffer(mem, np.uint8)


def as_shared_array(argname, obj):
    """A NumPy or CuPy array over ``obj``'s memory (DLPack or CAI objects); else None."""
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(argname, obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(argname, obj)
    return None


def _cupy(argname, what):
    try:
        import cupy
    except ImportError:
        raise ArgumentError(
            f"{argname}: {what} needs CuPy, which mpicoll uses to reduce and stage device "
            f"memory (pip install cupy-cuda12x); CuPy is not installed", MPI.ERR_BUFFER) from None
    return cupy


def _from_dlpack(argname, obj):
    try:
        device = obj.__dlpack_device__()
        kind = int(device[0])
    except (AttributeError, TypeError, ValueError, IndexError):
        raise ArgumentTypeError(
            f"{argname}: expected a DLPack object with __dlpack_device__() -> (device type, id); "
            f"{type(obj).__name__} has __dlpack__ but no usable __dlpack_device__") from None
    if kind == _CPU:
        try:
            mem = MPI.buffer(obj)         # mpi4py's import: checks shape and contiguity
            return np.frombuffer(mem, _dl_dtype(mem.obj))
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise ArgumentError(f"{argname}: cannot view this host DLPack object "
                                f"({type(obj).__name__}): {exc}", MPI.ERR_BUFFER) from None
    if kind in (_CUDA, _CUDA_MANAGED):
        cp = _cupy(argname, f"a DLPack object on a CUDA device ({_KDL[kind]})")
        try:
            return cp.from_dlpack(obj)
        except Exception as exc:   # CuPy's errors vary by version
            raise ArgumentError(f"{argname}: CuPy cannot view this DLPack object "
                                f"({type(obj).__name__}): {exc}", MPI.ERR_BUFFER) from None
    raise ArgumentError(
        f"{argname}: expected host (kDLCPU) or CUDA (kDLCUDA) memory from DLPack; got device "
        f"type {_KDL.get(kind, kind)}, which mpicoll cannot read or reduce", MPI.ERR_BUFFER)


_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _DLDataType(ctypes.Structure):       # dlpack.h's DLDataType
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensorHead(ctypes.Structure):     # dlpack.h's DLTensor, up to its dtype
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32), ("dtype", _DLDataType)]


class _DLManagedVersionedHead(ctypes.Structure):   # DLManagedTensorVersioned, up to dl_tensor
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensorHead)]


# The legacy DLManagedTensor starts with its DLTensor. Codes: kDLInt, kDLUInt, kDLFloat,
# kDLComplex, kDLBool; float x 2 lanes is complex (mpi4py reads it so).
_DL_CAPSULES = ((b"dltensor_versioned", _DLManagedVersionedHead.dl_tensor.offset),
                (b"dltensor", 0))
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}


def _dl_dtype(capsule):
    """The element dtype of a DLPack capsule's tensor; bytes (as mpi4py) for other types."""
    for name, offset in _DL_CAPSULES:
        if _capsule_valid(capsule, name):
            dt = _DLDataType.from_address(_capsule_pointer(capsule, name) + offset
                                          + _DLTensorHead.dtype.offset)
            kind, bits, lanes = _DL_KINDS.get(dt.code), dt.bits, dt.lanes
            if kind == "f" and lanes == 2:     # a complex number as 2 lanes of float, as mpi4py
                kind, bits, lanes = "c", 2 * bits, 1
            if kind is None or lanes != 1 or bits % 8:
                return np.dtype(np.uint8)
            if kind == "b":
                return np.dtype(np.bool_) if bits == 8 else np.dtype(np.uint8)
            try:
                return np.dtype(f"{kind}{bits // 8}")
            except TypeError:
                return np.dtype(np.uint8)
    raise BufferError("not a DLPack capsule")


class _HostView:
    """``__array_interface__`` over a CAI dict pointing to host memory; keeps the owner alive."""

    __slots__ = ("owner", "__array_interface__")

    def __init__(self, owner, cai):
        self.owner = owner
        self.__array_interface__ = {
            "version": 3, "shape": tuple(cai["shape"]), "typestr": cai["typestr"],
            "data": (int(cai["data"][0] or 0), bool(cai["data"][1])),
            "strides": None if cai.get("strides") is None else tuple(cai["strides"]),
        }


def _from_cai(argname, obj):
    try:
        cai = obj.__cuda_array_interface__
        ptr = int(cai["data"][0] or 0)
        shape = tuple(cai["shape"])
        cai["typestr"]
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        raise ArgumentTypeError(
            f"{argname}: expected a __cuda_array_interface__ dict with data, shape and typestr; "
            f"{type(obj).__name__} has none usable") from None
    if cai.get("mask") is not None:
        raise ArgumentError(f"{argname}: masked CUDA arrays cannot be sent (mpi4py refuses "
                            f"them too)", MPI.ERR_BUFFER)
    size = 1
    for s in shape:
        size *= int(s)
    where = pointer_memory(ptr) if size else "host"
    if where == "host":
        return np.asarray(_HostView(obj, cai))
    if where == "unknown":
        raise ArgumentError(
            f"{argname}: CUDA cannot tell whether the __cuda_array_interface__ pointer "
            f"{ptr:#x} is host or device memory; mpicoll reads the data itself and will not "
            f"guess (pass a NumPy or CuPy array)", MPI.ERR_BUFFER)
    cp = _cupy(argname, f"{where} memory given through __cuda_array_interface__")
    return cp.asarray(obj)


_libcuda = None


def _driver():
    """The CUDA driver library, or False where the process has none."""
    global _libcuda
    if _libcuda is None:
        _libcuda = False
        for name in ("libcuda.so.1", ctypes.util.find_library("cuda")):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
                fn = lib.cuPointerGetAttribute
            except (OSError, AttributeError):
                continue
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
            _libcuda = fn
            break
    return _libcuda


def pointer_memory(ptr):
    """Where ``ptr`` lives: ``"host"``, ``"device"``, ``"managed"`` or ``"unknown"``.

    CuPy's ``pointerGetAttributes`` when CuPy is loaded (or loadable); else
    the CUDA driver's ``cuPointerGetAttribute``; a process without a CUDA
    driver has no device memory, so its pointers are host memory.
    """
    cp = sys.modules.get("cupy")
    if cp is None:
        try:
            import cupy as cp
        except ImportError:
            cp = None
    if cp is not None:
        try:
            kind = int(cp.cuda.runtime.pointerGetAttributes(ptr).type)
        except Exception:          # no GPU, or a pointer CUDA does not know
            return "host"
        return {0: "host", 1: "host", 2: "device", 3: "managed"}.get(kind, "unknown")
    fn = _driver()
    if not fn:
        return "host"
    value = ctypes.c_uint(0)
    rc = fn(ctypes.byref(value), 2, ptr)      # CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    if rc == 0:
        return {1: "host", 2: "device"}.get(value.value, "unknown")
    # CUDA_ERROR_INVALID_VALUE: not CUDA memory; NOT_INITIALIZED / DEINITIALIZED: no CUDA
    # context in this process, so no device memory either.
    return "host" if rc in (1, 3, 4) else "unknown"
