"""Exact message schedules of the hand-written algorithms, for the demo's traffic table.

Each algorithm gets a small function that lists the messages it sends,
``(source, destination, elements)``, derived from the structure of its code
in :mod:`mpicoll.coll` (chunk sizes from :func:`split`, binomial trees with
any root, non-power-of-two folding); and a textbook formula stating, for
the even case, what some rank (or all ranks together) sends or receives.
The demo compares the measured counters with the exact schedule (they must
be equal) and the exact schedule with the textbook formula where it applies.

Sizes: ``k`` is the length of each rank's vector (bcast, reduce, allreduce,
reduce_scatter) or of the full N-block vector (gather, allgather, scatter,
alltoall, whose blocks have ``k // n`` elements).
"""
from fractions import Fraction

from .coll._common import first_rank, fold_rank, offsets, pof2_below, split, unfold_rank
from .coll.bcast import PIPELINE_SEGMENT_BYTES

__all__ = ["SCHEDULES", "Schedule", "per_rank", "check_textbook", "block_primitive", "chunks_text"]

#: Primitives whose buffers are N blocks; the table gives each block ``k // n`` elements.
BLOCK_PRIMITIVES = ("gather", "allgather", "scatter", "alltoall")


def block_primitive(primitive):
    """True for primitives whose vector is N blocks (one per rank)."""
    return primitive in BLOCK_PRIMITIVES


def _lowbit(x):
    return x & -x


def ceil_log2(n):
    """⌈log2 n⌉ for n >= 1 (0 for n = 1)."""
    return (n - 1).bit_length()


def _is_pof2(n):
    return n & (n - 1) == 0


def _children(rel, n):
    """Children of relative rank ``rel`` in the binomial tree the coll modules use: (child, mask)."""
    limit = _lowbit(rel) if rel else n
    out, mask = [], 1
    while mask < limit:
        if rel + mask < n:
            out.append((rel + mask, mask))
        mask <<= 1
    return out


def _subtree(rel, n):
    """Ranks in the binomial subtree of relative rank ``rel`` (itself included)."""
    return n if rel == 0 else min(_lowbit(rel), n - rel)


def _tree_bcast(n, root, elems):
    return [((rel + root) % n, (c + root) % n, elems) for rel in range(n) for c, _ in _children(rel, n)]


def _tree_reduce(n, root, elems):
    return [((rel + root) % n, (rel - _lowbit(rel) + root) % n, elems) for rel in range(1, n)]


# -- bcast ------------------------------------------------------------------

def bcast_linear(n, k, root, itemsize):
    """The root sends the whole vector to every other rank."""
    return [(root, r, k) for r in range(n) if r != root]


def bcast_binomial(n, k, root, itemsize):
    """Every tree edge carries the whole vector once."""
    return _tree_bcast(n, root, k)


def bcast_scatter_allgather(n, k, root, itemsize):
    """Binomial scatter of the root's N chunks (subtree spans), then a ring allgather of them."""
    c = split(k, n)                         # chunk j belongs to relative rank j
    msgs = []
    for rel in range(n):
        for child, mask in _children(rel, n):
            msgs.append(((rel + root) % n, (child + root) % n, sum(c[child:min(child + mask, n)])))
    for rel in range(n):
        for s in range(n - 1):
            rank = (rel + root) % n
            msgs.append((rank, (rank + 1) % n, c[(rel - s) % n]))
    return msgs


def bcast_pipeline(n, k, root, itemsize):
    """Every rank but the chain's last forwards each 64 KiB segment to the next."""
    if n == 1:
        return []
    seg = max(1, PIPELINE_SEGMENT_BYTES // max(1, itemsize))
    sizes = [min(seg, k - a) for a in range(0, k, seg)] or [0]
    return [((rel + root) % n, (rel + 1 + root) % n, s) for rel in range(n - 1) for s in sizes]


# -- reduce -----------------------------------------------------------------

def reduce_linear(n, k, root, itemsize):
    """Every rank but the root sends its vector to the root."""
    return [(r, root, k) for r in range(n) if r != root]


def reduce_binomial(n, k, root, itemsize):
    """Every rank but the root sends its partial sum to its tree parent once."""
    return _tree_reduce(n, root, k)      # SUM is commutative: the tree is rooted at root


def _halving(v, p, off, rem, rank):
    """Messages of the recursive-halving reduce-scatter of virtual rank ``v``."""
    msgs, lo, hi, mask = [], 0, p, p >> 1
    while mask:
        mid = lo + mask
        keep, give = ((lo, mid), (mid, hi)) if v < mid else ((mid, hi), (lo, mid))
        msgs.append((rank, unfold_rank(v ^ mask, rem), off[give[1]] - off[give[0]]))
        lo, hi = keep
        mask >>= 1
    return msgs


def reduce_rabenseifner(n, k, root, itemsize):
    """Fold to p = 2^floor(log2 N) ranks, recursive halving, then a binomial gather of chunks."""
    p = pof2_below(n)
    rem = n - p
    off = offsets(split(k, p))
    vroot = fold_rank(root, rem)
    if vroot < 0:
        vroot = fold_rank(root + 1, rem)
    msgs = []
    for rank in range(n):
        v = fold_rank(rank, rem)
        if v < 0:
            msgs.append((rank, rank + 1, k))
            continue
        msgs += _halving(v, p, off, rem, rank)
        mask = 1
        while mask < p:
            if (v ^ vroot) & mask:
                base = v & ~(mask - 1)
                msgs.append((rank, unfold_rank(v ^ mask, rem), off[base + mask] - off[base]))
                break
            mask <<= 1
        if v == vroot and rank != root:
            msgs.append((rank, root, k))
    return msgs


# -- allreduce --------------------------------------------------------------

def allreduce_reduce_bcast(n, k, root, itemsize):
    """Binomial reduce to rank 0, then binomial bcast of the whole vector."""
    return _tree_reduce(n, 0, k) + _tree_bcast(n, 0, k)


def _fold(n, k):
    """Non-power-of-two folding: the even ranks < 2·rem hand in their vector and get it back."""
    rem = n - pof2_below(n)
    return ([(r, r + 1, k) for r in range(0, 2 * rem, 2)]
            + [(r, r - 1, k) for r in range(1, 2 * rem, 2)])


def allreduce_recursive_doubling(n, k, root, itemsize):
    """log2 p whole-vector exchanges among p ranks, plus folding in and out."""
    p = pof2_below(n)
    rem = n - p
    msgs = _fold(n, k)
    for rank in range(n):
        v = fold_rank(rank, rem)
        if v < 0:
            continue
        mask = 1
        while mask < p:
            msgs.append((rank, unfold_rank(v ^ mask, rem), k))
            mask <<= 1
    return msgs


def allreduce_ring(n, k, root, itemsize):
    """2(N-1) steps, one chunk each to the right neighbour."""
    c = split(k, n)
    msgs = []
    for r in range(n):
        for s in range(n - 1):                      # reduce-scatter: chunk r - s
            msgs.append((r, (r + 1) % n, c[(r - s) % n]))
        for s in range(n - 1):                      # allgather: chunk r + 1 - s
            msgs.append((r, (r + 1) % n, c[(r + 1 - s) % n]))
    return msgs


def allreduce_rabenseifner(n, k, root, itemsize):
    """Folding, recursive-halving reduce-scatter, recursive-doubling allgather."""
    p = pof2_below(n)
    rem = n - p
    off = offsets(split(k, p))
    msgs = _fold(n, k)
    for rank in range(n):
        v = fold_rank(rank, rem)
        if v < 0:
            continue
        msgs += _halving(v, p, off, rem, rank)
        mask = 1
        while mask < p:
            base = v & ~(mask - 1)
            msgs.append((rank, unfold_rank(v ^ mask, rem), off[base + mask] - off[base]))
            mask <<= 1
    return msgs


# -- gather / scatter / allgather -------------------------------------------

def gather_linear(n, k, root, itemsize):
    """Every rank but the root sends its block to the root."""
    return [(r, root, k // n) for r in range(n) if r != root]


def gather_binomial(n, k, root, itemsize):
    """Every rank but the root sends its subtree's blocks to its parent."""
    b = k // n
    return [((rel + root) % n, (rel - _lowbit(rel) + root) % n, _subtree(rel, n) * b)
            for rel in range(1, n)]


def scatter_linear(n, k, root, itemsize):
    """The root sends each other rank its block."""
    return [(root, r, k // n) for r in range(n) if r != root]


def scatter_binomial(n, k, root, itemsize):
    """Every parent sends each child the blocks of the child's subtree."""
    b = k // n
    return [((rel - _lowbit(rel) + root) % n, (rel + root) % n, _subtree(rel, n) * b)
            for rel in range(1, n)]


def allgather_ring(n, k, root, itemsize):
    """N-1 steps of one block to the right neighbour."""
    return [(r, (r + 1) % n, k // n) for r in range(n) for _ in range(n - 1)]


def allgather_recursive_doubling(n, k, root, itemsize):
    """Fold, swap doubling spans of blocks, unfold with the whole result."""
    b = k // n
    p = pof2_below(n)
    rem = n - p
    msgs = [(r, r + 1, b) for r in range(0, 2 * rem, 2)]
    for rank in range(n):
        v = fold_rank(rank, rem)
        if v < 0:
            continue
        mask = 1
        while mask < p:
            base = v & ~(mask - 1)
            blocks = first_rank(base + mask, rem) - first_rank(base, rem)
            msgs.append((rank, unfold_rank(v ^ mask, rem), blocks * b))
            mask <<= 1
    return msgs + [(r, r - 1, n * b) for r in range(1, 2 * rem, 2)]


def allgather_bruck(n, k, root, itemsize):
    """Step 2^j sends min(2^j, N-2^j) blocks to rank - 2^j."""
    b = k // n
    msgs = []
    for r in range(n):
        step = 1
        while step < n:
            msgs.append((r, (r - step) % n, min(step, n - step) * b))
            step <<= 1
    return msgs


def allgather_gather_bcast(n, k, root, itemsize):
    """Binomial gather of the blocks to rank 0, then binomial bcast of all N."""
    b = k // n
    return gather_binomial(n, k, 0, itemsize) + _tree_bcast(n, 0, n * b)


# -- reduce_scatter (recvcounts = split(k, n)) ------------------------------

def reduce_scatter_ring(n, k, root, itemsize):
    """N-1 steps of one block's partial sum to the right neighbour."""
    c = split(k, n)
    if n == 1:
        return []
    return [(r, (r + 1) % n, c[(r - s - 1) % n]) for r in range(n) for s in range(n - 1)]


def reduce_scatter_recursive_halving(n, k, root, itemsize):
    """Fold, halve the live block range log2 p times, return the folded ranks' blocks."""
    c = split(k, n)
    off = offsets(c)
    p = pof2_below(n)
    rem = n - p
    msgs = []
    for rank in range(n):
        v = fold_rank(rank, rem)
        if v < 0:
            msgs.append((rank, rank + 1, k))
            continue
        lo, hi, mask = 0, p, p >> 1
        while mask:
            mid = lo + mask
            keep, give = ((lo, mid), (mid, hi)) if v < mid else ((mid, hi), (lo, mid))
            size = off[first_rank(give[1], rem)] - off[first_rank(give[0], rem)]
            msgs.append((rank, unfold_rank(v ^ mask, rem), size))
            lo, hi = keep
            mask >>= 1
        if rank < 2 * rem:
            msgs.append((rank, rank - 1, c[rank - 1]))
    return msgs


def reduce_scatter_pairwise(n, k, root, itemsize):
    """Every rank sends block j straight to rank j."""
    c = split(k, n)
    return [(r, (r + i) % n, c[(r + i) % n]) for r in range(n) for i in range(1, n)]


def reduce_scatter_reduce_scatterv(n, k, root, itemsize):
    """Binomial reduce of the whole vector to rank 0, then its blocks out."""
    c = split(k, n)
    return _tree_reduce(n, 0, k) + [(0, i, c[i]) for i in range(1, n)]


# -- alltoall ---------------------------------------------------------------

def alltoall_pairwise(n, k, root, itemsize):
    """Every rank sends block j straight to rank j."""
    return [(r, (r + i) % n, k // n) for r in range(n) for i in range(1, n)]


def alltoall_bruck(n, k, root, itemsize):
    """Step 2^j forwards every block whose index has bit j set."""
    b = k // n
    if n == 1:
        return []
    msgs = []
    for r in range(n):
        step = 1
        while step < n:
            blocks = sum(1 for i in range(n) if i & step)
            msgs.append((r, (r + step) % n, blocks * b))
            step <<= 1
    return msgs


# -- barrier (empty messages) -----------------------------------------------

def barrier_linear(n, k, root, itemsize):
    """Everyone signals rank 0, which releases everyone."""
    return [(r, 0, 0) for r in range(1, n)] + [(0, r, 0) for r in range(1, n)]


def barrier_binomial(n, k, root, itemsize):
    """Empty messages up a binomial tree to rank 0 and back down."""
    return _tree_reduce(n, 0, 0) + _tree_bcast(n, 0, 0)


def barrier_dissemination(n, k, root, itemsize):
    """Round j: signal rank + 2^j."""
    msgs = []
    for r in range(n):
        step = 1
        while step < n:
            msgs.append((r, (r + step) % n, 0))
            step <<= 1
    return msgs


# -- textbook formulas ------------------------------------------------------

class Schedule:
    """One algorithm's exact schedule and its textbook claim.

    ``who``: ``each`` (every rank), ``root``, ``rank0`` or ``total`` (all
    ranks together); ``what``: ``sent``/``recv`` elements or ``msgs`` sent.
    ``applies(n, k, root)`` returns ``"exact"`` when the formula is exactly
    what the schedule gives, ``"mean"`` when it is the exact mean over the
    ranks (uneven chunks), or a string saying why it does not apply.
    """

    __slots__ = ("primitive", "algorithm", "messages", "text", "who", "what", "value", "applies")

    def __init__(self, primitive, algorithm, messages, text, who, what, value, applies):
        self.primitive, self.algorithm, self.messages = primitive, algorithm, messages
        self.text, self.who, self.what, self.value, self.applies = text, who, what, value, applies


def _always(n, k, root):
    return "exact"


def _even(n, k, root):
    return "exact" if k % n == 0 else f"uneven chunks: {chunks_text(k, n)}"


def _even_or_mean(n, k, root):
    return "exact" if k % n == 0 else "mean"


def _pof2(n, k, root):
    return "exact" if _is_pof2(n) else "N is not a power of 2"


def _pof2_even_or_mean(n, k, root):
    if not _is_pof2(n):
        return "N is not a power of 2"
    return "exact" if k % n == 0 else "mean"


def _rabenseifner_root(n, k, root):
    p = pof2_below(n)
    if fold_rank(root, n - p) < 0:
        return "the root is folded out"
    return "exact" if k % p == 0 else f"uneven chunks: {chunks_text(k, p)}"


def chunks_text(k, n):
    """``split(k, n)`` in words: "1 of 2, 3 of 1" (the first k % n chunks one larger)."""
    q, r = divmod(k, n)
    return f"{r} of {q + 1}, {n - r} of {q}" if r else f"{n} of {q}"


F = Fraction
_P2 = pof2_below

SCHEDULES = {s.primitive + "/" + s.algorithm: s for s in [
    Schedule("bcast", "linear", bcast_linear, "(N-1)K", "root", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Schedule("bcast", "binomial", bcast_binomial, "ceil(log2 N)K", "root", "sent",
             lambda n, k: F(ceil_log2(n) * k), _always),
    Schedule("bcast", "scatter_allgather", bcast_scatter_allgather, "2(N-1)K/N", "root", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _even),
    Schedule("bcast", "pipeline", bcast_pipeline, "(N-1)K", "total", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Schedule("reduce", "linear", reduce_linear, "(N-1)K", "root", "recv",
             lambda n, k: F((n - 1) * k), _always),
    Schedule("reduce", "binomial", reduce_binomial, "(N-1)K", "total", "sent",
             lambda n, k: F((n - 1) * k), _always),
    Schedule("reduce", "rabenseifner", reduce_rabenseifner, "(p-1)K/p",
             "root", "sent", lambda n, k: F((_P2(n) - 1) * k, _P2(n)), _rabenseifner_root),
    Schedule("allreduce", "reduce_bcast", allreduce_reduce_bcast, "2(N-1)K", "total", "sent",
             lambda n, k: F(2 * (n - 1) * k), _always),
    Schedule("allreduce", "recursive_doubling", allreduce_recursive_doubling, "K log2 N", "each",
             "sent", lambda n, k: F(k * ceil_log2(n)), _pof2),
    Schedule("allreduce", "ring", allreduce_ring, "2(N-1)K/N", "each", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _even_or_mean),
    Schedule("allreduce", "rabenseifner", allreduce_rabenseifner, "2(N-1)K/N", "each", "sent",
             lambda n, k: F(2 * (n - 1) * k, n), _pof2_even_or_mean),
    Schedule("gather", "linear", gather_linear, "(N-1)K/N", "root", "recv",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("gather", "binomial", gather_binomial, "(N-1)K/N", "root", "recv",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("allgather", "ring", allgather_ring, "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("allgather", "recursive_doubling", allgather_recursive_doubling, "(N-1)K/N", "each",
             "sent", lambda n, k: F((n - 1) * k, n), _pof2),
    Schedule("allgather", "bruck", allgather_bruck, "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("allgather", "gather_bcast", allgather_gather_bcast, "ceil(log2 N)K", "rank0", "sent",
             lambda n, k: F(ceil_log2(n) * k), _always),
    Schedule("scatter", "linear", scatter_linear, "(N-1)K/N", "root", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("scatter", "binomial", scatter_binomial, "(N-1)K/N", "root", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("reduce_scatter", "ring", reduce_scatter_ring, "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _even_or_mean),
    Schedule("reduce_scatter", "recursive_halving", reduce_scatter_recursive_halving, "(N-1)K/N",
             "each", "sent", lambda n, k: F((n - 1) * k, n), _pof2_even_or_mean),
    Schedule("reduce_scatter", "pairwise", reduce_scatter_pairwise, "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _even_or_mean),
    Schedule("reduce_scatter", "reduce_scatterv", reduce_scatter_reduce_scatterv,
             "(N-1)K + (N-1)K/N", "total", "sent", lambda n, k: F((n - 1) * k) + F((n - 1) * k, n),
             _even),
    Schedule("alltoall", "pairwise", alltoall_pairwise, "(N-1)K/N", "each", "sent",
             lambda n, k: F((n - 1) * k, n), _always),
    Schedule("alltoall", "bruck", alltoall_bruck, "(K/2) log2 N", "each", "sent",
             lambda n, k: F(k * ceil_log2(n), 2), _pof2),
    Schedule("barrier", "linear", barrier_linear, "N-1", "rank0", "msgs",
             lambda n, k: F(n - 1), _always),
    Schedule("barrier", "binomial", barrier_binomial, "2(N-1)", "total", "msgs",
             lambda n, k: F(2 * (n - 1)), _always),
    Schedule("barrier", "dissemination", barrier_dissemination, "ceil(log2 N)", "each", "msgs",
             lambda n, k: F(ceil_log2(n)), _always),
]}


def per_rank(messages, n):
    """Per-rank totals of a message list: dict of lists sent/recv (elements) and sent_msgs/recv_msgs."""
    out = {key: [0] * n for key in ("sent", "recv", "sent_msgs", "recv_msgs")}
    for src, dst, elems in messages:
        out["sent"][src] += elems
        out["sent_msgs"][src] += 1
        out["recv"][dst] += elems
        out["recv_msgs"][dst] += 1
    return out


def check_textbook(sched, counts, n, k, root):
    """Compare the exact per-rank counts with the textbook formula.

    Returns ``(applies, ok)``: how the formula applies ("exact", "mean" or
    the reason it does not) and whether the exact counts agree (None when
    it does not apply).
    """
    applies = sched.applies(n, k, root)
    values = counts["sent_msgs" if sched.what == "msgs" else sched.what]
    want = sched.value(n, k)
    if applies not in ("exact", "mean"):
        return applies, None
    if sched.who == "total":
        return applies, sum(values) == want
    if sched.who in ("root", "rank0"):
        return applies, values[root if sched.who == "root" else 0] == want
    if applies == "mean":
        return applies, F(sum(values), n) == want
    return applies, all(v == want for v in values)
