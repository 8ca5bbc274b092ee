"""Shared-memory algorithms: the ranks of a node read each other's buffers instead of messaging.

Every byte that crosses MPI's own shared-memory channel is copied twice (into
the channel by the sender, out of it by the receiver). These algorithms copy
it once: each rank reads the data it needs straight from its peers' memory
(:mod:`mpicoll.device.peer_memory`: their symmetric arrays in place, their ordinary
buffers by cross-memory attach, or through a scratch segment) and reduces it
with NumPy's ufuncs into its own buffers, in cache-sized chunks.

The ranks first exchange where their buffers are (one ``Allgather`` of a few
words per buffer on the node's communicator, which also says every rank has
entered the call), and synchronise with node barriers: one after the phase
whose results peers read next, one at the end (so that no rank reuses a
buffer a peer is still reading). Reductions keep rank order: each element's
result is ``in_0 (op) in_1 (op) ... in_{N-1}``, computed by one rank (the
owner of its slice) and copied by the others, so results are bitwise
identical on every rank and non-commutative ops are fine.

Small calls (at most ``MAILBOX_BYTES`` = 16 KiB written per rank) take a
shorter way: each rank copies its data into its slot of a double-buffered
mailbox segment and one node barrier follows; then every rank reads the slots
it needs in place (:class:`mpicoll.device.peer_memory.Mailbox`): no exchange of
addresses, no system call, one synchronisation. There every rank that needs a
reduction computes all of it (``(N-1)·n`` read), which at these sizes costs
less than a second barrier. Ranks decide by their own sizes: in ``local``
check mode a call whose sizes differ across ranks on both sides of the
threshold is not caught (the default agreement step catches it first).

Costs below: α_s per synchronisation (the exchange, a barrier), β_r per byte
read from a peer, γ per byte reduced, n bytes per rank's vector (or block),
N ranks of one node. Limits: host memory only (NumPy arrays); every rank of
the communicator on one node (``hierarchical:intra=...`` uses node-aware
algorithms across nodes); no plan (they read peers' memory: they run
directly, also as nonblocking or persistent requests, which then complete
when they are made). Where a call would need more scratch segment than
``MPICOLL_SHM_MAX`` allows (no cross-memory attach), they run a
point-to-point algorithm instead, on every rank alike.
"""
import numpy as np

from ..core.blocks import offsets, split
from ..core.errors import ArgumentError, NotSchedulable
from ..core.ops import op_ufunc
from ..core.registry import lookup, register
from ..device.peer_memory import CHUNK, MAILBOX_BYTES, Peers, TooBig, locate

__all__ = ["check_layout", "Reads"]


def check_layout(layout, commutative):
    """Why these algorithms cannot run on ``layout`` (None: they can).

    The ranks must share one node.
    """
    if layout.n_nodes > 1:
        return ("algorithm: the shm algorithms read peers' memory, so every rank must be on "
                f"one node; this communicator spans {layout.n_nodes} nodes "
                f"({layout.describe()}): use a node-aware algorithm (hierarchical)")
    split = layout.memory_split()
    if split:
        return f"algorithm: the shm algorithms read peers' memory; {split}"
    return None


class Reads:
    """How many elements one rank of an shm algorithm reads from its peers' memory.

    ``count(n, rank, count, root, counts)``: exact, on ordinary buffers (each read
    copies; symmetric arrays and node-shared results read less), where ``count`` is
    the call's per-rank count (a block for gather, allgather, scatter and alltoall,
    the whole vector otherwise) and ``counts`` reduce_scatter's; ``text``: the same
    as a formula (K the count, b a block, s_r rank r's slice of split(K, N)).
    ``small``/``small_text``: the same for calls that go through the mailbox (at most
    ``MAILBOX_BYTES`` written per rank), where they differ. The demo's traffic table
    and the tests read them: they are the β_r terms of the algorithm's Cost.
    """

    __slots__ = ("count", "text", "small", "small_text")

    def __init__(self, count, text, small=None, small_text=None):
        self.count, self.text = count, text
        self.small, self.small_text = small or count, small_text or text

    def at(self, nbytes):
        """(count, text) for a call writing ``nbytes`` per rank (the mailbox or not)."""
        return (self.small, self.small_text) if _small(nbytes) else (self.count, self.text)


def _shm(reads):
    """Mark an algorithm as a shared-memory one (host memory, one node, no plan).

    ``reads``: the :class:`Reads` it makes.
    """
    def mark(fn):
        fn.check_layout = check_layout
        fn.host_only = True
        fn.reads = reads
        return fn
    return mark


def _slice(n, rank, count):
    return split(count, n)[rank]


def _begin(ctx, arrays, outputs=(), same=None, unread=()):
    """(node memory, peers) of this call; NotSchedulable while a plan is being recorded.

    ``same``: the arrays (``{index: name}``) whose size must agree over the node.
    """
    node_memory = getattr(ctx, "node_memory", None)
    if node_memory is None:
        raise NotSchedulable("the shm algorithms read peers' memory: they have no plan")
    shm = node_memory()
    peers = Peers(shm, arrays, outputs, same, unread)
    ctx.set_path(peers.path)
    return shm, peers


def _node(ctx):
    """This call's node memory; NotSchedulable while a plan is being recorded."""
    node_memory = getattr(ctx, "node_memory", None)
    if node_memory is None:
        raise NotSchedulable("the shm algorithms read peers' memory: they have no plan")
    return node_memory()


def _small(nbytes):
    """True when a call of ``nbytes`` (what one rank writes) goes through the mailbox."""
    return nbytes <= MAILBOX_BYTES


def _post(ctx, data, declared, name):
    """Post ``data`` into this rank's mailbox slot; returns (node memory, mailbox, slot).

    After the barrier every rank's slot is readable. ``declared``: this rank's size, which
    must be every rank's (``name``: the argument).
    """
    shm = _node(ctx)
    box = shm.mailbox()
    ctx.set_path("shm-mailbox")
    k = box.post(data, declared)
    told = box.declared(k)
    if len(set(told)) > 1:             # every rank holds the table: every rank raises
        raise ArgumentError(f"{name}: the shm algorithm needs the same number of bytes on "
                            f"every rank of the node; got " + ", ".join(
                                f"{b} on rank {q}" for q, b in enumerate(told)))
    return shm, box, k


def _reduce_slots(ctx, shm, box, k, lo, hi, out):
    """``out = slot_0 (op) slot_1 (op) ...``: bytes ``[lo, hi)`` of every rank's slot.

    In rank order; user ops work on private copies (they write their second operand).
    """
    n, dt = shm.size, out.dtype
    if n == 1 or op_ufunc(ctx.op) is not None:
        if n == 1:
            out[...] = ctx.read_box(box, 0, k, lo, hi, dt)
            return
        ctx.reduce(ctx.read_box(box, 0, k, lo, hi, dt), ctx.read_box(box, 1, k, lo, hi, dt),
                   out)
        for q in range(2, n):
            ctx.reduce(out, ctx.read_box(box, q, k, lo, hi, dt), out)
        return
    out[...] = ctx.read_box(box, 0, k, lo, hi, dt)
    t = np.empty_like(out)
    for q in range(1, n):
        t[...] = ctx.read_box(box, q, k, lo, hi, dt)
        res = ctx.reduce(out, t, out)
        if res is not out:
            out[...] = res


def _chunk(itemsize):
    return max(1, CHUNK // max(itemsize, 1))


def _reduce_range(ctx, shm, peers, i, lo, hi, own, out, tmp, keep=None):
    """``out = in_0 (op) in_1 (op) ...`` over the node's ranks, in cache-sized chunks.

    The elements ``[lo, hi)`` of their array ``i`` (``own``: this rank's own elements of
    that range). ``keep``: a chunk-sized scratch array when ``own`` is ``out`` (in place):
    each chunk of ``own`` is kept there before ``out``'s chunk is written, which costs a
    copy in cache instead of a copy of the whole slice up front.

    Built-in ops combine the first two operands straight into ``out`` (a peer's chunk read
    in place, or copied into ``out`` / ``tmp`` by cross-memory attach): no extra copy.
    User ops write their second operand (MPI's ``Reduce_local``), so it is always a
    private copy, never a peer's memory.
    """
    user = op_ufunc(ctx.op) is None
    dtype = out.dtype
    step = _chunk(out.itemsize)
    direct = peers.mode[i] != "cma"
    n, me = shm.size, shm.rank

    def operand(q, c0, c1, into):
        if q == me:
            return mine
        if direct:
            return ctx.read_from(peers, q, i, lo + c0, lo + c1, None, dtype)
        return ctx.read_from(peers, q, i, lo + c0, lo + c1, into, dtype)

    for c0 in range(0, hi - lo, step):
        c1 = min(hi - lo, c0 + step)
        o = out[c0:c1]
        t = tmp[:c1 - c0]
        mine = own[c0:c1]
        if n == 1:
            o[...] = mine
            continue
        if keep is not None:
            k = keep[:c1 - c0]
            k[...] = mine
            mine = k
        if not user:
            res = ctx.reduce(operand(0, c0, c1, o), operand(1, c0, c1, t), o)
            for q in range(2, n):
                res = ctx.reduce(o, operand(q, c0, c1, t), o)
            continue
        for q in range(n):
            if q == me:
                d = mine
                if q:
                    t[...] = d
                    d = t
            else:
                d = ctx.read_from(peers, q, i, lo + c0, lo + c1, t, dtype)
            if q == 0:
                o[...] = d
            else:
                res = ctx.reduce(o, d, o)       # lower ranks first; user ops write d (= t)
                if res is not o:
                    o[...] = res


def _p2p(primitive, algorithm, ctx, *args):
    """Where the scratch segment is too small: the point-to-point ``algorithm``."""
    return lookup(primitive, algorithm)(ctx, *args)


# -- allreduce -----------------------------------------------------------------------------

@register("allreduce", "shm")
@_shm(Reads(lambda n, r, k, root, counts: k + (n - 2) * _slice(n, r, k),
             "K + (N-2)·s_r (= 2(N-1)/N·K on even slices)",
             lambda n, r, k, root, counts: (n - 1) * k, "(N-1)·K (small: every peer's vector)"))
def allreduce_shm(ctx, sendbuf, recvbuf, op):
    """Each rank reduces its slice reading its peers' inputs, then copies the others' slices.

    Cost: α_s + 2α_s + 2(N-1)/N·nβ_r + (N-1)/N·nγ (one exchange, two barriers; on
    symmetric arrays the reads are in place, and with a node-shared ``recvbuf``
    the second copy and a barrier go). Small calls: α_s + nβ (the copy into the
    mailbox) + (N-1)nβ_r + (N-1)nγ. Any op, rank order kept.
    """
    src = recvbuf if sendbuf is None else sendbuf
    if _small(recvbuf.nbytes) and not _in_node_shared(recvbuf):
        shm, box, k = _post(ctx, src, src.nbytes, "sendbuf" if sendbuf is not None
                            else "recvbuf")
        _reduce_slots(ctx, shm, box, k, 0, recvbuf.nbytes, recvbuf)
        return
    try:
        shm, peers = _begin(ctx, [src, recvbuf], outputs=(1,),
                             same={0: "sendbuf" if sendbuf is not None else "recvbuf",
                                   1: "recvbuf"})
    except TooBig:
        return _p2p("allreduce", "ring" if ctx.op.is_commutative else "recursive_doubling",
                    ctx, sendbuf, recvbuf, op)
    n, r = shm.size, shm.rank
    bounds = offsets(split(recvbuf.size, n))
    lo, hi = bounds[r], bounds[r + 1]
    tmp = np.empty(min(hi - lo, _chunk(recvbuf.itemsize)), recvbuf.dtype)
    # In place, this rank's slice is both an input and the output: keep each chunk of it
    # before writing that chunk (not the whole slice up front: a second pass over memory).
    keep = np.empty_like(tmp) if sendbuf is None else None
    _reduce_range(ctx, shm, peers, 0, lo, hi, src[lo:hi], recvbuf[lo:hi], tmp, keep)
    peers.publish(1, lo, hi)
    peers.barrier()                     # every slice is reduced
    if not _node_shared(peers, 1):
        for q in range(n):
            if q != r:
                ctx.read_from(peers, q, 1, bounds[q], bounds[q + 1],
                              recvbuf[bounds[q]:bounds[q + 1]])
    peers.barrier()                     # no rank reads this rank's buffers any more


def _in_node_shared(a):
    """True when ``a`` is one array for the whole node.

    That is, one made by ``mpicoll.shm.empty(..., shared=True)``.
    """
    got = locate(a)
    return got is not None and got[0].shared


def _node_shared(peers, i):
    """True when array ``i`` is one array for the whole node.

    That is, ``mpicoll.shm.empty(..., shared=True)`` on every rank: what one rank writes,
    every rank holds.
    """
    if peers.mode[i] != "view" or peers.arrays[i] is None:
        return False
    got = locate(peers.arrays[i])
    return got is not None and got[0].shared


# -- reduce_scatter ------------------------------------------------------------------------

@register("reduce_scatter", "shm")
@_shm(Reads(lambda n, r, k, root, counts: (n - 1) * counts[r],
             "(N-1)·c_r (c_r: its block)"))
def reduce_scatter_shm(ctx, sendbuf, recvbuf, counts, op):
    """Each rank reduces its own block reading its peers' inputs.

    Cost: 2α_s + (N-1)/N·nβ_r + (N-1)/N·nγ (n: the whole vector); small calls
    α_s + nβ + (N-1)/N·nβ_r + (N-1)/N·nγ. Any op, rank order.
    """
    if _small(sendbuf.nbytes):
        shm, box, k = _post(ctx, sendbuf, sendbuf.nbytes, "sendbuf")
        bounds = offsets(counts)
        isz = sendbuf.itemsize
        _reduce_slots(ctx, shm, box, k, bounds[shm.rank] * isz, bounds[shm.rank + 1] * isz,
                      recvbuf)
        return
    try:
        shm, peers = _begin(ctx, [sendbuf], same={0: "sendbuf"})
    except TooBig:
        return _p2p("reduce_scatter", "reduce_scatterv", ctx, sendbuf, recvbuf, counts, op)
    r = shm.rank
    bounds = offsets(counts)
    lo, hi = bounds[r], bounds[r + 1]
    tmp = np.empty(min(max(hi - lo, 1), _chunk(sendbuf.itemsize)), sendbuf.dtype)
    _reduce_range(ctx, shm, peers, 0, lo, hi, sendbuf[lo:hi], recvbuf, tmp)
    peers.barrier()


# -- reduce --------------------------------------------------------------------------------

@register("reduce", "shm")
@_shm(Reads(lambda n, r, k, root, counts: (n - 1) * _slice(n, r, k)
             + (k - _slice(n, r, k) if r == root else 0),
             "(N-1)·s_r, the root K - s_r more",
             lambda n, r, k, root, counts: (n - 1) * k if r == root else 0,
             "(N-1)·K on the root (small: it reduces alone)"))
def reduce_shm(ctx, sendbuf, recvbuf, op, root):
    """Each rank reduces a slice reading its peers' inputs; the root copies the slices.

    Cost: 3α_s + (N-1)/N·nβ_r on every rank + (N-1)/N·nβ_r more on the root
    + (N-1)/N·nγ; small calls α_s + nβ + (N-1)n(β_r + γ) on the root. Any op, rank
    order kept.
    """
    n_el = sendbuf.size
    if _small(sendbuf.nbytes):
        shm, box, k = _post(ctx, sendbuf, sendbuf.nbytes, "sendbuf")
        if shm.rank == root:
            _reduce_slots(ctx, shm, box, k, 0, sendbuf.nbytes, recvbuf)
        return
    try:
        shm, peers0 = _begin(ctx, [sendbuf], same={0: "sendbuf"})
    except TooBig:
        return _p2p("reduce", "binomial", ctx, sendbuf, recvbuf, op, root)
    n, r = shm.size, shm.rank
    bounds = offsets(split(n_el, n))
    lo, hi = bounds[r], bounds[r + 1]
    part = recvbuf[lo:hi] if r == root else np.empty(hi - lo, sendbuf.dtype)
    tmp = np.empty(min(max(hi - lo, 1), _chunk(sendbuf.itemsize)), sendbuf.dtype)
    _reduce_range(ctx, shm, peers0, 0, lo, hi, sendbuf[lo:hi], part, tmp)
    # Where every rank's reduced slice is (its exchange also says every slice is done).
    parts = Peers(shm, [part])
    if r == root:
        for q in range(n):
            if q != r:
                ctx.read_from(parts, q, 0, 0, bounds[q + 1] - bounds[q],
                              recvbuf[bounds[q]:bounds[q + 1]])
    parts.barrier()


# -- bcast, gather, scatter, allgather, alltoall -----------------------------------------

@register("bcast", "shm")
@_shm(Reads(lambda n, r, k, root, counts: 0 if r == root else k,
             "K on every rank but the root"))
def bcast_shm(ctx, buf, root):
    """Every rank copies the root's buffer straight from its memory.

    Cost: 2α_s + nβ_r on every rank but the root (small calls: α_s + nβ on the root).
    """
    if _small(buf.nbytes):
        shm, box, k = _post(ctx, buf if ctx.rank == root else None, buf.nbytes, "buf")
        if shm.rank != root:
            buf[...] = ctx.read_box(box, root, k, 0, buf.nbytes, buf.dtype).reshape(buf.shape)
        return
    try:
        shm, peers = _begin(ctx, [buf], same={0: "buf"})
    except TooBig:
        return _p2p("bcast", "binomial", ctx, buf, root)
    if shm.rank != root:
        ctx.read_from(peers, root, 0, 0, buf.size, buf)
    peers.barrier()


@register("gather", "shm")
@_shm(Reads(lambda n, r, k, root, counts: (n - 1) * k if r == root else 0,
             "(N-1)·b on the root"))
def gather_shm(ctx, sendbuf, recvbuf, root):
    """The root copies every rank's block straight from its memory.

    Cost: 2α_s + (N-1)nβ_r on the root (small calls: α_s + nβ on every rank).
    """
    if _small(sendbuf.nbytes):
        shm, box, k = _post(ctx, sendbuf, sendbuf.nbytes, "sendbuf")
        if shm.rank == root:
            c = sendbuf.size
            for q in range(shm.size):
                if q == root:
                    ctx.copy(recvbuf[q * c:(q + 1) * c], sendbuf)
                else:
                    recvbuf[q * c:(q + 1) * c] = ctx.read_box(box, q, k, 0, sendbuf.nbytes,
                                                              recvbuf.dtype)
        return
    try:
        shm, peers = _begin(ctx, [sendbuf], same={0: "sendbuf"})
    except TooBig:
        return _p2p("gather", "binomial", ctx, sendbuf, recvbuf, root)
    c = sendbuf.size
    if shm.rank == root:
        for q in range(shm.size):
            if q == root:
                ctx.copy(recvbuf[q * c:(q + 1) * c], sendbuf)
            else:
                ctx.read_from(peers, q, 0, 0, c, recvbuf[q * c:(q + 1) * c])
    peers.barrier()


@register("scatter", "shm")
@_shm(Reads(lambda n, r, k, root, counts: 0 if r == root else k,
             "b on every rank but the root"))
def scatter_shm(ctx, sendbuf, recvbuf, root):
    """Every rank copies its block straight from the root's buffer.

    Cost: 2α_s + nβ_r on every rank but the root (small calls: α_s + Nnβ on the
    root).
    """
    if _small(recvbuf.nbytes * ctx.size):
        shm, box, k = _post(ctx, sendbuf if ctx.rank == root else None, recvbuf.nbytes,
                            "recvbuf")
        nb, r = recvbuf.nbytes, shm.rank
        if r == root:
            ctx.copy(recvbuf, sendbuf[r * recvbuf.size:(r + 1) * recvbuf.size])
        else:
            recvbuf[...] = ctx.read_box(box, root, k, r * nb, (r + 1) * nb, recvbuf.dtype)
        return
    try:
        shm, peers = _begin(ctx, [sendbuf, recvbuf], same={1: "recvbuf"}, unread=(1,))
    except TooBig:
        return _p2p("scatter", "binomial", ctx, sendbuf, recvbuf, root)
    c, r = recvbuf.size, shm.rank
    if r == root:
        ctx.copy(recvbuf, sendbuf[r * c:(r + 1) * c])
    else:
        ctx.read_from(peers, root, 0, r * c, (r + 1) * c, recvbuf)
    peers.barrier()


@register("allgather", "shm")
@_shm(Reads(lambda n, r, k, root, counts: (n - 1) * k, "(N-1)·b"))
def allgather_shm(ctx, sendbuf, recvbuf):
    """Every rank copies every peer's block straight from its memory.

    Cost: 2α_s + (N-1)nβ_r (with a node-shared ``recvbuf``: each rank writes its own
    block, nβ, and nothing is read). Small calls: α_s + nβ + (N-1)nβ_r.
    """
    if _small(sendbuf.nbytes) and not _in_node_shared(recvbuf):
        shm, box, k = _post(ctx, sendbuf, sendbuf.nbytes, "sendbuf")
        c = sendbuf.size
        for q in range(shm.size):
            recvbuf[q * c:(q + 1) * c] = (sendbuf if q == shm.rank else ctx.read_box(
                box, q, k, 0, sendbuf.nbytes, recvbuf.dtype))
        return
    try:
        shm, peers = _begin(ctx, [sendbuf, recvbuf], same={0: "sendbuf", 1: "recvbuf"})
    except TooBig:
        return _p2p("allgather", "ring", ctx, sendbuf, recvbuf)
    c, r = sendbuf.size, shm.rank
    ctx.copy(recvbuf[r * c:(r + 1) * c], sendbuf)
    if not _node_shared(peers, 1):
        for q in range(shm.size):
            if q != r:
                ctx.read_from(peers, q, 0, 0, c, recvbuf[q * c:(q + 1) * c])
    peers.barrier()


@register("alltoall", "shm")
@_shm(Reads(lambda n, r, k, root, counts: (n - 1) * k, "(N-1)·b"))
def alltoall_shm(ctx, sendbuf, recvbuf):
    """Every rank copies its block from every peer's buffer straight from its memory.

    Cost: 2α_s + (N-1)nβ_r (n: one block); small calls α_s + Nnβ + (N-1)nβ_r.
    """
    if _small(sendbuf.nbytes):
        shm, box, k = _post(ctx, sendbuf, sendbuf.nbytes, "sendbuf")
        n, r = shm.size, shm.rank
        c = sendbuf.size // n
        nb = c * sendbuf.itemsize
        for q in range(n):
            recvbuf[q * c:(q + 1) * c] = (sendbuf[r * c:(r + 1) * c] if q == r else
                                          ctx.read_box(box, q, k, r * nb, (r + 1) * nb,
                                                       recvbuf.dtype))
        return
    try:
        shm, peers = _begin(ctx, [sendbuf], same={0: "sendbuf"})
    except TooBig:
        return _p2p("alltoall", "pairwise", ctx, sendbuf, recvbuf)
    n, r = shm.size, shm.rank
    c = sendbuf.size // n
    ctx.copy(recvbuf[r * c:(r + 1) * c], sendbuf[r * c:(r + 1) * c])
    for q in range(n):
        if q != r:
            ctx.read_from(peers, q, 0, r * c, (r + 1) * c, recvbuf[q * c:(q + 1) * c])
    peers.barrier()


@register("barrier", "shm")
@_shm(Reads(lambda n, r, k, root, counts: 0, "nothing"))
def barrier_shm(ctx):
    """The node's barrier (its ranks are the communicator's).

    Cost: α_s.
    """
    node_memory = getattr(ctx, "node_memory", None)
    if node_memory is None:
        raise NotSchedulable("the shm algorithms have no plan")
    node_memory().node.Barrier()
