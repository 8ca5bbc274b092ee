"""Shared memory between the ranks of a node: single-copy reads of peers' buffers, and segments.

Three ways for a rank to reach a peer's data on its node, best first:

- **symmetric arrays** (:func:`empty`, :func:`zeros`): arrays that live in an
  MPI-3 shared window (``MPI.Win.Allocate_shared`` on the node's
  communicator), at the same offset on every rank; a peer's array is then a
  NumPy view of its part of the window (``Win.Shared_query``), read and
  reduced in place, no copy at all. ``shared=True`` makes one array for the
  whole node (node rank 0's memory, every rank's view of it).
- **cross-memory attach** (Linux ``process_vm_readv``, as Open MPI's
  ``smsc/cma`` and MPICH's CMA path use it): one copy straight from a peer's
  ordinary buffer into this rank's memory, given the peer's pid and the
  buffer's address. Whether the kernel allows it is probed once per node
  communicator (ptrace permissions: same user, ``kernel.yama.ptrace_scope``);
  :func:`probe` says why where it does not.
- **a scratch segment** per node communicator (a shared window, grown on
  demand to at most ``MPICOLL_SHM_MAX`` bytes per rank, default 256 MiB):
  inputs are copied in, peers read them there. Where a call needs more than
  the cap, the algorithms fall back to point-to-point.

Synchronisation is MPI's: a node barrier (``MPI_Barrier`` on the node's
communicator) orders a rank's writes before its peers' reads, and
``Win.Sync`` (the windows are in a passive-target epoch, ``Lock_all`` with
``MODE_NOCHECK``) makes the separate memory model's copies agree where MPI
needs it. Nothing here spins on a flag: a barrier yields the core to an
oversubscribed peer, a spin would starve it.

Windows are freed with the communicator they belong to, and the rest before
``MPI_Finalize`` (an ``atexit`` handler, which runs before mpi4py's).
"""
import atexit
import ctypes
import ctypes.util
import os
import threading

import numpy as np
from mpi4py import MPI

from ..core.commcache import CommCache
from ..core.env import getenv
from ..core.errors import ArgumentError

__all__ = ["NodeShm", "Peers", "TooBig", "node_shm", "empty", "zeros", "free", "locate", "stats",
           "probe", "cma_read", "shm_max", "CHUNK", "Mailbox", "MAILBOX_BYTES"]

#: Bytes reduced per pass (two operands and the result stay in cache).
CHUNK = 1 << 18

_DEFAULT_MAX = 256 << 20


def shm_max():
    """``MPICOLL_SHM_MAX``: the scratch segment's cap in bytes per rank (0: no segment)."""
    text = getenv("MPICOLL_SHM_MAX", "")
    if not text.strip():
        return _DEFAULT_MAX
    try:
        value = int(text)
        if value < 0:
            raise ValueError
    except ValueError:
        raise ArgumentError(
            f"MPICOLL_SHM_MAX: expected a number of bytes >= 0; got {text!r}") from None
    return value


# -- cross-memory attach ----------------------------------------------------------------

class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_readv = None


def _process_vm_readv():
    global _readv
    if _readv is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = getattr(libc, "process_vm_readv", None)
        if fn is not None:
            fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                           ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong]
            fn.restype = ctypes.c_ssize_t
        _readv = fn or False
    return _readv or None


def address_of(a):
    """The address of a contiguous host array's first byte.

    A fraction of ``a.ctypes.data``'s cost: this runs several times per call.
    """
    return MPI.buffer(a).address if a.nbytes else a.__array_interface__["data"][0]


def cma_read(pid, address, dst, nbytes=None):
    """Copy from ``address`` in process ``pid`` into the host array ``dst``.

    ``nbytes`` bytes (default: all of ``dst``), one copy, by the kernel. OSError (with the
    errno) if refused.
    """
    nbytes = dst.nbytes if nbytes is None else nbytes
    if not nbytes:
        return
    fn = _process_vm_readv()
    local, remote = _Iovec(address_of(dst), nbytes), _Iovec(address, nbytes)
    done = 0
    while done < nbytes:          # the kernel may copy less than asked (it says how much)
        got = fn(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, f"process_vm_readv from pid {pid}: {os.strerror(err)}")
        done += got
        local.iov_base += got
        local.iov_len -= got
        remote.iov_base += got
        remote.iov_len -= got


def probe(node):
    """Whether every rank of ``node`` (a communicator) can read every peer's memory.

    (True, None) when every rank can, with :func:`cma_read`, else (False, the first
    reason). Collective over ``node``. ``MPICOLL_SHM_CMA=0`` turns single-copy reads off
    (the scratch segment is used).
    """
    why = None
    if getenv("MPICOLL_SHM_CMA", "1").strip().lower() in ("0", "off", "no", "false"):
        why = "turned off by MPICOLL_SHM_CMA=0"
    elif _process_vm_readv() is None:
        why = "process_vm_readv is not available (not Linux, or an old C library)"
    mine = np.arange(8, dtype=np.int64) + 1000 * node.Get_rank()
    info = node.allgather((os.getpid(), mine.ctypes.data))
    n, r = node.Get_size(), node.Get_rank()
    if why is None and n > 1:
        peer = (r + 1) % n
        got = np.zeros(8, np.int64)
        try:
            cma_read(info[peer][0], info[peer][1], got)
            if not np.array_equal(got, np.arange(8) + 1000 * peer):
                why = "process_vm_readv read the wrong bytes"
        except OSError as exc:
            why = (f"process_vm_readv refused ({exc.strerror}; ptrace permissions: "
                   f"kernel.yama.ptrace_scope, or ranks of different users)")
    whys = node.allgather(why)
    bad = [(i, w) for i, w in enumerate(whys) if w]
    node.Barrier()                  # mine stays alive until every peer has read it
    if bad:
        return False, f"rank {bad[0][0]} of the node: {bad[0][1]}"
    return True, None


# -- windows ------------------------------------------------------------------------------

_windows = {}                       # id -> _Window (live ones)
_lock = threading.Lock()
_atexit = False


class _Window:
    """One shared window on a node communicator: this rank's part and views of its peers'."""

    _ids = 0

    def __init__(self, node, nbytes, shared=False):
        global _atexit
        self.node = node
        self.nbytes = nbytes
        self.shared = shared
        mine = 0 if shared and node.Get_rank() != 0 else nbytes
        self.win = MPI.Win.Allocate_shared(max(mine, 0), 1, comm=node)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.parts = []
        for r in range(node.Get_size()):
            buf, _ = self.win.Shared_query(0 if shared else r)
            self.parts.append(np.frombuffer(buf, np.uint8, count=nbytes) if nbytes else
                              np.empty(0, np.uint8))
        self.local = self.parts[node.Get_rank()]
        self.start = self.local.ctypes.data
        self.pids = tuple(node.allgather(os.getpid()))
        with _lock:
            _Window._ids += 1
            self.id = _Window._ids
            _windows[self.id] = self
            if not _atexit:
                atexit.register(free_all)
                _atexit = True
        # The same name on every rank of the node: rank 0's process and its count of windows.
        self.key = node.bcast((self.pids[0], self.id), root=0)

    def sync(self):
        self.win.Sync()

    def free(self):
        with _lock:
            _windows.pop(self.id, None)
        if self.win != MPI.WIN_NULL and not MPI.Is_finalized():
            self.win.Unlock_all()
            self.win.Free()
        self.parts = []
        self.local = None


def free_all():
    """Free every window still alive (before MPI_Finalize)."""
    for w in list(_windows.values()):
        try:
            w.free()
        except Exception:        # finalizing anyway
            pass


def stats():
    """The shared windows alive on this rank: {"windows": n, "bytes": this rank's part}."""
    with _lock:
        ws = list(_windows.values())
    return {"windows": len(ws), "bytes": sum(w.nbytes for w in ws if not w.shared
                                             or w.node.Get_rank() == 0)}


# -- the node of a communicator ------------------------------------------------------------

class NodeShm:
    """The shared memory of this rank's node within one (private) communicator.

    ``node``: the communicator of the node's ranks (in the communicator's order);
    ``members``: their ranks in the communicator; ``cma``/``why``: whether single-copy
    reads work, and why not; a scratch segment grown on demand (:meth:`segment`).
    """

    def __init__(self, pcomm, members):
        self.members = tuple(members)
        rank = pcomm.Get_rank()
        if len(self.members) == pcomm.Get_size():
            self.node = pcomm.Dup()
        else:
            self.node = pcomm.Split(self.members[0], rank)
        self.rank, self.size = self.node.Get_rank(), self.node.Get_size()
        self.pids = tuple(self.node.allgather(os.getpid()))
        self.cma, self.why = probe(self.node)
        self.scratch = None                # the scratch segment (a _Window), grown on demand
        self.box = None                    # the mailbox of small calls (a Mailbox)

    @property
    def path(self):
        """How peers' ordinary buffers are reached: ``cma`` or ``segment``."""
        return "cma" if self.cma else "segment"

    def segment(self, nbytes):
        """The scratch segment, at least ``nbytes`` per rank; None above ``MPICOLL_SHM_MAX``.

        Collective: every rank of the node asks for the same size at the same call.
        """
        if nbytes > shm_max():
            return None
        seg = self.scratch
        if seg is None or seg.nbytes < nbytes:
            if seg is not None:
                seg.free()
            size = max(nbytes, 1 << 16, 2 * (seg.nbytes if seg else 0))
            self.scratch = seg = _Window(self.node, min(size, max(nbytes, shm_max())))
        return seg

    def mailbox(self):
        """The :class:`Mailbox` of small calls (made on first use: collective)."""
        if self.box is None:
            self.box = Mailbox(self)
        return self.box

    def free(self):
        """Free the mailbox, the scratch segment and the node communicator."""
        if self.box is not None:
            self.box.window.free()
            self.box = None
        if self.scratch is not None:
            self.scratch.free()
            self.scratch = None
        if self.node != MPI.COMM_NULL and not MPI.Is_finalized():
            self.node.Free()


#: Bytes a rank writes into its mailbox slot at most (small calls: :class:`Mailbox`).
MAILBOX_BYTES = 1 << 14


class Mailbox:
    """Two slots per rank in a shared window, for small calls: one barrier per call.

    A small call writes what its peers need into this rank's slot (with its size in a
    header), then one node barrier (with ``Win.Sync`` around it), after which every
    rank reads its peers' slots in place. No exchange of addresses and no second
    barrier: calls alternate between the two slots, and a rank writes a slot again only
    two calls later, after the next call's barrier, which no rank passes before it has
    finished reading this call's slots. Every rank of the node makes the same sequence
    of mailbox calls (collective calls of the same sizes), so they agree on the slot.
    """

    HEADER = 64                     # bytes before the data: its size (an int64), aligned

    def __init__(self, shm):
        self.shm = shm
        self.slot_bytes = self.HEADER + MAILBOX_BYTES
        self.window = _Window(shm.node, 2 * self.slot_bytes)
        self.calls = 0

    def post(self, data, declared):
        """Write this rank's ``data`` (a host array or None) into its slot for this call.

        With ``declared`` (the size this rank's call has, for :meth:`declared`), then the
        node barrier; returns the slot index for :meth:`read`.
        """
        k = self.calls & 1
        self.calls += 1
        base = k * self.slot_bytes
        part = self.window.local
        if data is not None and data.nbytes:
            at = base + self.HEADER
            part[at:at + data.nbytes].view(data.dtype)[...] = data.reshape(-1)
        part[base:base + 8].view(np.int64)[0] = declared
        w = self.window
        w.sync()
        self.shm.node.Barrier()
        w.sync()
        return k

    def declared(self, k):
        """What each rank declared in slot ``k`` of this call (its call's size)."""
        base = k * self.slot_bytes
        return [int(p[base:base + 8].view(np.int64)[0]) for p in self.window.parts]

    def read(self, q, k, lo, hi, dtype):
        """Bytes ``[lo, hi)`` of rank ``q``'s slot ``k``, in place, as ``dtype``."""
        at = k * self.slot_bytes + self.HEADER
        return self.window.parts[q][at + lo:at + hi].view(dtype)


def _delete(table):
    # MPI calls this when the private communicator is freed: its node's memory goes too.
    for shm in table.values():
        try:
            shm.free()
        except Exception:       # freeing on the way out
            pass


_tables = CommCache(_delete)   # private communicator -> {members: NodeShm}


def node_shm(pcomm, members):
    """The :class:`NodeShm` of this rank's node (``members``: its ranks in ``pcomm``).

    Made on first use (collective over ``pcomm``) and kept with ``pcomm``.
    """
    table = _tables.get_or_create(pcomm, dict)
    key = tuple(members)
    shm = table.get(key)
    if shm is None:
        shm = table[key] = NodeShm(pcomm, members)
    return shm


# -- symmetric arrays ----------------------------------------------------------------------

def empty(shape, dtype=np.float64, comm=None, shared=False):
    """An array in shared memory of the node (collective over the node's ranks of ``comm``).

    Every rank must call it with the same shape and dtype, in the same order as its
    other :func:`empty` calls: the arrays are then *symmetric* (the same offset in
    every rank's part of one window), and mpicoll's ``shm`` algorithms read a peer's
    array in place. ``shared=True``: one array for the whole node (every rank sees the
    same memory), e.g. a result every rank reads. Freed by :func:`free` (collective)
    or at exit. ``comm``: default ``MPI.COMM_WORLD``; its ranks must all share a node.
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    dtype = np.dtype(dtype)
    count = int(np.prod(shape)) if np.ndim(shape) else int(shape)
    nbytes = count * dtype.itemsize
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    if node.Get_size() != comm.Get_size():
        node.Free()
        raise ArgumentError("comm: shared-memory arrays need a communicator whose ranks all "
                            "share a node (one per node: split it with "
                            "Split_type(MPI.COMM_TYPE_SHARED))")
    win = _Window(node, nbytes, shared)
    arr = win.local[:nbytes].view(dtype).reshape(shape)
    win.own_node = True               # its node communicator goes with it (free)
    return arr


def zeros(shape, dtype=np.float64, comm=None, shared=False):
    """:func:`empty`, filled with zeros (each rank its own part; node rank 0 a shared one)."""
    arr = empty(shape, dtype, comm, shared)
    comm = MPI.COMM_WORLD if comm is None else comm
    if not shared or comm.Get_rank() == 0:
        arr[...] = 0
    comm.Barrier()
    return arr


def locate(a):
    """(window, byte offset) of a host array that lies in a shared window, else None."""
    if not isinstance(a, np.ndarray) or not _windows:
        return None
    ptr = address_of(a)
    with _lock:
        for w in _windows.values():
            if w.local is not None and w.start <= ptr and ptr + a.nbytes <= w.start + w.nbytes:
                return w, ptr - w.start
    return None


def free(a):
    """Free the window of an array made by :func:`empty` (collective over its node)."""
    got = locate(a)
    if got is None:
        raise ArgumentError("a: expected an array made by mpicoll.shm.empty or zeros")
    w = got[0]
    w.free()
    if getattr(w, "own_node", False):
        w.node.Free()


# -- one call's arrays on every rank of the node -------------------------------------------

class TooBig(Exception):
    """Staging this call through the scratch segment needs more than ``MPICOLL_SHM_MAX``.

    The algorithm falls back to point-to-point (every rank decides alike).
    """


class Peers:
    """Where one call's host arrays are on every rank of the node, and how to read them.

    Made collectively (one ``Allgather`` of a few words per array on the node's
    communicator, which also tells every rank that its peers have entered the call,
    so their inputs are final). Per array, one way for all: ``view`` (every rank's
    array is in one shared window at one offset: a peer's array is a NumPy view of
    its memory), ``cma`` (single-copy reads of peers' ordinary buffers), or
    ``segment`` (each rank copies what its peers will read into the scratch segment
    first: :meth:`publish`). ``arrays``: this rank's, in argument order (None where it
    has none); arrays in ``outputs`` are written by the call before peers read them;
    ``same``: ``{index: argument name}`` of arrays that must have one size on every rank
    (ArgumentError on every rank otherwise); ``unread``: arrays only their sizes are
    shared of (no peer reads them).
    """

    _WORDS = 6          # address, bytes, window key (pid, id), offset, itemsize

    def __init__(self, shm, arrays, outputs=(), same=None, unread=()):
        # Plain Python lists throughout: a small call's cost is this bookkeeping.
        self.shm = shm
        arrays = self.arrays = list(arrays)
        k, w, n = len(arrays), self._WORDS, shm.size
        mine = [-1] * (k * w)
        own_wins = {}               # array index -> (window, offset) on this rank
        for i, a in enumerate(arrays):
            if a is None:
                continue
            j = i * w
            mine[j], mine[j + 1], mine[j + 5] = address_of(a), a.nbytes, a.itemsize
            got = locate(a) if _windows else None
            if got is not None and got[0].pids == shm.pids:
                own_wins[i] = got
                mine[j + 2], mine[j + 3], mine[j + 4] = got[0].key[0], got[0].key[1], got[1]
        every = np.empty(n * k * w, np.int64)
        shm.node.Allgather(np.array(mine, np.int64), every)
        rows = every.tolist()
        # cols[i][q]: the words of rank q's array i
        self.cols = cols = [[rows[(q * k + i) * w:(q * k + i + 1) * w] for q in range(n)]
                            for i in range(k)]
        if same:
            self._check_same(same)
        self.itemsize = [max(c[5] for c in col) for col in cols]
        self.views = [None] * k
        self.mode = mode = []
        wins = []
        cma = "cma" if shm.cma else "segment"
        # No window on this rank and an array in every slot: none can be a view (a view
        # needs every rank's array in one window), so skip the search.
        plain = not _windows and all(a is not None for a in arrays)
        for i in range(k):
            if i in unread:
                mode.append("unread")
                continue
            if plain:
                mode.append(cma)
                continue
            col = cols[i]
            keys = {(c[2], c[3], c[4]) for c in col if c[1] >= 0}
            key = next(iter(keys)) if len(keys) == 1 else None
            if key is not None and key[0] != -1:
                win = own_wins[i][0] if i in own_wins else next(
                    (x for x in list(_windows.values()) if x.key == key[:2]), None)
                if win is not None:
                    wins.append(win)
                    mode.append("view")
                    off = key[2]
                    self.views[i] = [win.parts[q][off:off + col[q][1]] if col[q][1] >= 0
                                     else None for q in range(n)]
                    continue
            mode.append(cma)
        # The windows whose memory a barrier makes consistent: the call's
        self._wins = wins
        # The scratch segment, where some array goes through it: one region per array, at
        # the same offset on every rank (sized by the largest rank's array).
        self.seg, self.seg_off = None, [0] * k
        if "segment" in mode:
            total = 0
            for i in range(k):
                if mode[i] == "segment":
                    self.seg_off[i] = total
                    total += -(-max(max(c[1] for c in cols[i]), 0) // 64) * 64
            self.seg = shm.segment(total)
            if self.seg is None:
                raise TooBig(total)
            self._wins.insert(0, self.seg)
            for i in range(k):
                if mode[i] == "segment" and i not in outputs:
                    self.publish(i)
            shm.node.Barrier()           # the inputs are in the segment
        self._wins = list(dict.fromkeys(self._wins))

    def _check_same(self, same):
        # Every rank reads its peers' arrays as if they were the size of its own: a rank
        # that passed another size would have it read past the end of a peer's buffer. Every
        # rank holds the whole table, so every rank raises the same error (nothing hangs).
        for i, name in same.items():
            have = [(q, c[1]) for q, c in enumerate(self.cols[i]) if c[1] >= 0]
            if len({b for _, b in have}) > 1:
                told = ", ".join(f"{b} on rank {q}" for q, b in have)
                raise ArgumentError(f"{name}: the shm algorithm needs the same number of bytes "
                                    f"on every rank of the node; got {told}")

    @property
    def path(self):
        """What moves the data: ``shm-view``, ``shm-cma`` or ``shm-segment``.

        As for the first of the call's arrays read from peers.
        """
        return "shm-" + (self.mode[0] if self.mode else "view")

    def publish(self, i, lo=0, hi=None):
        """Make elements ``[lo, hi)`` of this rank's array ``i`` readable by its peers.

        A copy into the segment in ``segment`` mode; nothing otherwise. A barrier must
        follow before they read.
        """
        if self.mode[i] != "segment":
            return
        a = self.arrays[i]
        if a is None:
            return
        hi = a.size if hi is None else hi
        isz = a.itemsize
        region = self.seg.local[self.seg_off[i] + lo * isz:self.seg_off[i] + hi * isz]
        region.view(a.dtype)[...] = a[lo:hi]

    def barrier(self):
        """A node barrier, with the shared windows' memory made consistent around it."""
        wins = self._wins
        for w in wins:
            w.sync()
        self.shm.node.Barrier()
        for w in wins:
            w.sync()

    def get(self, q, i, lo, hi, dst=None, dtype=None):
        """Elements ``[lo, hi)`` of node rank ``q``'s array ``i``.

        Into ``dst`` (returned), or, with ``dst`` None, a view of the peer's memory where
        there is one, as ``dtype``.
        """
        isz = self.itemsize[i]
        nbytes = (hi - lo) * isz
        mode = self.mode[i]
        if mode == "cma":
            if dst is None:
                raise ValueError("cma reads need a destination")
            cma_read(self.shm.pids[q], self.cols[i][q][0] + lo * isz, dst, nbytes)
            return dst
        if mode == "view":
            raw = self.views[i][q][lo * isz:hi * isz]
        else:
            base = self.seg_off[i]
            raw = self.seg.parts[q][base + lo * isz:base + hi * isz]
        if dst is None:
            return raw if dtype is None else raw.view(dtype)
        dst.view(np.uint8)[...] = raw
        return dst

