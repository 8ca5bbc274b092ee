"""Allgather: every rank ends with all ranks' blocks, in rank order.

Per rank, N = 3::

    sendbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]
    recvbuf: every rank [1 1 2 2 3 3]

In place, ``sendbuf`` is a view of this rank's block of ``recvbuf``.
Costs: α per message, β per byte, n bytes per rank's block.
"""
from mpi4py import MPI

from ..core.blocks import first_rank, fold_rank, pof2_below, unfold_rank
from ..core.registry import register
from ._common import aliases
from .bcast import binomial_bcast
from .cost import Cost, lg
from .gather import binomial_gather
from .links import Split, pow2s
from .textbook import F, Textbook, always, ceil_log2, pof2


@register("allgather", "native")
def allgather_native(ctx, sendbuf, recvbuf):
    """The MPI library's own ``MPI_Allgather``."""
    ctx.mpi.Allgather(MPI.IN_PLACE if aliases(sendbuf, recvbuf) else sendbuf, recvbuf)


@register("allgather", "ring", cost=Cost(
    "(N-1)(α + nβ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().ring(N - 1, n)),
    textbook=Textbook("(N-1)K/N", "each", "sent",
                      lambda n, k: F((n - 1) * k, n), always))
def allgather_ring(ctx, sendbuf, recvbuf):
    """Ring: in step s every rank forwards block rank - s to its right neighbour.

    Cost: (N-1)(α + nβ); N-1 steps. Bandwidth-optimal; latency grows with N.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf)
    right, left = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        sb, rb = (rank - s) % size, (rank - s - 1) % size
        ctx.sendrecv(recvbuf[sb * c:(sb + 1) * c], right, recvbuf[rb * c:(rb + 1) * c], left)


def _carried(k):
    """F = Σ_{k<log2 p} min(2^k, N-p): the extra blocks the folded virtual ranks carry."""
    rem = k.N - k.p
    return sum(min(1 << j, rem) for j in range(lg(k.p)))


@register("allgather", "recursive_doubling", cost=Cost(
    "⌈log2 p⌉α + (p-1)nβ, plus 2α + (N + 1 + F)nβ when N ≠ p", where={"F": _carried},
    alpha=lambda k: lg(k.p) + 2 * k.fold,
    beta=lambda k: (k.p - 1 + k.fold * (k.N + 1 + _carried(k))) * k.n,
    links=lambda N, K, n: Split().fold(N, K, n).fold(N, K, N * n)
    .xor(N, K, lambda d: d * N / pof2_below(N) * n)),
    textbook=Textbook("(N-1)K/N", "each", "sent",
                      lambda n, k: F((n - 1) * k, n), pof2))
def allgather_recursive_doubling(ctx, sendbuf, recvbuf):
    """Recursive doubling: in step k, swap everything held with rank XOR 2^k.

    Cost: ⌈log2 p⌉α + (p-1)nβ, plus 2α + (N + 1 + F)nβ when N ≠ p, with
    p = 2^⌊log2 N⌋ and F = Σ_{k<log2 p} min(2^k, N-p). When N != p the first
    2(N-p) ranks fold pairwise first (α + nβ) and get the whole result back
    at the end (α + Nnβ); folded virtual ranks carry two blocks, so the
    doubling phase moves F blocks more. Best for short messages.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf)
    pof2 = pof2_below(size)
    rem = size - pof2
    v = fold_rank(rank, rem)
    if rank < 2 * rem:
        if v < 0:
            ctx.send(recvbuf[rank * c:(rank + 1) * c], rank + 1)
        else:
            ctx.recv(recvbuf[(rank - 1) * c:rank * c], rank - 1)
    if v >= 0:
        def span(vlo, vhi):     # virtual ranks [vlo, vhi) -> their original blocks
            return recvbuf[first_rank(vlo, rem) * c:first_rank(vhi, rem) * c]
        mask = 1
        while mask < pof2:
            base, pbase = v & ~(mask - 1), (v ^ mask) & ~(mask - 1)
            partner = unfold_rank(v ^ mask, rem)
            ctx.sendrecv(span(base, base + mask), partner, span(pbase, pbase + mask), partner)
            mask <<= 1
    if rank < 2 * rem:
        if v < 0:
            ctx.recv(recvbuf, rank + 1)
        else:
            ctx.send(recvbuf, rank - 1)


@register("allgather", "bruck", cost=Cost(
    "⌈log2 N⌉α + (N-1)nβ", alpha=lambda k: lg(k.N), beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().shift(K, [min(k, N - k) * n for k in pow2s(N)])),
    textbook=Textbook("(N-1)K/N", "each", "sent",
                      lambda n, k: F((n - 1) * k, n), always))
def allgather_bruck(ctx, sendbuf, recvbuf):
    """Bruck: in step k, send the first min(2^k, N-2^k) blocks held to rank - 2^k.

    Cost: ⌈log2 N⌉α + (N-1)nβ, for any N; ⌈log2 N⌉ steps, plus one local
    rotation of N blocks through a temporary buffer. Short messages, N not
    a power of two.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    tmp = ctx.scratch(size * c)
    ctx.copy(tmp[:c], sendbuf)   # tmp block i = block of rank (rank + i)
    k = 1
    while k < size:
        nb = min(k, size - k)
        ctx.sendrecv(tmp[:nb * c], (rank - k) % size, tmp[k * c:(k + nb) * c], (rank + k) % size)
        k <<= 1
    split_at = (size - rank) * c
    ctx.copy(recvbuf[rank * c:], tmp[:split_at])
    ctx.copy(recvbuf[:rank * c], tmp[split_at:])


@register("allgather", "gather_bcast", cost=Cost(
    "2⌈log2 N⌉α + (N-1)nβ + ⌈log2 N⌉Nnβ", alpha=lambda k: 2 * lg(k.N),
    beta=lambda k: (k.N - 1) * k.n + lg(k.N) * k.N * k.n,
    links=lambda N, K, n: Split().tree(N, K, lambda d: min(d, N - d) * n)
    .tree(N, K, lambda d: N * n)),
    textbook=Textbook("ceil(log2 N)K", "rank0", "sent",
                      lambda n, k: F(ceil_log2(n) * k), always))
def allgather_gather_bcast(ctx, sendbuf, recvbuf):
    """Binomial gather to rank 0, then binomial broadcast of the N blocks.

    Cost: 2⌈log2 N⌉α + (N-1)nβ + ⌈log2 N⌉Nnβ; 2⌈log2 N⌉ steps. Simple;
    the broadcast of the whole result makes it slow for long messages.
    """
    # In place, rank 0's sendbuf is block 0 of recvbuf: gathering there is a no-op copy.
    binomial_gather(ctx, sendbuf, recvbuf if ctx.rank == 0 else None, 0)
    binomial_bcast(ctx, recvbuf, 0)
