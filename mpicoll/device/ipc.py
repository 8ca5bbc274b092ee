"""The ``ipc`` transport: device messages between ranks of one node through CUDA IPC.

A message to a peer on the same node (:meth:`mpicoll.core.topology.Layout.same_node`)
never carries its payload through MPI. The protocol, per message, on the
private communicator (``T`` is the call's tag; the control tags are
``T + 32768`` for headers, ``T + 2*32768`` for acknowledgements and
``T + 3*32768`` for payloads refused by the receiver):

1. **Sender**: synchronises its stream (the data is produced), exports the
   buffer's *base allocation* (``cuMemGetAddressRange``: a CuPy pool block may
   be a slice of a larger ``cudaMalloc``) as an IPC handle, posts a receive for
   the acknowledgement, then sends a 128-byte header: kind ``IPC``, byte
   count, offset of the buffer in its allocation, the allocation's base
   address and *generation* (``CU_POINTER_ATTRIBUTE_BUFFER_ID``: unique per
   allocation in the process, so a freed and reallocated block at the same
   address has a new one), its size and the 64-byte handle.
2. **Receiver**: maps the allocation once per (peer, base) -- refusing a
   mapping that is not exactly that allocation (``ipc_check``: CUDA may share a
   block that holds several small allocations) -- and keeps the
   mapping (LRU, :data:`MAX_MAPPINGS`); a header naming a known base with
   another generation closes the stale mapping and opens the new one. It then
   moves the payload device-to-device on its current stream (or, fused,
   reduces straight from the peer's memory: ``out = lower (op) peer``),
   synchronises the stream and sends ``OK``.
3. The sender's request completes only with that acknowledgement: until then
   the peer may still be reading its buffer.

**Small messages go eagerly** (bytes <= :data:`EAGER_MAX`, empty ones too): the payload
travels inside the header (kind ``EAGER``, copied to the host by the sender,
to the device by the receiver), and the send completes when MPI has sent
it: one message instead of a header and an acknowledgement, no mapping and
no device-to-device copy. A blocking send, receive or sendrecv that is eager
(both ways) while the transport has nothing else in flight is one blocking
MPI call on the headers (no peer can be waiting for this rank's answer
then). Every rank must use the same :data:`EAGER_MAX` (``MPICOLL_IPC_EAGER``,
bytes; 0 turns it off): the receiver sizes its header receive by it.

A sender that cannot export a buffer (no IPC support, host memory, zero
bytes, memory not from ``cudaMalloc``, a peer that refused before) sends an
``INLINE`` header and the payload through the fallback transport (CUDA-aware
or staged) on tag ``T``. A receiver that cannot map the allocation (another
GPU without peer access, a container without a shared IPC namespace)
answers ``NACK``; the sender then sends the payload through the fallback on
``T + 3*32768`` and sends ``INLINE`` to that peer from then on. Headers from
one peer are handled in the order they were posted, so acknowledgements reach
the sender in the order of its messages. Peers on other nodes (and a rank's
messages to itself) take the fallback transport alone.

While it waits, the transport advances *every* message it has in flight
(Testsome over all of them, yielding the processor between empty polls),
the way MPI progresses all posted requests: a peer's header is answered even
while this rank waits for something else, so the two-step protocol cannot
deadlock where plain MPI would not. Reductions fuse with the receive
(:func:`fusions`, bound by :func:`mpicoll.engine.run.bind` in blocking,
nonblocking and persistent plans alike): a receive from an IPC peer
followed by the REDUCE of the received slice becomes one pass over the
peer's memory.
Mappings are closed when the private communicator is freed (with the user's
communicator, or at MPI finalisation); one evicted or found stale while a message still
reads it (another thread sharing the endpoint) is closed once that message's stream
has been synchronised. The sender keeps no reference to its
allocations: CUDA calls it undefined to ``cudaFree`` exported memory while a
peer still maps it, so a process that hands its pool's blocks back to the
driver (``MemoryPool.free_all_blocks``) should do it while no peer maps them
(after freeing the communicator) -- and CuPy's pool calls it by itself when
an allocation runs out of memory: near a GPU's capacity, free the
communicator first or turn the transport off (``MPICOLL_GPU_TRANSPORT=staged``).
Reallocation at the same address is safe (the generation changes and the
peer remaps).

Nonblocking and persistent collectives run on this transport in the progress
engine of :mod:`mpicoll.engine.nonblocking` (each request has a transport of
its own, on its own tag): a wait step is :meth:`IpcTransport.test`, which
advances every message of the request, and a waiter polls
:meth:`IpcTransport.pending` — never a blocking MPI wait, which would leave a
peer's header unanswered. A fused receive's reduction runs when its header
is handled, inside such an advance. With ``MPICOLL_PROGRESS=thread`` that
advance, its copies and reductions run on the progress thread's current
stream: correct with CuPy's default (legacy) stream, which orders every
stream that synchronises with it; a caller on a non-blocking stream
(``Stream(non_blocking=True)``) or a per-thread default stream must
synchronise before ``Start``/the call and after ``Wait`` itself.
"""
import collections
import os
import threading

import numpy as np
from mpi4py import MPI

from ..core.commcache import CommCache
from . import arrays as _device
from . import transport as _transport
from .cuda_driver import cuda_driver

__all__ = ["IpcTransport", "endpoint", "ipc_stats", "cuda_driver", "tags_fit", "MAX_MAPPINGS",
           "EAGER_MAX"]

_K = 1 << 15
HDR_TAG, ACK_TAG, NACK_TAG = _K, 2 * _K, 3 * _K
_TOP_TAG = 28003 + 3 * _K          # highest tag used (mpicoll's tags stay below 28004)

IPC, INLINE, EAGER = 1, 2, 3      # header kinds
OK, NACK, NACK_ALLOC = 1, 2, 3     # acknowledgements (NACK_ALLOC: not that allocation)
_HDR = 16                          # header words (uint64)
_ACK_BUFS = {a: np.array([a], np.uint64) for a in (OK, NACK, NACK_ALLOC)}


class NotTheAllocation(ValueError):
    """A mapping opened that is not exactly the allocation the peer exported."""

#: Mappings kept per endpoint (private communicator x device); the least recently
#: used one is closed beyond this.
MAX_MAPPINGS = 256

#: Messages of at most this many bytes travel inside their header (0: none). A D2H and
#: an H2D copy of a few KiB cost about what one device-to-device copy, its stream sync and
#: the acknowledgement's extra message cost (not measured on a GPU yet).
EAGER_MAX = _device.env_bytes("MPICOLL_IPC_EAGER", 4096)

_yield = getattr(os, "sched_yield", lambda: None)
_tag_ub = None


def tags_fit(comm=None):
    """True when the library's ``MPI_TAG_UB`` leaves room for the control tags."""
    global _tag_ub
    if _tag_ub is None:
        _tag_ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) or 0
    return _tag_ub >= _TOP_TAG


# -- per (private communicator, device) state --------------------------------

def _delete(table):
    # MPI frees the private communicator (the user's was freed, or finalisation):
    # every mapping opened through it is closed. Never raise from here.
    for ep in list(table.values()):
        try:
            ep.close_all()
        except Exception:
            pass


_tables = CommCache(_delete)   # private communicator -> {(library, device): Endpoint}


class _Mapping:
    __slots__ = ("gen", "handle", "size", "mapping", "users")

    def __init__(self, gen, handle, size, mapping):
        self.gen, self.handle, self.size, self.mapping = gen, handle, size, mapping
        self.users = 0             # messages reading it whose stream has not been synced


class Endpoint:
    """One rank's IPC state on one private communicator and device: mappings, counters."""

    def __init__(self, adapter, device, rank):
        self.adapter, self.device, self.rank = adapter, device, rank
        # Transports of blocking calls and of requests (run by the progress thread) share
        # this endpoint: its mappings and acknowledgements change under this lock.
        self.lock = threading.Lock()
        self.maps = collections.OrderedDict()     # (peer, base) -> _Mapping, LRU order
        self.refused = set()                      # peers that could not map our memory
        self.refused_allocs = set()               # (peer, base, gen) it mapped as another
        self.held_dropped = set()                 # evicted or stale while a message read
                                                  # them: closed when the last one is done
        self.acks = []                            # acknowledgement sends in flight
        self.stats = collections.Counter()
        self.why = {}                             # failure counter -> its first reason

    def failed(self, what, exc):
        """Count a failure (``not_exportable``, ``open_failed``), keeping its first reason."""
        self.stats[what] += 1
        self.why.setdefault(what, f"{type(exc).__name__}: {exc}")

    def mapping(self, peer, base, gen, handle, size):
        """The receiver's mapping of ``peer``'s allocation at ``base`` (opened once).

        Held for one message until :meth:`release` (after the stream that reads it was
        synced): a mapping evicted or found stale meanwhile -- by another thread sharing
        this endpoint, the progress thread or the caller -- is closed only then.
        """
        with self.lock:
            m = self._mapping(peer, base, gen, handle, size)
            m.users += 1
            return m

    def release(self, m):
        """One message is done reading ``m`` (its stream synced); close it if dropped."""
        with self.lock:
            m.users -= 1
            if m.users or m not in self.held_dropped:
                return
            self.held_dropped.discard(m)
        self._close(m)

    def _drop(self, m):
        if m.users:
            self.held_dropped.add(m)    # closed on release, or by close_all
        else:
            self._close(m)

    def _mapping(self, peer, base, gen, handle, size):
        key = (peer, base)
        m = self.maps.get(key)
        if m is not None:
            if m.gen == gen and m.handle == handle:
                self.maps.move_to_end(key)
                self.stats["hits"] += 1
                return m
            # Freed and reallocated at the same address: the old mapping is stale.
            del self.maps[key]
            self._drop(m)
            self.stats["invalidated"] += 1
        opened = self.adapter.ipc_open(handle, size)
        check = getattr(self.adapter, "ipc_check", None)
        try:
            ok, why = check(opened, size) if check is not None else (None, "")
        except BaseException:
            self.adapter.ipc_close(opened)
            raise
        if ok is False:                    # never read a peer's memory at a wrong address
            self.adapter.ipc_close(opened)
            raise NotTheAllocation(why)
        if ok is None:
            self.stats["unverified"] += 1
        self.stats["opens"] += 1
        m = self.maps[key] = _Mapping(gen, handle, size, opened)
        while len(self.maps) > MAX_MAPPINGS:
            _, old = self.maps.popitem(last=False)
            self._drop(old)
            self.stats["evicted"] += 1
        return m

    def _close(self, m):
        self.stats["closes"] += 1
        self.adapter.sync()                # no queued copy may still read the mapping
        self.adapter.ipc_close(m.mapping)

    def close_all(self):
        with self.lock:
            maps, self.maps = self.maps, collections.OrderedDict()
            held, self.held_dropped = self.held_dropped, set()
        for m in [*maps.values(), *held]:  # (a late release then closes nothing again)
            self._close(m)

    def add_ack(self, request, buf):
        with self.lock:
            self.acks.append((request, buf))

    def finish_acks(self):
        with self.lock:
            acks, self.acks = self.acks, []
        if acks:
            MPI.Request.Waitall([r for r, _ in acks])


def endpoint(pcomm, adapter, device):
    """The :class:`Endpoint` of ``adapter``'s arrays on ``device`` over ``pcomm``."""
    table = _tables.get_or_create(pcomm, dict)
    key = (adapter.name, device)
    ep = table.get(key)
    if ep is None:
        ep = table[key] = Endpoint(adapter, device, pcomm.Get_rank())
    return ep


def ipc_stats(pcomm):
    """{(library, device): counters} of ``pcomm``'s endpoints (a private communicator)."""
    table = _tables.get(pcomm)
    return {k: dict(ep.stats, mappings=len(ep.maps),
                    **{f"why_{what}": why for what, why in ep.why.items()})
            for k, ep in (table or {}).items()}


# -- one message in flight -----------------------------------------------------

_WAIT_ACK, _WAIT_HEADER, _WAIT_PAYLOAD, _ACKING, _DONE = range(5)


class _Entry:
    __slots__ = ("sent", "buf", "peer", "tag", "nbytes", "reduce", "req", "wait", "hreq",
                 "hdr", "ack", "state", "path", "held")

    def __init__(self, sent, buf, peer, tag, reduce=None):
        self.sent, self.buf, self.peer, self.tag, self.reduce = sent, buf, peer, tag, reduce
        self.nbytes = buf.nbytes
        self.req = self.wait = self.hreq = self.hdr = self.ack = None
        self.held = None           # the receiver's mapping it reads (Endpoint.mapping)
        self.state = _WAIT_PAYLOAD
        self.path = None


class IpcTransport:
    """Same-node device messages through IPC mappings, the rest through ``fallback``."""

    path = "ipc"
    fuses = True                   # engine.run may bind fused receive+reduce steps (engine.fuse)

    def __init__(self, comm, adapter, device, fallback, ep, nodes):
        self.comm, self.adapter, self.device = comm, adapter, device
        self.fallback = fallback
        self.ep = ep
        self.rank = comm.Get_rank()
        self.nodes = nodes
        self.can_export = bool(adapter.ipc_supported()[0])
        self.entries = {}          # id(returned request) -> entry
        self.active = []           # entries not done, in posting order
        self.fifo = collections.defaultdict(collections.deque)   # (peer, tag) -> receives
        self.to_ack = []           # (entry, OK | NACK) to send in this order
        self.rec = None

    def reset(self):
        """A blocking call starts on this transport again (its memoized steps replay).

        Every message of the last one completed within it.
        """
        self.fallback.reset()

    # -- who goes where ------------------------------------------------------
    def ipc_peer(self, peer):
        """True when ``peer`` is another rank of this rank's node (messages go through IPC)."""
        return peer != self.rank and self.nodes[peer] == self.nodes[self.rank]

    def record(self, rec):
        """Count each message under the transport that moved it (``CallTraffic.paths``).

        A native call is the fallback's (its path, and the fallback's record if it keeps
        one).
        """
        if rec.algorithm == "native":
            keep = getattr(self.fallback, "record", None)
            if keep is not None:
                keep(rec)
            return
        rec._paths = {}
        self.rec = rec

    def _count(self, e):
        self._tally(e.sent, e.path, e.nbytes)

    def _tally(self, sent, path, nbytes):
        self.ep.stats[("sent_" if sent else "recv_") + path] += 1
        if self.rec is not None:
            c = self.rec._paths.setdefault(path, [0, 0, 0, 0])
            i = 0 if sent else 2
            c[i] += 1
            c[i + 1] += nbytes

    def _track(self, e, returned):
        e.req = returned
        self.entries[id(returned)] = e
        self.active.append(e)
        return returned

    # -- posting ---------------------------------------------------------------
    def Isend(self, buf, dest, tag):
        """Post a send of ``buf``: to a peer on this node by ipc, else by the fallback."""
        if not self.ipc_peer(dest):
            e = _Entry(True, buf, dest, tag)
            e.wait = self.fallback.Isend(buf, dest, tag)
            e.path = self.fallback.path
            return self._track(e, e.wait)
        e = _Entry(True, buf, dest, tag)
        if EAGER_MAX and e.nbytes <= EAGER_MAX:
            hdr = e.hdr = self._eager_header(buf)
            e.wait = e.hreq = self.comm.Isend(hdr, dest, tag + HDR_TAG)
            e.path = "eager"
            return self._track(e, e.wait)
        hdr = e.hdr = np.zeros(_HDR, np.uint64)
        exported = self._export(buf, dest)
        if exported is not None:
            base, gen, handle, offset, size = exported
            self.adapter.sync()            # the peer reads what the stream has written
            hdr[:7] = (IPC, e.nbytes, offset, base, gen, size, len(handle))
            hdr[7:15].view(np.uint8)[:len(handle)] = np.frombuffer(handle, np.uint8)
            e.ack = np.zeros(1, np.uint64)
            e.wait = self.comm.Irecv(e.ack, dest, tag + ACK_TAG)   # posted before the header
            e.hreq = self.comm.Isend(hdr, dest, tag + HDR_TAG)
            e.state = _WAIT_ACK
        else:
            hdr[:2] = (INLINE, e.nbytes)
            e.hreq = self.comm.Isend(hdr, dest, tag + HDR_TAG)
            e.wait = self.fallback.Isend(buf, dest, tag)
            e.path = self.fallback.path
        return self._track(e, e.wait)

    def _export(self, buf, dest):
        if not (self.can_export and buf.nbytes and dest not in self.ep.refused
                and self.adapter.matches(buf)):
            return None
        try:
            exported = self.adapter.ipc_export(buf)
        except Exception as exc:  # not exportable: the payload goes inline
            self.ep.failed("not_exportable", exc)
            return None
        if len(exported[2]) > 64 or (dest, exported[0], exported[1]) in self.ep.refused_allocs:
            return None
        return exported

    def Irecv(self, buf, source, tag, reduce=None):
        """Receive into ``buf``, or with ``reduce`` call ``reduce(data)`` on the message.

        With ``reduce`` the message is not left in ``buf``; ``data``: the peer's memory
        itself where it is mapped.
        """
        e = _Entry(False, buf, source, tag, reduce)
        if not self.ipc_peer(source):
            e.wait = self.fallback.Irecv(buf, source, tag)
            e.path = self.fallback.path
            return self._track(e, e.wait)
        eager = _words(e.nbytes) if EAGER_MAX and e.nbytes <= EAGER_MAX else 0
        e.hdr = np.empty(_HDR + eager, np.uint64)
        e.wait = self.comm.Irecv(e.hdr, source, tag + HDR_TAG)
        e.state = _WAIT_HEADER
        self.fifo[(source, tag)].append(e)
        return self._track(e, e.wait)

    # Blocking messages. While nothing else is in flight, an eager one (both ways, for
    # Sendrecv) is one blocking MPI call on its header: no peer can be waiting for this
    # rank to answer a header then, and it saves the polling loop.
    def _eager_now(self, nbytes, peer):
        return not self.active and EAGER_MAX and nbytes <= EAGER_MAX and self.ipc_peer(peer)

    def Send(self, buf, dest, tag):
        """Send ``buf`` (eager where it fits, else as :meth:`Isend` and wait)."""
        if self._eager_now(buf.nbytes, dest):
            self.comm.Send(self._eager_header(buf), dest, tag + HDR_TAG)
            self._tally(True, "eager", buf.nbytes)
            return
        self.waitall([self.Isend(buf, dest, tag)])

    def Recv(self, buf, source, tag, reduce=None):
        """Receive into ``buf`` (``reduce``: as for :meth:`Irecv`)."""
        if self._eager_now(buf.nbytes, source):
            hdr = np.empty(_HDR + _words(buf.nbytes), np.uint64)
            self.comm.Recv(hdr, source, tag + HDR_TAG)
            self._land_eager(hdr, buf, source, reduce)
            return
        self.waitall([self.Irecv(buf, source, tag, reduce)])

    def Sendrecv(self, sbuf, dest, stag, rbuf, source, rtag, reduce=None):
        """Send ``sbuf`` and receive into ``rbuf`` (``reduce``: as for :meth:`Irecv`)."""
        if self._eager_now(sbuf.nbytes, dest) and self._eager_now(rbuf.nbytes, source):
            hdr = np.empty(_HDR + _words(rbuf.nbytes), np.uint64)
            self.comm.Sendrecv(self._eager_header(sbuf), dest, stag + HDR_TAG,
                               hdr, source, rtag + HDR_TAG)
            self._tally(True, "eager", sbuf.nbytes)
            self._land_eager(hdr, rbuf, source, reduce)
            return
        r = self.Irecv(rbuf, source, rtag, reduce)
        self.waitall([self.Isend(sbuf, dest, stag), r])

    def _eager_header(self, buf):
        """A header of kind EAGER carrying ``buf``'s bytes."""
        hdr = np.zeros(_HDR + _words(buf.nbytes), np.uint64)
        hdr[:2] = (EAGER, buf.nbytes)
        if buf.nbytes:
            self._to_host(buf, _payload(hdr, buf.nbytes, buf.dtype))
        return hdr

    def _land_eager(self, h, buf, peer, reduce):
        """Put an EAGER header's payload in ``buf`` (or hand it to ``reduce``)."""
        kind, nbytes = int(h[0]), int(h[1])
        if kind != EAGER or nbytes != buf.nbytes:
            raise RuntimeError(f"mpicoll ipc: a message of {nbytes} bytes from rank {peer} "
                               f"for a receive of {buf.nbytes} bytes")
        if nbytes:                      # an empty message carries nothing to land
            data = _payload(h, nbytes, buf.dtype)
            if self.adapter.matches(buf):
                self.adapter.to_device(data, buf)
            else:
                buf[...] = data.reshape(buf.shape)
        if reduce is not None:
            reduce(buf)
        self._tally(False, "eager", nbytes)

    # -- completion --------------------------------------------------------------
    def waitall(self, requests):
        """Complete ``requests`` (from this transport); received data is then in place.

        Polls (Testsome over every message in flight) and yields the processor
        between polls that found nothing: the protocol waits on its peers twice
        per message, and where ranks outnumber cores a rank spinning inside MPI
        would keep the peer it waits for off the processor for a time slice.
        """
        want = [self.entries.get(id(r)) for r in requests]
        foreign = [r for r, e in zip(requests, want, strict=True) if e is None]
        want = [e for e in want if e is not None]
        try:
            while not all(e.state == _DONE for e in want):
                if not self._advance():
                    _yield()
        finally:
            self._flush_acks()
        if foreign:
            MPI.Request.Waitall(foreign)
        self._forget(want)

    # -- the progress engine's interface (mpicoll.engine.nonblocking) ----------------
    #: The engine must not block in MPI on these requests: a peer's header needs an answer.
    passive = False

    def test(self, requests):
        """Advance every message in flight once; True once each of ``requests`` is complete."""
        want = [self.entries.get(id(r)) for r in requests]
        try:
            self._advance()
        finally:
            self._flush_acks()
        if any(e is not None and e.state != _DONE for e in want):
            return False
        foreign = [r for r, e in zip(requests, want, strict=True) if e is None]
        if foreign and not MPI.Request.Testall(foreign):
            return False
        self._forget(e for e in want if e is not None)
        return True

    def pending(self, requests):
        """The MPI requests of every message in flight (not only ``requests``'s).

        A peer may wait for this rank to answer a header before it sends what ``requests``
        wait for.
        """
        return [e.wait for e in self.active if e.state != _DONE] + [
            r for r in requests if id(r) not in self.entries]

    def _forget(self, done):
        for e in done:
            self.entries.pop(id(e.req), None)
        self.active = [e for e in self.active if e.state != _DONE]   # drop their buffers
        if not self.active:
            self.ep.finish_acks()

    def finish(self, requests):
        """Nothing to do: waitall has landed everything already (the transports' interface)."""
        # The transports' common interface; waitall has landed everything already.
        pass

    def _advance(self):
        """Step every entry whose MPI request completed; True if any did."""
        active = self.active = [e for e in self.active if e.state != _DONE]
        if not active:
            return False
        reqs = [e.wait for e in active]
        MPI.Request.Testsome(reqs)
        # Completed requests are null now (so are any completed elsewhere); an entry
        # whose request changed meanwhile (handled with an earlier header) waits on.
        stepped = False
        for e, r in zip(active, reqs, strict=True):
            if e.wait is r and r == MPI.REQUEST_NULL:
                self._step(e)
                stepped = True
        self._flush_acks()
        return stepped

    def _step(self, e):
        if e.state == _WAIT_HEADER:
            self._headers(e)
        elif e.state == _WAIT_ACK:
            e.hreq.Wait()
            answer = int(e.ack[0])
            if answer == OK:
                e.path = "ipc"
                self._done(e)
            else:                          # the peer cannot map our memory: send it inline
                if answer == NACK_ALLOC:   # this allocation only (base, generation)
                    self.ep.refused_allocs.add((e.peer, int(e.hdr[3]), int(e.hdr[4])))
                else:                      # any of ours
                    self.ep.refused.add(e.peer)
                self.ep.stats["nacks"] += 1
                e.wait = self.fallback.Isend(e.buf, e.peer, e.tag + NACK_TAG)
                e.path = self.fallback.path
                e.state = _WAIT_PAYLOAD
        elif e.state == _WAIT_PAYLOAD:
            self.fallback.finish([e.wait])   # staged: the data lands on the device
            if e.hreq is not None and e.sent:
                e.hreq.Wait()
            if e.reduce is not None:
                e.reduce(e.buf)
            self._done(e)

    def _done(self, e):
        e.state = _DONE
        self._count(e)

    def _headers(self, e):
        """Handle the headers of ``e``'s peer and tag in posting order, up to ``e``'s."""
        q = self.fifo[(e.peer, e.tag)]
        while q:
            f = q.popleft()
            if f.wait != MPI.REQUEST_NULL:
                f.wait.Wait()              # matched before e's header: completes at once
            self._header(f)
            if f is e:
                break
        if not q:
            self.fifo.pop((e.peer, e.tag), None)

    def _header(self, e):
        h = e.hdr
        kind, nbytes = int(h[0]), int(h[1])
        if kind == IPC:
            view, nack = None, NACK
            if nbytes == e.nbytes:
                offset, base, gen, size, hlen = (int(x) for x in h[2:7])
                handle = h[7:15].view(np.uint8)[:hlen].tobytes()
                try:
                    e.held = self.ep.mapping(e.peer, base, gen, handle, size)
                    view = self.adapter.ipc_array(e.held.mapping, offset, e.buf.dtype,
                                                  e.buf.size)
                except Exception as exc:  # cannot map it: ask for the payload
                    self.ep.failed("open_failed", exc)
                    view = None
                    nack = NACK_ALLOC if isinstance(exc, NotTheAllocation) else NACK
                    self._release(e)
            if view is None:
                # NACK: the payload follows through the fallback (MPI then reports a
                # size mismatch as it would for any message).
                self.to_ack.append((e, nack))
                e.wait = self.fallback.Irecv(e.buf, e.peer, e.tag + NACK_TAG)
                e.path = self.fallback.path
                e.state = _WAIT_PAYLOAD
                return
            try:
                if e.reduce is not None:
                    e.reduce(view)         # one pass over the peer's memory: fused
                    self.ep.stats["fused"] += 1
                elif self.adapter.matches(e.buf):
                    self.adapter.copy(e.buf, view)
                else:
                    self.adapter.to_host(view, e.buf)
            except BaseException:
                self._release(e, sync=True)
                raise
            e.path = "ipc"
            e.state = _ACKING
            self.to_ack.append((e, OK))    # acknowledged once the stream has run the copy
        elif kind == EAGER:
            e.path = "eager"
            e.state = _DONE
            self._land_eager(h, e.buf, e.peer, e.reduce)
        else:
            e.wait = self.fallback.Irecv(e.buf, e.peer, e.tag)
            e.path = self.fallback.path
            e.state = _WAIT_PAYLOAD

    def _flush_acks(self):
        """Acknowledge handled headers, in handling order (one stream sync for all)."""
        if not self.to_ack:
            return
        todo, self.to_ack = self.to_ack, []
        try:
            if any(a == OK for _, a in todo):
                self.adapter.sync()        # the copies/reductions have read the peers' memory
        finally:
            for e, _ in todo:              # read (or failed): the mappings may close now
                self._release(e)
        for e, a in todo:
            buf = _ACK_BUFS[a]
            self.ep.add_ack(self.comm.Isend(buf, e.peer, e.tag + ACK_TAG), buf)
            if a == OK:
                self._done(e)

    def _release(self, e, sync=False):
        """``e`` no longer reads the mapping it held.

        ``sync``: wait for the stream first, best effort: a failed copy may have left work
        queued on it.
        """
        if e.held is None:
            return
        if sync:
            try:
                self.adapter.sync()
            except Exception:  # the original error is the one to report
                pass
        m, e.held = e.held, None
        self.ep.release(m)

    def _to_host(self, buf, host):
        if self.adapter.matches(buf):
            self.adapter.to_host(buf, host)   # ordered after the stream's work on buf
        else:
            host[...] = buf.reshape(-1)

    # -- native collectives: the fallback's ---------------------------------------
    def __getattr__(self, name):
        if name == "fallback":
            raise AttributeError(name)
        return getattr(self.fallback, name)


def _words(nbytes):
    return -(-nbytes // 8)


def _payload(hdr, nbytes, dtype):
    """The eager payload after the header words, as ``nbytes`` of ``dtype``."""
    return hdr[_HDR:].view(np.uint8)[:nbytes].view(dtype)


def _make(comm, adapter, device, fallback, nodes):
    """The ipc transport for ``comm``'s device messages, or None where its tags do not fit."""
    if not tags_fit(comm):
        return None
    return IpcTransport(comm, adapter, device, fallback, endpoint(comm, adapter, device), nodes)


_transport.IPC = _make
