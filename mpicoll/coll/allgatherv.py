"""Allgatherv: every rank gets every rank's block, block i at ``displs[i]`` of its ``recvbuf``.

Per rank, N = 3, counts [1, 0, 2], displs [0, 1, 1]::

    sendbuf: rank 0 [1]   rank 1 []   rank 2 [3 3]
    recvbuf: every rank [1 3 3]

Algorithms take ``(ctx, sendbuf, recvbuf, counts, displs)``; counts are the
same on every rank, displacements are each rank's own (gaps, any order;
blocks never overlap). ``sendbuf`` is None when the call is in place (this
rank's block is already at ``displs[rank]``).
Costs: α per message, β per byte, m bytes in all (Σ counts), m_i rank i's,
m_max the largest block.
"""
from mpi4py import MPI

from ..core.blocks import offsets
from ..core.registry import register
from ._vcommon import block, exchange, native, span, subtotal, unpack
from .bcast import binomial_bcast
from .cost import Cost, lg
from .gatherv import _equal_blocks, binomial_gatherv


def _some(k):
    return None if k.counts and max(k.counts) > 0 else "every block is empty"


@register("allgatherv", "native")
def allgatherv_native(ctx, sendbuf, recvbuf, counts, displs):
    """The MPI library's own ``MPI_Allgatherv``."""
    native(ctx, "Allgatherv", MPI.IN_PLACE if sendbuf is None else sendbuf,
           [recvbuf, (list(counts), list(displs))], outputs=(1,))


@register("allgatherv", "ring", cost=Cost(
    "(N-1)α + (N-1)·m_max·β", where={"m_max": lambda k: max(k.counts)},
    alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * max(k.counts), exact=_some,
    load_exact=_equal_blocks))
def allgatherv_ring(ctx, sendbuf, recvbuf, counts, displs):
    """Ring: in step s every rank forwards block rank - s to its right neighbour, in place.

    Cost: (N-1)α + (N-1)·m_max·β (each step lasts as long as its largest
    block); N-1 steps, empty blocks skipped. Moves every byte once, no
    temporaries. Uneven counts slow it: bruck does not care.
    """
    size, rank = ctx.size, ctx.rank
    ctx.copy(block(recvbuf, counts, displs, rank), sendbuf)
    right, left = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        sb, rb = (rank - s) % size, (rank - s - 1) % size
        exchange(ctx, block(recvbuf, counts, displs, sb), right,
                 block(recvbuf, counts, displs, rb), left)


@register("allgatherv", "bruck", cost=Cost(
    "⌈log2 N⌉α + (m - m_rank)β", where={"m_rank": lambda k: k.counts[0]},
    alpha=lambda k: lg(k.N), beta=lambda k: k.m - k.counts[0], exact=_equal_blocks))
def allgatherv_bruck(ctx, sendbuf, recvbuf, counts, displs):
    """Bruck: in step k, send the first min(2^k, N-2^k) blocks held to rank - 2^k.

    Cost: ⌈log2 N⌉α + (m - m_rank)β, for any N and equal counts (each rank
    receives every other block exactly once; with unequal blocks a step lasts
    as long as the larger of its halves); ⌈log2 N⌉ steps, plus copying
    the result out of a temporary of m elements (blocks in order rank,
    rank + 1, ...). Short messages, uneven counts.
    """
    size, rank = ctx.size, ctx.rank
    order = [(rank + i) % size for i in range(size)]      # tmp holds blocks in this order
    off = offsets([counts[r] for r in order])
    tmp = ctx.scratch(off[size])
    ctx.copy(tmp[:counts[rank]], sendbuf if sendbuf is not None
             else block(recvbuf, counts, displs, rank))
    k = 1
    while k < size:
        nb = min(k, size - k)
        # The first nb blocks held go to rank - k; blocks k .. k+nb-1 come from rank + k
        # (its first nb): both ends compute the same sizes from the counts.
        exchange(ctx, tmp[:off[nb]], (rank - k) % size, tmp[off[k]:off[k + nb]], (rank + k) % size)
        k <<= 1
    start = span(counts, displs, order)
    if start is not None:           # this rank's layout is tmp's order: one copy
        ctx.copy(recvbuf[start:start + off[size]], tmp)
    else:
        unpack(ctx, recvbuf, tmp, counts, displs, order)


@register("allgatherv", "gatherv_bcast", cost=Cost(
    "2⌈log2 N⌉α + (m - m_0)β + ⌈log2 N⌉mβ", where={"m_0": lambda k: k.counts[0]},
    alpha=lambda k: 2 * lg(k.N), beta=lambda k: k.m - k.counts[0] + lg(k.N) * k.m,
    exact=_equal_blocks))
def allgatherv_gatherv_bcast(ctx, sendbuf, recvbuf, counts, displs):
    """Binomial gatherv to rank 0 (blocks back to back), binomial bcast of the m elements.

    Cost: 2⌈log2 N⌉α + (m - m_0)β + ⌈log2 N⌉mβ; 2⌈log2 N⌉ steps. Only the
    blocks travel (gaps in recvbuf are never overwritten); a rank whose
    blocks lie back to back in rank order works in recvbuf, the others copy
    through a temporary of m elements. Simple; slow for long messages.
    """
    size, rank = ctx.size, ctx.rank
    everyone = list(range(size))
    total = subtotal(counts, everyone)
    if not total:                   # (the API layer never calls it so: nothing to move)
        return
    start = span(counts, displs, everyone)
    packed = recvbuf[start:start + total] if start is not None else ctx.scratch(total)
    at = offsets(counts)[:-1]       # displacements of the blocks back to back
    own = sendbuf if sendbuf is not None else block(recvbuf, counts, displs, rank)
    binomial_gatherv(ctx, own, packed if rank == 0 else None, counts, at, 0)
    binomial_bcast(ctx, packed, 0)
    if start is None:
        unpack(ctx, recvbuf, packed, counts, displs, everyone)
