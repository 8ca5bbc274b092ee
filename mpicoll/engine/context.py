"""The point-to-point layer every hand-written algorithm talks through.

Library traffic runs on a private duplicate of the caller's communicator,
cached as an MPI attribute of that communicator (freed with it), so mpicoll's
messages never match the user's own (the pattern of mpi4py.util.pkl5).

:class:`Ctx` wraps the buffer point-to-point calls (Send, Recv, Sendrecv,
Isend, Irecv, Waitall) and counts messages, bytes and elements per call when
a :func:`mpicoll.traffic` recorder is active.

Device arrays: a Ctx talks to a *transport* (:mod:`mpicoll.device.arrays`) with
the communicator's method names: the communicator itself for host arrays, a
stream-synchronising pass-through (CUDA-aware MPI) or a pinned-host stager
(MPI without CUDA support) for device arrays. ``ctx.path`` says which.

Tracing: while :data:`trace_hook` is set (by ``mpicoll.bench.trace``), each
new Ctx becomes a :class:`_TracedCtx`, whose methods report every send,
receive and wait as ``trace_hook(kind, t0, t1, info)``; with no tracer the
cost is one test per collective call and nothing per message.
"""
import contextlib
import time

import numpy as np
from mpi4py import MPI

from ..args.buffers import wire
from ..core import watchdog as _watchdog
from ..core.commcache import CommCache
from ..core.topology import detect, layout
from ..device import ipc as _ipc  # noqa: F401  (registers the ipc transport with _device)
from ..device.arrays import data_ptr, empty, transport
from ..device.peer_memory import node_shm
from ..device.reduce import combine
from .program import free_programs

__all__ = ["private_comm", "Ctx", "traffic", "Traffic", "CallTraffic"]

_TAG = 0x6D63  # one tag for all library traffic: collectives are ordered per communicator

#: Tracer callback ``hook(kind, t0, t1, info)`` (perf_counter seconds, info a
#: dict), or None. Set only between collective calls, on every rank.
trace_hook = None

def _free_private(value):
    # Called by MPI when the user's communicator is freed (or at finalize). The programs'
    # persistent requests go first: see mpicoll.engine.program.
    if not MPI.Is_finalized():
        free_programs(value)
        value.Free()


_private = CommCache(_free_private)


def existing_private_comm(comm):
    """The private duplicate of ``comm`` if one was made already, else None.

    No MPI call that involves other ranks: safe to use from one rank.
    """
    return _private.get(comm)


def private_comm(comm):
    """The private duplicate of ``comm`` used for library messages (created once)."""
    dup = _private.get(comm)
    if dup is None:
        # Dup through a plain Intracomm view so that a P2PComm's private
        # communicator is a plain one (its collectives must be MPI's own).
        dup = MPI.Intracomm(comm).Dup()
        # Which node each rank is on, once per communicator (collective, as Dup is):
        # node-aware algorithms, the two-level model and the traffic split read it.
        try:
            detect(dup)
        except Exception:
            dup.Free()
            raise
        _private.set(comm, dup)
        _watchdog.on_private_comm(comm, dup)   # MPICOLL_TIMEOUT: its own duplicate too
    return dup


_watchdog.private_comm = private_comm   # set_timeout makes it (core imports no engine)


class CallTraffic:
    """Messages and data one rank sent and received in one collective call."""

    __slots__ = ("primitive", "algorithm", "rank", "size", "count", "itemsize", "path",
                 "sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes",
                 "inter_sent_msgs", "inter_sent_bytes", "inter_recv_msgs", "inter_recv_bytes",
                 "read_ops", "read_bytes", "nodes", "_paths")

    def __init__(self, primitive, algorithm, rank, size, count, itemsize, path="host",
                 nodes=None):
        # "host", "cuda-aware", "staged", "ipc" or "host-copy"; for ``native``: how the
        # library's collective got the arrays (its messages are not counted).
        self.path = path
        self.primitive = primitive
        self.algorithm = algorithm
        self.rank = rank
        self.size = size
        self.count = count
        self.itemsize = itemsize
        self.sent_msgs = self.sent_bytes = self.recv_msgs = self.recv_bytes = 0
        # The part of it that crossed nodes (peer on another node: mpicoll.core.topology).
        self.inter_sent_msgs = self.inter_sent_bytes = 0
        self.inter_recv_msgs = self.inter_recv_bytes = 0
        # Data read straight from peers' memory on the node (the shm algorithms): no
        # message; each read is one copy (cross-memory attach, or a shared segment).
        self.read_ops = self.read_bytes = 0
        self.nodes = nodes          # node of each rank (None: one node)
        self._paths = None          # set by a transport whose messages take several paths (ipc)

    def _count(self, sent, nbytes, peer):
        if sent:
            self.sent_msgs += 1
            self.sent_bytes += nbytes
        else:
            self.recv_msgs += 1
            self.recv_bytes += nbytes
        nodes = self.nodes
        if nodes is not None and nodes[peer] != nodes[self.rank]:
            if sent:
                self.inter_sent_msgs += 1
                self.inter_sent_bytes += nbytes
            else:
                self.inter_recv_msgs += 1
                self.inter_recv_bytes += nbytes

    def _read(self, nbytes):
        self.read_ops += 1
        self.read_bytes += nbytes

    @property
    def paths(self):
        """Which transport moved what.

        ``{path: [sent_msgs, sent_bytes, recv_msgs, recv_bytes]}`` ("ipc" for same-node
        device messages mapped through CUDA IPC).
        """
        if self._paths is not None:
            return self._paths
        return {self.path: [self.sent_msgs, self.sent_bytes, self.recv_msgs, self.recv_bytes]}

    intra_sent_msgs = property(lambda self: self.sent_msgs - self.inter_sent_msgs)
    intra_sent_bytes = property(lambda self: self.sent_bytes - self.inter_sent_bytes)
    intra_recv_msgs = property(lambda self: self.recv_msgs - self.inter_recv_msgs)
    intra_recv_bytes = property(lambda self: self.recv_bytes - self.inter_recv_bytes)

    @property
    def sent_elements(self):
        """Elements sent (``sent_bytes`` / ``itemsize``; 0 without an itemsize)."""
        return self.sent_bytes // self.itemsize if self.itemsize else 0

    @property
    def recv_elements(self):
        """Elements received (``recv_bytes`` / ``itemsize``; 0 without an itemsize)."""
        return self.recv_bytes // self.itemsize if self.itemsize else 0

    @property
    def read_elements(self):
        """Elements read straight from peers' memory (the shm algorithms)."""
        return self.read_bytes // self.itemsize if self.itemsize else 0

    def as_dict(self):
        """The record as a dict: its counters, ``paths``, the intra-node and element counts."""
        d = {k: getattr(self, k) for k in self.__slots__ if k not in ("nodes", "_paths")}
        d["paths"] = {p: list(c) for p, c in self.paths.items()}
        for k in ("intra_sent_msgs", "intra_sent_bytes", "intra_recv_msgs", "intra_recv_bytes"):
            d[k] = getattr(self, k)
        d["sent_elements"] = self.sent_elements
        d["recv_elements"] = self.recv_elements
        d["read_elements"] = self.read_elements
        return d

    def __repr__(self):
        return (f"CallTraffic({self.primitive}/{self.algorithm} rank {self.rank} [{self.path}]: "
                f"sent {self.sent_msgs} msgs {self.sent_bytes} B, "
                f"received {self.recv_msgs} msgs {self.recv_bytes} B)")


class Traffic:
    """What :func:`traffic` recorded on this rank: one :class:`CallTraffic` per call."""

    def __init__(self):
        self.calls = []

    def _total(self, field):
        return sum(getattr(c, field) for c in self.calls)

    sent_msgs = property(lambda self: self._total("sent_msgs"))
    sent_bytes = property(lambda self: self._total("sent_bytes"))
    recv_msgs = property(lambda self: self._total("recv_msgs"))
    recv_bytes = property(lambda self: self._total("recv_bytes"))
    sent_elements = property(lambda self: self._total("sent_elements"))
    inter_sent_msgs = property(lambda self: self._total("inter_sent_msgs"))
    inter_sent_bytes = property(lambda self: self._total("inter_sent_bytes"))
    inter_recv_msgs = property(lambda self: self._total("inter_recv_msgs"))
    inter_recv_bytes = property(lambda self: self._total("inter_recv_bytes"))
    recv_elements = property(lambda self: self._total("recv_elements"))
    read_ops = property(lambda self: self._total("read_ops"))
    read_bytes = property(lambda self: self._total("read_bytes"))

    def __repr__(self):
        return (f"Traffic({len(self.calls)} calls, sent {self.sent_msgs} msgs "
                f"{self.sent_bytes} B, received {self.recv_msgs} msgs {self.recv_bytes} B)")


_recorders = []


@contextlib.contextmanager
def traffic():
    """Count the point-to-point traffic of mpicoll calls made inside the block.

    Per rank, for every collective call: messages, bytes and elements sent and
    received by the hand-written algorithms (``native`` calls are recorded
    with zero counts: their traffic is inside the MPI library); on more than
    one node (:mod:`mpicoll.core.topology`) the part that crossed nodes is
    ``inter_sent_msgs``/``inter_sent_bytes``/``inter_recv_*``, the rest
    ``intra_*``::

        with mpicoll.traffic() as t:
            mpicoll.allreduce(x, algorithm="ring")
        t.calls[0].sent_elements   # 2*(N-1)*K/N for even chunks
    """
    rec = Traffic()
    _recorders.append(rec)
    try:
        yield rec
    finally:
        _recorders.remove(rec)


def copy_in(dst, src):
    """dst[...] = src unless src is None (in place) or the very same memory."""
    if src is None or src is dst:
        return
    if (src.size == dst.size
            and data_ptr(src) == data_ptr(dst)):
        return                      # in place: the block is already there
    dst[...] = src



class Ctx:
    """One collective call's view of the private communicator.

    Algorithms receive a Ctx and validated, flat, contiguous arrays; they
    talk only through the methods below. ``ctx.mpi`` is what the native
    wrappers call (``ctx.mpi.Allreduce(...)``): the communicator, or for
    device arrays the transport that synchronises or stages for it.
    """

    __slots__ = ("comm", "mpi", "path", "rank", "size", "_rec", "tag", "op", "like")

    def __init__(self, comm, primitive, algorithm, count=0, itemsize=0, adapter=None,
                 device=None, tag=_TAG, requests=False):
        self.comm = comm
        self.tag = tag          # blocking calls share one tag; each nonblocking one has its own
        self.op = None          # the call's reduction op (ctx.reduce)
        self.like = None        # an array of the call's dtype and memory (ctx.scratch)
        # requests: a nonblocking/persistent call's (its device messages outlive the call)
        self.mpi = transport(comm, adapter, device, requests)
        self.path = getattr(self.mpi, "path", "host")
        if algorithm == "native":       # the library's collective: staged or handed over
            self.path = getattr(self.mpi, "native_path", self.path)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._rec = None
        if _recorders:
            lay = layout(comm)
            rec = CallTraffic(primitive, algorithm, self.rank, self.size, count, itemsize,
                              self.path, lay.nodes if lay.n_nodes > 1 else None)
            for r in _recorders:
                r.calls.append(rec)
            self._rec = rec
            if hasattr(self.mpi, "record"):
                self.mpi.record(rec)      # the transport counts each message under its path
        if trace_hook is not None:
            self.__class__ = _TracedCtx

    @property
    def layout(self):
        """The nodes of the communicator's ranks (:class:`mpicoll.core.topology.Layout`)."""
        return layout(self.comm)

    # counting -----------------------------------------------------------
    def _sent(self, buf, peer):
        if self._rec is not None:
            self._rec._count(True, buf.nbytes, peer)

    def _recvd(self, buf, peer):
        if self._rec is not None:
            self._rec._count(False, buf.nbytes, peer)

    def _read(self, nbytes):
        if self._rec is not None:
            self._rec._read(nbytes)

    # shared memory --------------------------------------------------------
    def node_memory(self, members=None):
        """The shared memory of this rank's node (:class:`mpicoll.device.peer_memory.NodeShm`).

        ``members``: its ranks in this communicator (default: this rank's node's).
        """
        if members is None:
            lay = layout(self.comm)
            members = lay.members[lay.nodes[self.rank]]
        return node_shm(self.comm, members)

    def read_from(self, peers, q, i, lo, hi, dst=None, dtype=None):
        """Elements ``[lo, hi)`` of array ``i`` of node rank ``q``, from ``peers``.

        ``peers``: a :class:`~mpicoll.device.peer_memory.Peers` of this call. Copied into ``dst``
        and returned, or, where the peer's array is in shared memory and ``dst`` is None,
        a view of it as ``dtype`` (no copy).
        """
        got = peers.get(q, i, lo, hi, dst, dtype)
        self._read((hi - lo) * peers.itemsize[i])
        return got

    def read_box(self, box, q, k, lo, hi, dtype):
        """Bytes ``[lo, hi)`` of node rank ``q``'s mailbox slot ``k``, in place, as ``dtype``.

        ``box``: a :class:`~mpicoll.device.peer_memory.Mailbox`. Counted as read from a peer.
        """
        got = box.read(q, k, lo, hi, dtype)
        if q != box.shm.rank:
            self._read(hi - lo)
        return got

    def set_path(self, path):
        """Name the path of this call's data in the traffic record (e.g. ``shm-cma``)."""
        self.path = path
        if self._rec is not None:
            self._rec.path = path

    # point-to-point -----------------------------------------------------
    def send(self, buf, dest):
        """Send ``buf`` to rank ``dest``."""
        self._sent(buf, dest)
        self.mpi.Send(wire(buf), dest, self.tag)

    def recv(self, buf, source):
        """Receive into ``buf`` from rank ``source``."""
        self._recvd(buf, source)
        self.mpi.Recv(wire(buf), source, self.tag)

    def sendrecv(self, sendbuf, dest, recvbuf, source):
        """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` from ``source``, at once."""
        self._sent(sendbuf, dest)
        self._recvd(recvbuf, source)
        self.mpi.Sendrecv(wire(sendbuf), dest, self.tag, wire(recvbuf), source, self.tag)

    def isend(self, buf, dest):
        """Post a send of ``buf`` to rank ``dest``; the request."""
        self._sent(buf, dest)
        return self.mpi.Isend(wire(buf), dest, self.tag)

    def irecv(self, buf, source):
        """Post a receive into ``buf`` from rank ``source``; the request."""
        self._recvd(buf, source)
        return self.mpi.Irecv(wire(buf), source, self.tag)

    def waitall(self, requests):
        """Complete ``requests`` (from isend/irecv); received data is then in place."""
        if requests:
            if self.mpi is self.comm:
                MPI.Request.Waitall(requests)
            else:
                self.mpi.waitall(requests)    # staged receives land, ipc messages complete

    def wait(self, request):
        """Complete ``request`` (as :meth:`waitall`)."""
        self.waitall([request])

    # local steps (the same calls a plan records, see mpicoll.sched.plan) --
    def scratch(self, n):
        """A scratch vector of ``n`` elements in the call's dtype and memory."""
        if self.like is None:           # barrier: zero-byte tokens
            return np.empty(n, np.uint8)
        return empty(self.like, n)

    def copy(self, dst, src):
        """``dst[...] = src``; nothing when ``src`` is None (in place) or the same memory."""
        copy_in(dst, src)

    def reduce(self, lower, higher, out):
        """``lower (op) higher`` with the call's op; returns the array holding the result."""
        return combine(self.op, lower, higher, out)


def _emit(kind, t0, **info):
    hook = trace_hook
    if hook is not None:
        hook(kind, t0, time.perf_counter(), info)


class _TracedCtx(Ctx):
    """Ctx reporting each step to :data:`trace_hook` (same slots, so Ctx can become one)."""

    __slots__ = ()

    def send(self, buf, dest):
        t0 = time.perf_counter()
        Ctx.send(self, buf, dest)
        _emit("send", t0, dest=dest, send_bytes=buf.nbytes)

    def recv(self, buf, source):
        t0 = time.perf_counter()
        Ctx.recv(self, buf, source)
        _emit("recv", t0, source=source, recv_bytes=buf.nbytes)

    def sendrecv(self, sendbuf, dest, recvbuf, source):
        t0 = time.perf_counter()
        Ctx.sendrecv(self, sendbuf, dest, recvbuf, source)
        _emit("sendrecv", t0, dest=dest, send_bytes=sendbuf.nbytes, source=source,
              recv_bytes=recvbuf.nbytes)

    # Requests are returned as they are (a wrapper would leave mpi4py owning two
    # objects for one handle): waits through waitall are traced, a request's own
    # Wait() is not.
    def isend(self, buf, dest):
        t0 = time.perf_counter()
        req = Ctx.isend(self, buf, dest)
        _emit("isend", t0, dest=dest, send_bytes=buf.nbytes)
        return req

    def irecv(self, buf, source):
        t0 = time.perf_counter()
        req = Ctx.irecv(self, buf, source)
        _emit("irecv", t0, source=source, recv_bytes=buf.nbytes)
        return req

    def waitall(self, requests):
        t0 = time.perf_counter()
        Ctx.waitall(self, requests)
        _emit("wait", t0, requests=len(requests))
