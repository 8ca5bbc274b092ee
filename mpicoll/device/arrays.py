"""Device (GPU) buffers: which arrays live on a device, and how their bytes reach MPI.

An *adapter* knows one device array library (CuPy here; tests register a
CPU stand-in): its memory address, stream synchronisation, copies to and
from host memory, allocation and ufuncs. Algorithms never see an adapter;
they allocate through :func:`empty` and reduce through :func:`.reduce.combine`,
which pick the array's own library, so device data is reduced on the device.

The point-to-point layer hands MPI a *transport* instead of the bare
communicator (same method names and signatures as ``MPI.Comm``):

- host arrays: the communicator itself;
- device arrays, CUDA-aware MPI: :class:`AwareTransport` synchronises the
  current stream before every call (MPI must not read data a kernel is still
  writing, nor receive into memory a kernel still reads), then passes the
  device array as it is;
- device arrays, MPI not CUDA-aware: :class:`StagedTransport` copies each
  message through page-locked host memory from a per-thread, per-device
  :class:`PinnedArena` that is reused across calls, so MPI never sees a
  device pointer (a non-aware MPI would dereference it on the host and
  crash the process);
- device arrays, peers on the same node: :class:`mpicoll.device.ipc.IpcTransport`
  maps the peer's allocation through CUDA IPC and moves (or reduces) the
  payload device to device; other peers take one of the two above.

:func:`set_transport` / ``MPICOLL_GPU_TRANSPORT=auto|ipc|aware|staged``
chooses (:func:`transport_choice`); ``auto`` takes ``ipc`` for same-node
peers where the array library's IPC works, and for the others the CUDA-aware
path where MPI is CUDA-aware, else the staged one.

This module holds the adapters; the transports and their choice live in
:mod:`.transport`, the pinned arenas in :mod:`.arena`. Their public names are
re-exported here, where the rest of the package imports them from (setting
:data:`mpicoll.device.transport.IPC` is the one thing done on its own module).
"""
import contextlib
import sys
import threading

import numpy as np

# re-exported (see the module doc)
from .arena import ALIGN, ON_RELEASE, PinnedArena, arena_for, release_staging, staging_stats  # noqa: F401
from .transport import (  # noqa: F401
    HOST_COPY_MAX,
    KEY_PARTS,
    LIBRARY_SOURCES,
    TRANSPORTS,
    AwareTransport,
    StagedTransport,
    collectives_aware,
    cuda_aware_decision,
    env_bytes,
    host_copy_max,
    ipc_support,
    set_cuda_aware,
    set_transport,
    speaks_ipc,
    transport,
    transport_choice,
    transport_key,
)

__all__ = ["adapter_of", "register_adapter", "data_ptr", "empty", "transport",
           "PinnedArena", "AwareTransport", "StagedTransport", "set_cuda_aware",
           "cuda_aware_decision", "staging_stats", "release_staging", "set_transport",
           "transport_choice", "ipc_support", "speaks_ipc", "host_copy_max", "TRANSPORTS"]


class CupyAdapter:
    """CuPy arrays (``cupy.ndarray``); imported only when one is seen."""

    name = "cupy"

    def __init__(self):
        import cupy
        self.cupy = cupy
        # Before CuPy 13, a copy to the host under a non-default current stream returned
        # before it was done (cupy#7820): the machine image's CuPy may be that old.
        try:
            self._async_get = int(getattr(cupy, "__version__", "").split(".")[0]) < 13
        except ValueError:
            self._async_get = True

    @staticmethod
    def matches(obj):
        # A CuPy array (or subclass) can only exist once cupy is imported.
        cp = sys.modules.get("cupy")
        return cp is not None and isinstance(obj, getattr(cp, "ndarray", ()))

    def on_device(self, device):
        """Context: make ``device`` current (kernels, streams and copies go there)."""
        return self.cupy.cuda.Device(device)

    @staticmethod
    def ptr(a):
        return a.data.ptr

    @staticmethod
    def device_id(a):
        return a.device.id

    def sync(self):
        # The data a collective reads or overwrites was produced on the current
        # stream (CuPy's default); MPI runs on the host and cannot wait on it.
        self.cupy.cuda.get_current_stream().synchronize()

    def to_host(self, dev, host):
        # Ordered after the kernels queued on the current stream; returns
        # when the copy is done (blocking by default).
        self.cupy.asnumpy(dev, out=host.reshape(dev.shape))
        if self._async_get:
            self.sync()

    def to_device(self, host, dev):
        dev.set(host.reshape(dev.shape))
        # The host staging slot is reused at once: the copy must be done.
        self.sync()

    def pinned(self, nbytes):
        mem = self.cupy.cuda.alloc_pinned_memory(max(nbytes, 1))
        return np.frombuffer(mem, np.uint8, nbytes)

    def empty(self, like, shape, dtype):
        with like.device:
            return self.cupy.empty(shape, dtype=dtype)

    def ufunc(self, name):
        return getattr(self.cupy, name)

    @staticmethod
    def asnumpy(a):
        return a.get()

    # -- CUDA IPC (mpicoll.device.ipc) ---------------------------------------------
    _ipc_status = None
    _exports = None

    def ipc_supported(self):
        """(ok, why): whether this process can export and map device memory via CUDA IPC."""
        if self._ipc_status is None:
            self._ipc_status = self._probe_ipc()
        return self._ipc_status

    def _probe_ipc(self):
        rt = self.cupy.cuda.runtime
        if getattr(rt, "is_hip", False):
            return False, "ROCm/HIP build of CuPy (mpicoll's IPC transport is CUDA only)"
        if not sys.platform.startswith("linux"):
            return False, f"CUDA IPC is supported on Linux only (here: {sys.platform})"
        if not hasattr(rt, "ipcGetMemHandle"):
            return False, "this CuPy has no cupy.cuda.runtime.ipcGetMemHandle"
        try:
            from .cuda_driver import cuda_driver
            cuda_driver()
        except (OSError, AttributeError) as exc:
            return False, f"the CUDA driver library cannot be loaded ({exc})"
        return True, "CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle)"

    _thread = threading.local()

    def _context(self):
        """Make sure this thread has the current device's CUDA context current.

        Needed before a driver call: a thread that made no runtime call on it yet (the
        progress thread) has none, and the driver's calls then fail
        (CUDA_ERROR_INVALID_CONTEXT). ``cudaFree(0)`` makes it current; once per thread and
        device.
        """
        rt = self.cupy.cuda.runtime
        ready = getattr(self._thread, "ready", None)
        if ready is None:
            ready = self._thread.ready = set()
        dev = rt.getDevice()
        if dev not in ready:
            rt.free(0)
            ready.add(dev)

    def ipc_export(self, a):
        """(base, generation, handle, offset, size) of the allocation holding ``a``."""
        from .cuda_driver import cuda_driver
        drv = cuda_driver()
        self._context()
        ptr = a.data.ptr
        base, size = drv.address_range(ptr)
        gen = drv.buffer_id(base)
        if self._exports is None:
            self._exports = {}
        hit = self._exports.get(base)
        if hit is None or hit[0] != gen:
            if not drv.ipc_capable(base):
                raise ValueError("memory not from cudaMalloc (stream-ordered or managed)")
            if len(self._exports) >= 4096:
                self._exports.clear()
            hit = self._exports[base] = (gen, self.cupy.cuda.runtime.ipcGetMemHandle(base))
        return base, gen, hit[1], ptr - base, size

    def ipc_open(self, handle, size):
        # Lazy peer access: a peer on another GPU is mapped where deviceCanAccessPeer allows.
        return self.cupy.cuda.runtime.ipcOpenMemHandle(handle)

    def ipc_check(self, mapping, size):
        """(ok, why): whether the pointer opened is the start of the peer's allocation.

        That is, of a range of exactly ``size`` bytes. None when the driver cannot say.

        CUDA may carve small ``cudaMalloc`` allocations out of one larger block, and IPC
        then shares the whole block: where the pointer opened is not that allocation,
        reading at the sender's offset from it could read other bytes
        (:meth:`mpicoll.device.ipc.Endpoint.mapping` then refuses the mapping).
        """
        from .cuda_driver import cuda_driver
        try:
            got = cuda_driver().address_range(mapping)
        except RuntimeError as exc:
            return None, str(exc)
        if got == (mapping, size):
            return True, ""
        return False, (f"the mapping is not the exported allocation: cuMemGetAddressRange "
                       f"gives base {got[0]:#x}, {got[1]} bytes for the pointer opened, "
                       f"{mapping:#x}; the sender's allocation has {size} bytes")

    def ipc_close(self, mapping):
        self.cupy.cuda.runtime.ipcCloseMemHandle(mapping)

    def ipc_array(self, mapping, offset, dtype, count):
        cp = self.cupy
        nbytes = count * np.dtype(dtype).itemsize
        mem = cp.cuda.UnownedMemory(mapping + offset, nbytes, None)
        return cp.ndarray((count,), dtype, cp.cuda.MemoryPointer(mem, 0))

    def copy(self, dst, src):
        """``dst[...] = src`` device to device on the current stream (asynchronous)."""
        if src.nbytes:
            dst.data.copy_from_device_async(src.data, src.nbytes)


_adapters = []           # registered adapter instances (tests add stand-ins)
_cupy_adapter = None


def register_adapter(adapter):
    """Teach mpicoll another device array type (``adapter.matches(obj)``)."""
    if adapter not in _adapters:
        _adapters.append(adapter)


def adapter_of(obj):
    """The adapter of a device array, or None for host memory (and anything else)."""
    global _cupy_adapter
    if type(obj) is np.ndarray or obj is None:
        return None
    for ad in _adapters:
        if ad.matches(obj):
            return ad
    if "cupy" in sys.modules and CupyAdapter.matches(obj):
        if _cupy_adapter is None:
            _cupy_adapter = CupyAdapter()
        return _cupy_adapter
    return None


def on_device(adapter, device):
    """Context making the arrays' device current for one call (a no-op for host data)."""
    if adapter is None:
        return contextlib.nullcontext()
    return adapter.on_device(device)


def data_ptr(a):
    """Address of an array's first byte, host or device."""
    ad = adapter_of(a)
    return a.__array_interface__["data"][0] if ad is None else ad.ptr(a)


def empty(like, shape, dtype=None):
    """Uninitialised array of ``shape`` in the same memory (host or device) as ``like``."""
    dtype = like.dtype if dtype is None else dtype
    ad = adapter_of(like)
    return np.empty(shape, dtype=dtype) if ad is None else ad.empty(like, shape, dtype)
