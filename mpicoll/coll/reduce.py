"""Reduce: the element-wise reduction of every rank's ``sendbuf`` lands on ``root``.

It lands in ``recvbuf`` there (other ranks' ``recvbuf`` is None and untouched).

Per rank, N = 3, op = SUM, root = 0::

    sendbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]
    recvbuf: rank 0 [6 6]   (ranks 1, 2: nothing)

Costs: α per message, β per byte, γ per byte reduced, n bytes per rank.
Algorithms never write ``sendbuf`` and read it before writing ``recvbuf``
(the in-place layer passes a copy when they alias).
"""
from ..core.blocks import fold_rank, offsets, pof2_below, split, unfold_rank
from ..core.registry import register
from .cost import Cost, lg
from .links import Split
from .textbook import F, Textbook, always, rabenseifner_root


@register("reduce", "native")
def reduce_native(ctx, sendbuf, recvbuf, op, root):
    """The MPI library's own ``MPI_Reduce``."""
    ctx.mpi.Reduce(sendbuf, recvbuf, op, root)


@register("reduce", "linear", cost=Cost(
    "(N-1)(α + nβ + nγ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    gamma=lambda k: (k.N - 1) * k.n, links=lambda N, K, n: Split().linear(N, K, n)),
    textbook=Textbook("(N-1)K", "root", "recv",
                      lambda n, k: F((n - 1) * k), always))
def reduce_linear(ctx, sendbuf, recvbuf, op, root):
    """Every rank sends to the root, which combines in descending rank order.

    Cost: (N-1)(α + nβ + nγ) at the root; N-1 sequential steps.
    Keeps rank order, so any op (non-commutative included) works.
    """
    size, rank = ctx.size, ctx.rank
    if rank != root:
        ctx.send(sendbuf, root)
        return
    acc, tmp = recvbuf, ctx.scratch(sendbuf.size)
    # acc = r_{N-1}; then acc = r_i (op) acc for i = N-2 .. 0: rank order, no copies.
    if root == size - 1:
        ctx.copy(acc, sendbuf)
    else:
        ctx.recv(acc, size - 1)
    for i in range(size - 2, -1, -1):
        if i == root:
            lower = sendbuf
        else:
            ctx.recv(tmp, i)
            lower = tmp
        ctx.reduce(lower, acc, acc)      # acc is both out and higher: any op writes it


def binomial_reduce(ctx, sendbuf, recvbuf, op, root):
    """Binomial-tree reduce (shared with composite algorithms)."""
    size, rank = ctx.size, ctx.rank
    commutative = op.is_commutative
    # A non-commutative op is reduced on a tree rooted at rank 0, where each
    # subtree covers a contiguous rank range; the result is then forwarded.
    tree_root = root if commutative else 0
    rel = (rank - tree_root) % size
    acc = sendbuf          # read-only until we first receive
    spare = None
    mask = 1
    while mask < size:
        if rel & mask:
            ctx.send(acc, (rel - mask + tree_root) % size)
            acc = None
            break
        child = rel + mask
        if child < size:
            if spare is None:
                # Work buffers: the root reduces straight into recvbuf.
                work = recvbuf if rank == root else ctx.scratch(sendbuf.size)
                ctx.copy(work, sendbuf)
                acc, spare = work, ctx.scratch(sendbuf.size)
            ctx.recv(spare, (child + tree_root) % size)
            res = ctx.reduce(acc, spare, acc)   # acc holds lower ranks
            if res is spare:
                acc, spare = spare, acc
        mask <<= 1
    if tree_root != root:
        if rank == tree_root:
            ctx.send(acc, root)
        elif rank == root:
            ctx.recv(recvbuf, tree_root)
            return
    if rank == root:
        ctx.copy(recvbuf, acc)


def _forwarded(k):
    """1 when a non-commutative reduction is forwarded from rank 0 to the root."""
    return 1 if k.root != 0 and not k.commutative else 0


@register("reduce", "binomial", cost=Cost(
    "⌈log2 N⌉(α + nβ + nγ), plus α + nβ when root ≠ 0 and the op does not commute",
    alpha=lambda k: lg(k.N) + _forwarded(k), beta=lambda k: (lg(k.N) + _forwarded(k)) * k.n,
    gamma=lambda k: lg(k.N) * k.n, links=lambda N, K, n: Split().tree(N, K, lambda d: n)),
    textbook=Textbook("(N-1)K", "total", "sent",
                      lambda n, k: F((n - 1) * k), always))
def reduce_binomial(ctx, sendbuf, recvbuf, op, root):
    """Binomial tree: in step k, rank r receives from r + 2^k and combines.

    Cost: ⌈log2 N⌉(α + nβ + nγ), plus α + nβ when root ≠ 0 and the op does not
    commute; ⌈log2 N⌉ steps. Best for short messages. Non-commutative ops are
    reduced on a tree rooted at rank 0 (rank order kept) and forwarded to the root.
    """
    binomial_reduce(ctx, sendbuf, recvbuf, op, root)


def halving_reduce_scatter(ctx, work, spare, op, off, v, pof2, rem):
    """Recursive halving among the pof2 active ranks (virtual rank ``v``).

    ``work`` holds this rank's partial vector, split into pof2 chunks by
    ``off``; afterwards chunk ``v`` of ``work`` is fully reduced.
    Commutative ops only (halves are combined as they arrive).
    """
    lo, hi = 0, pof2
    mask = pof2 >> 1
    while mask:
        mid = lo + mask
        partner = v ^ mask
        if v < mid:
            keep, give = (lo, mid), (mid, hi)
        else:
            keep, give = (mid, hi), (lo, mid)
        kbuf = work[off[keep[0]]:off[keep[1]]]
        rbuf = spare[:kbuf.size]
        peer = unfold_rank(partner, rem)
        ctx.sendrecv(work[off[give[0]]:off[give[1]]], peer, rbuf, peer)
        ctx.reduce(rbuf, kbuf, kbuf)      # commutative: the result stays in work
        lo, hi = keep
        mask >>= 1


def _rab_exact(k):
    p = pof2_below(k.N)
    if k.n % p:
        return f"uneven chunks ({k.n} elements in {p})"
    return None


def _root_folded(k):
    """1 when the root is a folded-out (even) rank of a non-power-of-two N."""
    return 1 if fold_rank(k.root, k.N - pof2_below(k.N)) < 0 else 0


@register("reduce", "rabenseifner", commutative_only=True, cost=Cost(
    "2⌈log2 p⌉α + 2(p-1)/p·nβ + (p-1)/p·nγ, plus α + nβ + nγ when N ≠ p, plus α + nβ "
    "when the root is folded", where={"root_folded": _root_folded},
    alpha=lambda k: 2 * lg(k.p) + k.fold + _root_folded(k),
    beta=lambda k: 2 * (k.p - 1) * k.n / k.p + (k.fold + _root_folded(k)) * k.n,
    gamma=lambda k: (k.p - 1) * k.n / k.p + k.fold * k.n, exact=_rab_exact,
    load_exact=lambda k: None if k.fold == 0 or k.root < 2 * (k.N - k.p) else
    "the critical path crosses from the folding ranks to the root's",
    links=lambda N, K, n: Split().fold(N, K, n)
    .xor(N, K, lambda d: d * n / pof2_below(N)).vtree(N, K, lambda d: d * n / pof2_below(N))),
    textbook=Textbook("(p-1)K/p", "root", "sent",
                      lambda n, k: F((pof2_below(n) - 1) * k, pof2_below(n)),
                      rabenseifner_root))
def reduce_rabenseifner(ctx, sendbuf, recvbuf, op, root):
    """Rabenseifner: recursive-halving reduce-scatter, then a binomial gather.

    Cost: 2⌈log2 p⌉α + 2(p-1)/p·nβ + (p-1)/p·nγ, plus α + nβ + nγ when N ≠ p,
    plus α + nβ when the root is folded; p = 2^⌊log2 N⌋. For N != p the first
    2(N-p) ranks fold pairwise; the root is folded when it is one of their
    even ranks (it gets the result from its partner). Best for long messages.
    Commutative ops only; counts below p leave chunks empty (correct, but the
    binomial tree is then faster).
    """
    size, rank = ctx.size, ctx.rank
    pof2 = pof2_below(size)
    rem = size - pof2
    v = fold_rank(rank, rem)
    if v < 0:                      # folded out: hand my data to rank + 1
        ctx.send(sendbuf, rank + 1)
        if rank == root:
            ctx.recv(recvbuf, rank + 1)
        return
    work = recvbuf if rank == root else ctx.scratch(sendbuf.size)
    ctx.copy(work, sendbuf)
    spare = ctx.scratch(sendbuf.size)
    if rank < 2 * rem:             # absorb the folded neighbour (rank - 1 < rank)
        ctx.recv(spare, rank - 1)
        ctx.reduce(spare, work, work)
    off = offsets(split(sendbuf.size, pof2))
    halving_reduce_scatter(ctx, work, spare, op, off, v, pof2, rem)

    # Binomial gather on ranks relabelled by XOR with the root's virtual rank:
    # every subtree then holds an aligned, contiguous block of chunks.
    vroot = fold_rank(root, rem)
    if vroot < 0:
        vroot = fold_rank(root + 1, rem)
    mask = 1
    while mask < pof2:
        base = v & ~(mask - 1)
        if (v ^ vroot) & mask:
            ctx.send(work[off[base]:off[base + mask]], unfold_rank(v ^ mask, rem))
            break
        pbase = (v ^ mask) & ~(mask - 1)
        ctx.recv(work[off[pbase]:off[pbase + mask]], unfold_rank(v ^ mask, rem))
        mask <<= 1
    if v == vroot and rank != root:
        ctx.send(work, root)
