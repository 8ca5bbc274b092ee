"""Allreduce: every rank ends with the element-wise reduction of all ranks' data.

It lands in ``recvbuf``; results are bitwise identical on every rank.

Per rank, N = 3, op = SUM::

    sendbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]
    recvbuf: rank 0 [6 6]   rank 1 [6 6]   rank 2 [6 6]

Algorithms take ``(ctx, sendbuf, recvbuf, op)``; ``sendbuf`` is None when
the call is in place (``recvbuf`` then holds the input).
Costs: α per message, β per byte, γ per byte reduced, n bytes per rank.
"""
from ..core.blocks import fold_rank, offsets, pof2_below, split, unfold_rank
from ..core.ops import op_ufunc
from ..core.registry import register
from .bcast import binomial_bcast
from .cost import Cost, even, lg
from .links import Split
from .reduce import binomial_reduce, halving_reduce_scatter
from .textbook import F, Textbook, always, ceil_log2, even_or_mean, pof2, pof2_even_or_mean


@register("allreduce", "native")
def allreduce_native(ctx, sendbuf, recvbuf, op):
    """The MPI library's own ``MPI_Allreduce``."""
    from mpi4py import MPI
    ctx.mpi.Allreduce(MPI.IN_PLACE if sendbuf is None else sendbuf, recvbuf, op)


@register("allreduce", "reduce_bcast", cost=Cost(
    "2⌈log2 N⌉(α + nβ) + ⌈log2 N⌉nγ", alpha=lambda k: 2 * lg(k.N),
    beta=lambda k: 2 * lg(k.N) * k.n, gamma=lambda k: lg(k.N) * k.n,
    links=lambda N, K, n: Split().tree(N, K, lambda d: n).tree(N, K, lambda d: n)),
    textbook=Textbook("2(N-1)K", "total", "sent",
                      lambda n, k: F(2 * (n - 1) * k), always))
def allreduce_reduce_bcast(ctx, sendbuf, recvbuf, op):
    """Binomial reduce to rank 0, then binomial broadcast.

    Cost: 2⌈log2 N⌉(α + nβ) + ⌈log2 N⌉nγ; 2⌈log2 N⌉ steps.
    Any op (rank order kept); simple but moves every byte 2 log N times.
    """
    data = sendbuf
    if sendbuf is None:
        data = ctx.scratch(recvbuf.size)
        ctx.copy(data, recvbuf)
    binomial_reduce(ctx, data, recvbuf if ctx.rank == 0 else None, op, 0)
    binomial_bcast(ctx, recvbuf, 0)


def _fold_in(ctx, recvbuf, spare, op, rem):
    """Pairs (2i, 2i+1) for i < rem: the even rank hands its data to the odd one."""
    rank = ctx.rank
    if rank < 2 * rem:
        if rank % 2 == 0:
            ctx.send(recvbuf, rank + 1)
        else:
            ctx.recv(spare, rank - 1)
            ctx.copy(recvbuf, ctx.reduce(spare, recvbuf, recvbuf))   # rank - 1 comes first


def _fold_start(ctx, sendbuf, recvbuf, op):
    """Start of the power-of-two algorithms: copy in, fold the extra ranks.

    Returns (p, rem, spare, v): p = 2^⌊log2 N⌋, rem = N - p, a scratch vector,
    and this rank's virtual rank (< 0 when it was folded out).
    """
    ctx.copy(recvbuf, sendbuf)
    pof2 = pof2_below(ctx.size)
    rem = ctx.size - pof2
    spare = ctx.scratch(recvbuf.size)
    _fold_in(ctx, recvbuf, spare, op, rem)
    return pof2, rem, spare, fold_rank(ctx.rank, rem)


def _fold_out(ctx, recvbuf, rem):
    """The odd rank of each folded pair returns the result to its even partner."""
    rank = ctx.rank
    if rank < 2 * rem:
        if rank % 2 == 0:
            ctx.recv(recvbuf, rank + 1)
        else:
            ctx.send(recvbuf, rank - 1)


@register("allreduce", "recursive_doubling", cost=Cost(
    "⌈log2 p⌉(α + nβ + nγ), plus 2(α + nβ) + nγ when N ≠ p",
    alpha=lambda k: lg(k.p) + 2 * k.fold, beta=lambda k: (lg(k.p) + 2 * k.fold) * k.n,
    gamma=lambda k: (lg(k.p) + k.fold) * k.n,
    links=lambda N, K, n: Split().fold(N, K, n, 2).xor(N, K, lambda d: n)),
    textbook=Textbook("K log2 N", "each", "sent",
                      lambda n, k: F(k * ceil_log2(n)), pof2))
def allreduce_recursive_doubling(ctx, sendbuf, recvbuf, op):
    """Recursive doubling: in step k, exchange the whole vector with rank XOR 2^k.

    Cost: ⌈log2 p⌉(α + nβ + nγ), plus 2(α + nβ) + nγ when N ≠ p, with
    p = 2^⌊log2 N⌋ (the extra ranks fold in and out). Best for short messages.
    Any op: both partners combine lower-rank data first, so results are
    identical and ordered.
    """
    pof2, rem, spare, v = _fold_start(ctx, sendbuf, recvbuf, op)
    if v >= 0:
        acc = recvbuf
        mask = 1
        while mask < pof2:
            pv = v ^ mask
            partner = unfold_rank(pv, rem)
            ctx.sendrecv(acc, partner, spare, partner)
            if pv < v:
                res = ctx.reduce(spare, acc, acc)
            else:
                res = ctx.reduce(acc, spare, acc)
            if res is spare:
                acc, spare = spare, acc
            mask <<= 1
        ctx.copy(recvbuf, acc)
    _fold_out(ctx, recvbuf, rem)


@register("allreduce", "ring", commutative_only=True, cost=Cost(
    "2(N-1)α + 2(N-1)/N·nβ + (N-1)/N·nγ", alpha=lambda k: 2 * (k.N - 1),
    beta=lambda k: 2 * (k.N - 1) * k.n / k.N, gamma=lambda k: (k.N - 1) * k.n / k.N,
    exact=even, links=lambda N, K, n: Split().ring(2 * (N - 1), n / N)),
    textbook=Textbook("2(N-1)K/N", "each", "sent",
                      lambda n, k: F(2 * (n - 1) * k, n), even_or_mean))
def allreduce_ring(ctx, sendbuf, recvbuf, op):
    """Ring: a reduce-scatter ring then an allgather ring, as in the seed.

    Each of the 2(N-1) steps sends one chunk of about n/N bytes to the right
    neighbour. Cost: 2(N-1)α + 2(N-1)/N·nβ + (N-1)/N·nγ.
    Bandwidth-optimal, latency grows with N. Commutative ops only (each
    chunk is combined in ring order, not rank order).
    """
    size, rank = ctx.size, ctx.rank
    if size == 1 or op_ufunc(op) is None:
        # User ops write into their second operand, which must not be sendbuf.
        ctx.copy(recvbuf, sendbuf)
        sendbuf = None
    src = recvbuf if sendbuf is None else sendbuf
    off = offsets(split(recvbuf.size, size))
    right, left = (rank + 1) % size, (rank - 1) % size
    tmp = ctx.scratch(off[1] if size > 1 else 0)  # chunk 0 is the largest

    def chunk(buf, i):
        i %= size
        return buf[off[i]:off[i + 1]]

    # Reduce-scatter: after step s, chunk rank-s-1 holds s+2 contributions.
    # Out of place, each chunk is read from sendbuf once and reduced straight
    # into recvbuf: no separate copy pass over the whole vector.
    for s in range(size - 1):
        send = chunk(src if s == 0 else recvbuf, rank - s)
        mine = chunk(recvbuf, rank - s - 1)
        rbuf = tmp[:mine.size]
        ctx.sendrecv(send, right, rbuf, left)
        ctx.reduce(rbuf, chunk(src, rank - s - 1), mine)
    # Allgather: rank now owns chunk rank+1; pass the finished chunks around.
    for s in range(size - 1):
        ctx.sendrecv(chunk(recvbuf, rank + 1 - s), right, chunk(recvbuf, rank - s), left)


def _rab_exact(k):
    return None if k.n % k.p == 0 else f"uneven chunks ({k.n} elements in {k.p})"


@register("allreduce", "rabenseifner", commutative_only=True, cost=Cost(
    "2⌈log2 p⌉α + 2(p-1)/p·nβ + (p-1)/p·nγ, plus 2(α + nβ) + nγ when N ≠ p",
    alpha=lambda k: 2 * lg(k.p) + 2 * k.fold,
    beta=lambda k: 2 * (k.p - 1) * k.n / k.p + 2 * k.fold * k.n,
    gamma=lambda k: (k.p - 1) * k.n / k.p + k.fold * k.n, exact=_rab_exact,
    links=lambda N, K, n: Split().fold(N, K, n, 2)
    .xor(N, K, lambda d: d * n / pof2_below(N)).xor(N, K, lambda d: d * n / pof2_below(N))),
    textbook=Textbook("2(N-1)K/N", "each", "sent",
                      lambda n, k: F(2 * (n - 1) * k, n), pof2_even_or_mean))
def allreduce_rabenseifner(ctx, sendbuf, recvbuf, op):
    """Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather.

    Cost: 2⌈log2 p⌉α + 2(p-1)/p·nβ + (p-1)/p·nγ, plus 2(α + nβ) + nγ when
    N ≠ p, with p = 2^⌊log2 N⌋ (the extra ranks fold in and out). Best for
    long messages at large N (log latency, optimal bandwidth). Commutative
    ops only.
    """
    pof2, rem, spare, v = _fold_start(ctx, sendbuf, recvbuf, op)
    if v >= 0:
        off = offsets(split(recvbuf.size, pof2))
        halving_reduce_scatter(ctx, recvbuf, spare, op, off, v, pof2, rem)
        mask = 1
        while mask < pof2:      # recursive doubling of aligned chunk blocks
            partner = unfold_rank(v ^ mask, rem)
            base, pbase = v & ~(mask - 1), (v ^ mask) & ~(mask - 1)
            ctx.sendrecv(recvbuf[off[base]:off[base + mask]], partner,
                         recvbuf[off[pbase]:off[pbase + mask]], partner)
            mask <<= 1
    _fold_out(ctx, recvbuf, rem)
