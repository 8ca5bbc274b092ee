"""A CPU stand-in for a CuPy array, so the device path runs without a GPU.

``FakeDeviceArray`` behaves like ``cupy.ndarray`` where it matters to
mpicoll: it has no buffer protocol and refuses implicit conversion to and
from NumPy (so a device array can never reach MPI, nor be mixed with host
data, by accident), it dispatches NumPy ufuncs and functions to itself, and
it exposes ``__cuda_array_interface__`` -- whose pointer is host memory, so a
CPU-only MPI can follow it exactly as a CUDA-aware MPI follows a CuPy
array's. Every export through that interface is counted: on the staged path
the count must stay zero.

``FakeAdapter`` is its :mod:`mpicoll.device.arrays` adapter; it counts stream
synchronisations, copies each way and pinned allocations.

IPC (:func:`enable_ipc`): the stand-in of CUDA IPC for :mod:`mpicoll.device.ipc`.
Device memory then comes from :data:`POOL`, whose *allocations* are files in
``/dev/shm`` mapped into the process: arrays under 64 KiB are carved out of
shared 1 MiB allocations (at offsets, like CuPy's pool blocks), larger ones
get their own. An allocation has a virtual *base address* -- reused for a
new allocation of the same size once the old one is freed, as ``cudaMalloc``
reuses addresses -- and a *generation* that is new every time (the stand-in
of ``CU_POINTER_ATTRIBUTE_BUFFER_ID``). An exported handle names the file;
another rank opens it by mapping the file. An allocation is freed when the
last array viewing it goes away (its file is unlinked then; mappings other
ranks hold stay valid). The adapter counts exports, opens, closes and
device-to-device copies; ``ipc_refuse`` makes this rank fail to open any
handle (a peer it cannot map).
"""
import atexit
import mmap
import os
import weakref

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["FakeDeviceArray", "FakeAdapter", "ADAPTER", "POOL", "install", "to_device",
           "to_host", "enable_ipc", "device_empty"]


class _Device:
    id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeDeviceArray(NDArrayOperatorsMixin):
    """A 'device' array whose memory is a private NumPy array."""

    __slots__ = ("_a", "_base", "__weakref__")    # weakly referable, as cupy.ndarray is
    exports = 0             # __cuda_array_interface__ reads (i.e. MPI saw a device pointer)

    def __init__(self, a, base=None):
        assert isinstance(a, np.ndarray)
        self._a = a
        self._base = base

    def _view(self, a):
        # As CuPy's views: ``base`` is the array that owns the memory.
        return FakeDeviceArray(a, self._base if self._base is not None else self)

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
    T = property(lambda self: self._view(self._a.T))
    base = property(lambda self: self._base)

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return f"FakeDeviceArray({self._a!r})"

    def __getitem__(self, key):
        return self._view(np.asarray(self._a[key]))

    def __setitem__(self, key, value):
        self._a[key] = _unwrap(value)

    def reshape(self, *shape):
        return self._view(self._a.reshape(*shape))

    def ravel(self):
        return self._view(self._a.ravel())

    def copy(self):
        return FakeDeviceArray(self._a.copy())

    def view(self, dtype):
        return self._view(self._a.view(dtype))

    def astype(self, dtype):
        return FakeDeviceArray(self._a.astype(dtype))

    def sum(self):
        return FakeDeviceArray(np.asarray(self._a.sum()))    # 0-d, on the device, as CuPy's

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
    """mpicoll.device.arrays adapter for FakeDeviceArray, with counters."""

    name = "fake"

    def __init__(self):
        self.reset()

    ipc_enabled = False        # device memory in shared memory, IPC handles exported
    ipc_refuse = False         # opening a peer's handle fails on this rank
    ipc_mismatch = False       # a mapping opened on this rank is not the peer's allocation

    def reset(self):
        self.syncs = self.d2h = self.h2d = self.pinned_blocks = 0
        self.ipc_exports = self.ipc_opens = self.ipc_closes = self.d2d = 0

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

    def empty(self, like, shape, dtype):
        return device_empty(shape, dtype)

    # -- IPC --------------------------------------------------------------------
    def ipc_supported(self):
        if self.ipc_enabled:
            return True, "fake IPC: /dev/shm allocations (tests/support/fakedevice.py)"
        return False, "fake IPC is off (fakedevice.enable_ipc())"

    def ipc_export(self, a):
        ptr = self.ptr(a)
        seg = POOL.find(ptr)
        if seg is None:
            raise ValueError("not in a shared-memory allocation (a private fake array)")
        self.ipc_exports += 1
        return seg.base, seg.gen, seg.name.encode(), ptr - seg.start, seg.size

    def ipc_open(self, handle, size):
        if self.ipc_refuse:
            raise RuntimeError("fake: this rank cannot map its peers' memory (ipc_refuse)")
        fd = os.open(os.path.join(_SHM, handle.decode()), os.O_RDWR)
        try:
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.ipc_opens += 1
        return mm

    def ipc_check(self, mapping, size):
        """As CUDA's check: is the mapping exactly the peer's allocation of ``size`` bytes?"""
        if self.ipc_mismatch:
            return False, f"fake: the mapping is not the exported allocation ({size} bytes)"
        return len(mapping) == size, f"fake: {len(mapping)} bytes mapped, {size} exported"

    def ipc_close(self, mapping):
        self.ipc_closes += 1
        try:
            mapping.close()
        except BufferError:        # a view of it is still alive: unmapped when it goes
            pass

    @staticmethod
    def ipc_array(mapping, offset, dtype, count):
        return FakeDeviceArray(np.frombuffer(mapping, dtype, count, offset))

    def copy(self, dst, src):
        dst._a.reshape(-1)[...] = src._a.reshape(-1)
        self.d2d += 1

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
    from mpicoll.device import arrays as _device
    _device.register_adapter(ADAPTER)
    return ADAPTER


def enable_ipc(on=True):
    """Fake device memory in shared memory with IPC handles (True), or private (False)."""
    ADAPTER.ipc_enabled = on


def device_empty(shape, dtype):
    """An uninitialised fake device array (in :data:`POOL` while IPC is on)."""
    dtype = np.dtype(dtype)
    if not ADAPTER.ipc_enabled:
        return FakeDeviceArray(np.empty(shape, dtype=dtype))
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n == 0:
        return FakeDeviceArray(np.empty(shape, dtype=dtype))
    return FakeDeviceArray(POOL.alloc(n).view(dtype).reshape(shape))


def to_device(a):
    a = np.asarray(a)
    if not ADAPTER.ipc_enabled:
        return FakeDeviceArray(np.array(a, copy=True))
    d = device_empty(a.shape, a.dtype)
    d._a[...] = a
    return d


# -- shared-memory "device" allocations -----------------------------------------

_SHM = "/dev/shm"


class _Segment:
    __slots__ = ("name", "size", "base", "gen", "start")

    def __init__(self, name, size, base, gen, start):
        self.name, self.size, self.base, self.gen, self.start = name, size, base, gen, start


class ShmPool:
    """Fake device allocations: files in /dev/shm, a virtual address and a generation each."""

    SMALL = 64 << 10           # smaller arrays share allocations of SEGMENT bytes
    SEGMENT = 1 << 20
    ALIGN = 256

    def __init__(self):
        self.live = {}         # real start address -> _Segment
        self.free_bases = {}   # size -> virtual bases of freed allocations (reused first)
        self.next_base = 0x7F00_0000_0000
        self.next_gen = 1
        self.counter = 0
        self.current = None    # [segment, root array, top]: where small arrays are carved
        self.allocated = self.freed = 0
        self._sweep()
        atexit.register(self.cleanup)

    @staticmethod
    def _sweep():
        """Remove the allocations of processes that ended without cleaning up (MPI_Abort)."""
        try:
            names = os.listdir(_SHM)
        except OSError:
            return
        for name in names:
            if not name.startswith("mpicoll-fake-"):
                continue
            try:
                pid = int(name.split("-")[2])
                os.kill(pid, 0)
            except ProcessLookupError:
                try:
                    os.unlink(os.path.join(_SHM, name))
                except OSError:
                    pass
            except (ValueError, IndexError, PermissionError):
                pass

    def alloc(self, nbytes):
        """``nbytes`` of fake device memory (a uint8 view of a shared allocation)."""
        if nbytes >= self.SMALL:
            size = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
            _, root = self._segment(size)
            return root[:nbytes]
        cur = self.current
        if cur is None or cur[2] + nbytes > cur[0].size:
            seg, root = self._segment(self.SEGMENT)
            cur = self.current = [seg, root, 0]
        top = cur[2]
        cur[2] = top + -(-nbytes // self.ALIGN) * self.ALIGN
        return cur[1][top:top + nbytes]

    def _segment(self, size):
        name = f"mpicoll-fake-{os.getpid()}-{self.counter}"
        self.counter += 1
        path = os.path.join(_SHM, name)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        root = np.frombuffer(mm, np.uint8)
        bases = self.free_bases.get(size)
        if bases:
            base = bases.pop()             # a freed allocation's address, as cudaMalloc reuses
        else:
            base = self.next_base
            self.next_base += -(-size // (2 << 20)) * (2 << 20)
        seg = _Segment(name, size, base, self.next_gen, root.ctypes.data)
        self.next_gen += 1
        self.live[seg.start] = seg
        self.allocated += 1
        # Every array of this allocation is a view of root: freed when the last one goes.
        weakref.finalize(root, self._free, seg)
        return seg, root

    def _free(self, seg):
        if self.live.get(seg.start) is seg:
            del self.live[seg.start]
        self.free_bases.setdefault(seg.size, []).append(seg.base)
        self.freed += 1
        try:
            os.unlink(os.path.join(_SHM, seg.name))
        except OSError:
            pass

    def find(self, ptr):
        """The live allocation holding real address ``ptr``, or None."""
        for seg in self.live.values():
            if seg.start <= ptr < seg.start + seg.size:
                return seg
        return None

    def new_segment(self):
        """Carve the next small arrays out of a fresh allocation."""
        self.current = None

    def cleanup(self):
        for seg in list(self.live.values()):
            try:
                os.unlink(os.path.join(_SHM, seg.name))
            except OSError:
                pass


POOL = ShmPool()


def to_host(x):
    return x._a.copy() if isinstance(x, FakeDeviceArray) else np.asarray(x)
