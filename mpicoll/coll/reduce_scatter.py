"""Reduce-scatter: reduce all ranks' vectors, rank i keeps block i of the result.

Blocks have ``counts[i]`` elements (equal for ``reduce_scatter_block``).
Per rank, N = 3, op = SUM, counts = [1, 1, 1]::

    sendbuf: rank 0 [1 2 3]   rank 1 [10 20 30]   rank 2 [100 200 300]
    recvbuf: rank 0 [111]     rank 1 [222]        rank 2 [333]

Algorithms take ``(ctx, sendbuf, recvbuf, counts, op)``; ``sendbuf`` has
sum(counts) elements and is never written, ``recvbuf`` has counts[rank].
Costs: α per message, β per byte, γ per byte reduced, n bytes in total.
"""
from ..core.blocks import first_rank, fold_rank, offsets, pof2_below, unfold_rank
from ..core.registry import register
from .cost import Cost, lg, pof2
from .links import Split
from .reduce import binomial_reduce
from .textbook import F, Textbook, even_chunks, even_or_mean, pof2_even_or_mean


def _equal(k):
    """``exact`` for equal blocks (reduce_scatter_block with N dividing n)."""
    if len(set(k.counts)) > 1:
        return f"unequal blocks {k.counts[:4]}{'...' if len(k.counts) > 4 else ''}"
    return None


def _equal_pow2(k):
    if k.N != pof2(k.N):
        return f"N = {k.N} is not a power of two (the halving steps are uneven)"
    return _equal(k)


@register("reduce_scatter", "native")
def reduce_scatter_native(ctx, sendbuf, recvbuf, counts, op):
    """The MPI library's own ``MPI_Reduce_scatter``."""
    ctx.mpi.Reduce_scatter(sendbuf, recvbuf, counts, op)


def _block_a_step(text, links):
    """Ring's and pairwise's cost (as ``text``) and textbook: N-1 steps of one block each.

    ``links``: the cost's two-level split (:mod:`mpicoll.coll.links`).
    """
    return {"cost": Cost(text, alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n / k.N,
                         gamma=lambda k: (k.N - 1) * k.n / k.N, exact=_equal, links=links),
            "textbook": Textbook("(N-1)K/N", "each", "sent",
                                 lambda n, k: F((n - 1) * k, n), even_or_mean)}


@register("reduce_scatter", "ring", commutative_only=True,
          **_block_a_step("(N-1)(α + (n/N)β + (n/N)γ)",
                          lambda N, K, n: Split().ring(N - 1, n / N)))
def reduce_scatter_ring(ctx, sendbuf, recvbuf, counts, op):
    """Ring: partial sums of block rank-s-1 travel rightwards, one hop a step.

    Cost: (N-1)(α + (n/N)β + (n/N)γ) for equal blocks; N-1 steps. Bandwidth
    optimal (the first half of the seed's ring allreduce). Commutative only.
    """
    size, rank = ctx.size, ctx.rank
    off = offsets(counts)
    if size == 1:
        ctx.copy(recvbuf, sendbuf)
        return

    def block(i):
        i %= size
        return sendbuf[off[i]:off[i + 1]]

    big = max(counts)
    bufs = [ctx.scratch(big), ctx.scratch(big)]
    right, left = (rank + 1) % size, (rank - 1) % size
    outgoing = block(rank - 1)            # step 0 sends my own block rank-1
    for s in range(size - 1):
        mine = block(rank - s - 2)        # the partial sum arriving is of this block
        rbuf = bufs[s % 2][:mine.size]    # double buffer: outgoing is the other one
        ctx.sendrecv(outgoing, right, rbuf, left)
        if s < size - 2:
            outgoing = ctx.reduce(mine, rbuf, rbuf)
        else:                             # last step: my finished block
            ctx.copy(recvbuf, mine)
            ctx.reduce(rbuf, recvbuf, recvbuf)


@register("reduce_scatter", "recursive_halving", commutative_only=True, cost=Cost(
    "⌈log2 p⌉α + (p-1)/p·nβ + (p-1)/p·nγ, plus 2α + (N+1)/N·nβ + nγ when N ≠ p",
    alpha=lambda k: lg(k.p) + 2 * k.fold,
    beta=lambda k: (k.p - 1) * k.n / k.p + k.fold * (k.N + 1) * k.n / k.N,
    gamma=lambda k: (k.p - 1) * k.n / k.p + k.fold * k.n, exact=_equal_pow2,
    links=lambda N, K, n: Split().fold(N, K, n).fold(N, K, n / N)
    .xor(N, K, lambda d: d * n / pof2_below(N))),
    textbook=Textbook("(N-1)K/N", "each", "sent",
                      lambda n, k: F((n - 1) * k, n), pof2_even_or_mean))
def reduce_scatter_recursive_halving(ctx, sendbuf, recvbuf, counts, op):
    """Recursive halving: in step k, swap half of the live range with rank XOR p/2^k.

    Cost: ⌈log2 p⌉α + (p-1)/p·nβ + (p-1)/p·nγ, plus 2α + (N+1)/N·nβ + nγ when
    N ≠ p, with p = 2^⌊log2 N⌋; exact for N = p and equal blocks. When N != p
    the first 2(N-p) ranks fold pairwise (α + nβ + nγ) and get their block
    back (α + (n/N)β); the halving steps then split by the folded ranks'
    blocks, so halves are uneven (the formula is an estimate there). Best for
    short and medium messages. Commutative only.
    """
    size, rank = ctx.size, ctx.rank
    pof2 = pof2_below(size)
    rem = size - pof2
    off = offsets(counts)
    v = fold_rank(rank, rem)
    if v < 0:                              # folded out: give my data, get my block
        ctx.send(sendbuf, rank + 1)
        ctx.recv(recvbuf, rank + 1)
        return
    work = ctx.scratch(sendbuf.size)
    ctx.copy(work, sendbuf)
    spare = ctx.scratch(work.size)
    if rank < 2 * rem:
        ctx.recv(spare, rank - 1)
        ctx.reduce(spare, work, work)

    def span(vlo, vhi):                    # element range of virtual ranks [vlo, vhi)
        return off[first_rank(vlo, rem)], off[first_rank(vhi, rem)]

    lo, hi = 0, pof2
    mask = pof2 >> 1
    while mask:
        mid = lo + mask
        pv = v ^ mask
        keep, give = ((lo, mid), (mid, hi)) if v < mid else ((mid, hi), (lo, mid))
        ka, kb = span(*keep)
        ga, gb = span(*give)
        rbuf = spare[:kb - ka]
        partner = unfold_rank(pv, rem)
        ctx.sendrecv(work[ga:gb], partner, rbuf, partner)
        kbuf = work[ka:kb]
        ctx.reduce(rbuf, kbuf, kbuf)      # commutative: the result stays in work
        lo, hi = keep
        mask >>= 1
    if rank < 2 * rem:                     # I stand for rank-1 too: return its block
        ctx.send(work[off[rank - 1]:off[rank]], rank - 1)
    ctx.copy(recvbuf, work[off[rank]:off[rank + 1]])


@register("reduce_scatter", "pairwise", commutative_only=True,
          **_block_a_step("(N-1)α + (N-1)/N·nβ + (N-1)/N·nγ",
                          lambda N, K, n: Split().shift_all(K, N - 1, n / N)))
def reduce_scatter_pairwise(ctx, sendbuf, recvbuf, counts, op):
    """Pairwise exchange: in step i, send block rank+i, receive from rank-i.

    Cost: (N-1)α + (N-1)/N·nβ + (N-1)/N·nγ for equal blocks; N-1 steps.
    Long messages; no forwarding, so no data crosses more than one link.
    Commutative only (contributions arrive out of rank order).
    """
    size, rank = ctx.size, ctx.rank
    off = offsets(counts)
    ctx.copy(recvbuf, sendbuf[off[rank]:off[rank + 1]])
    tmp = ctx.scratch(recvbuf.size)
    for i in range(1, size):
        dst, src = (rank + i) % size, (rank - i) % size
        ctx.sendrecv(sendbuf[off[dst]:off[dst + 1]], dst, tmp, src)
        ctx.reduce(tmp, recvbuf, recvbuf)


@register("reduce_scatter", "reduce_scatterv", cost=Cost(
    "⌈log2 N⌉(α + nβ + nγ) + (N-1)α + (N-1)/N·nβ", alpha=lambda k: lg(k.N) + k.N - 1,
    beta=lambda k: lg(k.N) * k.n + (k.N - 1) * k.n / k.N, gamma=lambda k: lg(k.N) * k.n,
    exact=_equal, links=lambda N, K, n: Split().tree(N, K, lambda d: n).linear(N, K, n / N)),
    textbook=Textbook("(N-1)K + (N-1)K/N", "total", "sent",
                      lambda n, k: F((n - 1) * k) + F((n - 1) * k, n), even_chunks))
def reduce_scatter_reduce_scatterv(ctx, sendbuf, recvbuf, counts, op):
    """Binomial reduce of the whole vector to rank 0, then a linear scatterv.

    Cost: ⌈log2 N⌉(α + nβ + nγ) + (N-1)α + (N-1)/N·nβ for equal blocks. Any op (rank order kept);
    the fallback for non-commutative ops and a baseline for the others.
    """
    size, rank = ctx.size, ctx.rank
    off = offsets(counts)
    if rank == 0:
        full = ctx.scratch(sendbuf.size)
        binomial_reduce(ctx, sendbuf, full, op, 0)
        reqs = [ctx.isend(full[off[i]:off[i + 1]], i) for i in range(1, size)]
        ctx.copy(recvbuf, full[off[0]:off[1]])
        ctx.waitall(reqs)
    else:
        binomial_reduce(ctx, sendbuf, None, op, 0)
        ctx.recv(recvbuf, 0)
