"""Receive and reduce in one pass, for transports that read a peer's memory (CUDA IPC).

A receive from a peer whose data the transport can read in place (``ipc_peer``),
followed in the plan by the reduction of the received slice, becomes one step
that reduces straight from the peer's memory (:func:`fusions`); the executors
(:mod:`.run`, :mod:`.nonblocking`) bind those steps in place of the two.
"""
import collections
import time
from functools import partial

from ..core.ops import OPS
from ..device import arrays as _device
from ..device import reduce as _reduce
from ..device.reduce import combine
from ..sched.plan import COPY, IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV

__all__ = ["fusions", "copies", "irecv_reduce", "recv_reduce", "sendrecv_reduce", "Fused", "FUSE"]

#: Fuse a receive from an IPC peer with the reduction that reads it (False: copy, then
#: reduce, as on the other transports -- for comparisons).
FUSE = True

# Fused steps are bound into the memo's replayed steps: a change of FUSE must rebind them.
_device.KEY_PARTS.append(lambda: FUSE)


def _reduce_into(op, other, out, lower, data):
    if lower:
        combine(op, data, other, out)
    else:
        combine(op, other, data, out)


def recv_reduce(ctx, buf, source, reduce):
    """Receive ``buf`` from ``source``, calling ``reduce(data)`` on arrival."""
    ctx._recvd(buf, source)
    t0 = _now()
    ctx.mpi.Recv(buf, source, ctx.tag, reduce)
    _trace("recv", t0, source=source, recv_bytes=buf.nbytes)


def sendrecv_reduce(ctx, sendbuf, dest, recvbuf, source, reduce):
    """Send ``sendbuf`` to ``dest``; receive ``recvbuf``, calling ``reduce(data)`` on arrival."""
    ctx._sent(sendbuf, dest)
    ctx._recvd(recvbuf, source)
    t0 = _now()
    ctx.mpi.Sendrecv(sendbuf, dest, ctx.tag, recvbuf, source, ctx.tag, reduce)
    _trace("sendrecv", t0, dest=dest, send_bytes=sendbuf.nbytes, source=source,
           recv_bytes=recvbuf.nbytes)


def irecv_reduce(ctx, buf, source, reduce):
    """Post a receive of ``buf`` from ``source`` that calls ``reduce(data)`` on arrival.

    ``reduce`` runs when the peer's header is handled (or its payload lands), at
    any later advance of the transport: what it reads and writes must be final
    when this is posted -- :func:`fusions` only fuses where they are.
    """
    ctx._recvd(buf, source)
    t0 = _now()
    req = ctx.mpi.Irecv(buf, source, ctx.tag, reduce)
    _trace("irecv", t0, source=source, recv_bytes=buf.nbytes)
    return req


def _now():
    # The bench's tracer sets one hook in mpicoll.engine.context and mpicoll.device.reduce
    # alike; the reduce step's is the one this module reads.
    if _reduce.trace_hook is None:
        return None
    return time.perf_counter()


def _trace(kind, t0, **info):
    hook = _reduce.trace_hook
    if t0 is not None and hook is not None:
        hook(kind, t0, time.perf_counter(), info)


def _same(a, b):
    return a.buf == b.buf and a.start == b.start and a.stop == b.stop


def _overlap(a, b):
    return a.buf == b.buf and a.start < b.stop and b.start < a.stop and a.size and b.size


def _uses(o):
    """(read, written) buffers of one plan operation."""
    k = o[0]
    if k in (SEND, ISEND):
        return (o[1],), ()
    if k in (RECV, IRECV):
        return (), (o[1],)
    if k == SENDRECV:
        return (o[1],), (o[3],)
    if k == COPY:
        return (o[2],), (o[1],)
    if k == REDUCE:
        return (o[1], o[2]), (o[3],)
    return (), ()


def _dead_after(ops, start, r):
    """True when no operation from ``start`` on reads a byte of ``r`` before overwriting it."""
    live = [(r.start, r.stop)]
    for o in ops[start:]:
        reads, writes = _uses(o)
        for x in reads:
            if x.buf == r.buf and x.size and any(x.start < b and a < x.stop for a, b in live):
                return False
        for w in writes:
            if w.buf == r.buf and w.size:
                live = [piece for a, b in live
                        for piece in ((a, min(b, w.start)), (max(a, w.stop), b))
                        if piece[0] < piece[1]]
        if not live:
            return True
    return True


class Fused(collections.namedtuple("Fused", "copies recv source reduce send dest")):
    """One fused receive + reduce of a plan, bound to arrays.

    ``copies``: (dst, src) local copies run first; ``recv``/``source``: the
    receive, whose data ``reduce(data)`` consumes; ``send``/``dest``: the
    send of the same SENDRECV (None for a RECV).
    """

    def step(self, ctx):
        """The blocking step: copies, then the receive (and send) with the reduction."""
        if self.send is None:
            step = _partial(recv_reduce, ctx, self.recv, self.source, self.reduce)
        else:
            step = _partial(sendrecv_reduce, ctx, self.send, self.dest, self.recv, self.source,
                            self.reduce)
        if self.copies:
            step = _partial(_copies_then, self.copies, step)
        return step


def fusions(plan, op, ctx, view):
    """Fused receives of ``plan`` for ``ctx``'s transport: ``{op index: Fused or None}``.

    A receive (RECV, SENDRECV) from an IPC peer followed by the REDUCE of that
    received slice with another becomes one step that reduces straight from
    the peer's memory (``out = lower (op) peer``); the REDUCE's index maps to
    None (skipped). Local copies between the two that neither touch the
    received slice nor write what the step sends run first, inside the fused
    step (the last step of the reduce-scatter ring copies its own block in
    between). Only built-in ops (user ops reduce on the host), only where the
    received slice is the output or is never read afterwards (a scratch
    vector, overwritten or unused before any read), and only where the
    reduction writes nothing the same step still sends (the peer reads it
    until it acknowledges).
    """
    if not FUSE or OPS.get(op.handle) is None:
        return {}
    t = ctx.mpi
    ops = plan.ops
    fused = {}
    for i, o in enumerate(ops):
        if o[0] not in (RECV, SENDRECV):
            continue
        r, src = (o[1], o[2]) if o[0] == RECV else (o[3], o[4])
        if not t.ipc_peer(src) or not r.size:
            continue
        sent = o[1] if o[0] == SENDRECV else None
        j = i + 1
        while j < len(ops) and j - i <= 2 and ops[j][0] == COPY:
            dst, cs = ops[j][1], ops[j][2]
            if _overlap(dst, r) or _overlap(cs, r) or (sent is not None and _overlap(dst, sent)):
                break
            j += 1
        if j >= len(ops) or ops[j][0] != REDUCE:
            continue
        lo, hi, out = ops[j][1], ops[j][2], ops[j][3]
        if _same(lo, r) and not _overlap(hi, r):
            lower, other = True, hi
        elif _same(hi, r) and not _overlap(lo, r):
            lower, other = False, lo
        else:
            continue
        if sent is not None and _overlap(sent, out):
            continue                       # the peer may still be reading what we would write
        if not _same(out, r):
            if _overlap(out, r) or r.buf < plan.nargs or not _dead_after(ops, j + 1, r):
                continue
        reduce = _partial(_reduce_into, op, view(other), view(out), lower)
        copies = [(view(ops[k][1]), view(ops[k][2])) for k in range(i + 1, j)]
        if o[0] == RECV:
            fused[i] = Fused(copies, view(r), src, reduce, None, None)
        else:
            fused[i] = Fused(copies, view(r), src, reduce, view(o[1]), o[2])
        for k in range(i + 1, j + 1):
            fused[k] = None
    return fused


def copies(pairs):
    """Run local copies ``(dst, src)`` in order."""
    for dst, src in pairs:
        dst[...] = src


def _copies_then(pairs, step):
    copies(pairs)
    step()


_partial = partial
