"""Message schedules of the built-in algorithms, derived by hand from their code's structure.

An independent check of the plans the algorithms record (tests/test_plans_by_hand.py):
each function lists the messages ``(source, destination, elements)`` one
call sends, from the structure of the algorithm in :mod:`mpicoll.coll`
(chunk sizes from ``split``, binomial trees with any root, non-power-of-two
folding). They were the demo's "exact" column before the demo read the plans.

Sizes: ``k`` is the length of each rank's vector (bcast, reduce, allreduce,
reduce_scatter) or of the full N-block vector (gather, allgather, scatter,
alltoall, whose blocks have ``k // n`` elements).
"""
from mpicoll.coll.bcast import PIPELINE_SEGMENT_BYTES
from mpicoll.core.blocks import first_rank, fold_rank, offsets, pof2_below, split, unfold_rank


def _lowbit(x):
    return x & -x


def _children(rel, n):
    """Children of relative rank ``rel`` in the coll modules' binomial tree: (child, mask)."""
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
    return [((rel + root) % n, (c + root) % n, elems)
            for rel in range(n) for c, _ in _children(rel, n)]


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


#: ``"primitive/algorithm"`` -> its schedule ``(n, k, root, itemsize) -> [(src, dst, elements)]``.
HAND = {
    "bcast/linear": bcast_linear,
    "bcast/binomial": bcast_binomial,
    "bcast/scatter_allgather": bcast_scatter_allgather,
    "bcast/pipeline": bcast_pipeline,
    "reduce/linear": reduce_linear,
    "reduce/binomial": reduce_binomial,
    "reduce/rabenseifner": reduce_rabenseifner,
    "allreduce/reduce_bcast": allreduce_reduce_bcast,
    "allreduce/recursive_doubling": allreduce_recursive_doubling,
    "allreduce/ring": allreduce_ring,
    "allreduce/rabenseifner": allreduce_rabenseifner,
    "gather/linear": gather_linear,
    "gather/binomial": gather_binomial,
    "scatter/linear": scatter_linear,
    "scatter/binomial": scatter_binomial,
    "allgather/ring": allgather_ring,
    "allgather/recursive_doubling": allgather_recursive_doubling,
    "allgather/bruck": allgather_bruck,
    "allgather/gather_bcast": allgather_gather_bcast,
    "reduce_scatter/ring": reduce_scatter_ring,
    "reduce_scatter/recursive_halving": reduce_scatter_recursive_halving,
    "reduce_scatter/pairwise": reduce_scatter_pairwise,
    "reduce_scatter/reduce_scatterv": reduce_scatter_reduce_scatterv,
    "alltoall/pairwise": alltoall_pairwise,
    "alltoall/bruck": alltoall_bruck,
    "barrier/linear": barrier_linear,
    "barrier/binomial": barrier_binomial,
    "barrier/dissemination": barrier_dissemination,
}


def per_rank(messages, n):
    """Per-rank totals of a message list: lists sent/recv (elements) and sent_msgs/recv_msgs."""
    out = {key: [0] * n for key in ("sent", "recv", "sent_msgs", "recv_msgs")}
    for src, dst, elems in messages:
        out["sent"][src] += elems
        out["sent_msgs"][src] += 1
        out["recv"][dst] += elems
        out["recv_msgs"][dst] += 1
    return out
