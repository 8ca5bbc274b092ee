"""Alltoall: block j of rank i's ``sendbuf`` lands in block i of rank j's ``recvbuf``.

Per rank, N = 2 (blocks of one element)::

    sendbuf: rank 0 [00 01]   rank 1 [10 11]
    recvbuf: rank 0 [00 10]   rank 1 [01 11]

Costs: α per message, β per byte, n bytes per block (N blocks per rank).
"""
from ..core.registry import register
from .cost import Cost, lg
from .links import Split, blocks_with_bit, pow2s
from .textbook import F, Textbook, always, ceil_log2, pof2


def _bruck_blocks(k):
    """B = Σ_j #{i < N : bit j of i set}: the blocks every rank forwards in all."""
    return sum(bin(i).count("1") for i in range(k.N))


@register("alltoall", "native")
def alltoall_native(ctx, sendbuf, recvbuf):
    """The MPI library's own ``MPI_Alltoall``."""
    ctx.mpi.Alltoall(sendbuf, recvbuf)


@register("alltoall", "pairwise", cost=Cost(
    "(N-1)(α + nβ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().shift_all(K, N - 1, n)),
    textbook=Textbook("(N-1)K/N", "each", "sent",
                      lambda n, k: F((n - 1) * k, n), always))
def alltoall_pairwise(ctx, sendbuf, recvbuf):
    """Pairwise exchange: in step i, send to rank+i and receive from rank-i.

    Cost: (N-1)(α + nβ); N-1 steps. Long blocks: every byte moves once.
    """
    size, rank = ctx.size, ctx.rank
    c = sendbuf.size // size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf[rank * c:(rank + 1) * c])
    for i in range(1, size):
        dst, src = (rank + i) % size, (rank - i) % size
        ctx.sendrecv(sendbuf[dst * c:(dst + 1) * c], dst, recvbuf[src * c:(src + 1) * c], src)


@register("alltoall", "bruck", cost=Cost(
    "⌈log2 N⌉α + B·nβ", where={"B": _bruck_blocks}, alpha=lambda k: lg(k.N),
    beta=lambda k: _bruck_blocks(k) * k.n,
    links=lambda N, K, n: Split().shift(K, [blocks_with_bit(N, k) * n for k in pow2s(N)])),
    textbook=Textbook("(K/2) log2 N", "each", "sent",
                      lambda n, k: F(k * ceil_log2(n), 2), pof2))
def alltoall_bruck(ctx, sendbuf, recvbuf):
    """Bruck: in step k, forward every block whose index has bit k set to rank+2^k.

    Cost: ⌈log2 N⌉α + B·nβ, where B = Σ_k #{i < N : bit k of i set} blocks
    (B = (N/2)log2 N for a power of two; B = 5 at N = 5), plus local packing
    and two rotations; ⌈log2 N⌉ steps. Short blocks at large N (fewer,
    larger messages than pairwise's N-1).
    """
    size, rank = ctx.size, ctx.rank
    c = sendbuf.size // size
    if size == 1:
        ctx.copy(recvbuf, sendbuf)
        return
    # Rotate: tmp block i is the block destined for rank + i.
    flat = ctx.scratch(size * c)
    k = (size - rank) * c
    ctx.copy(flat[:k], sendbuf[rank * c:])
    ctx.copy(flat[k:], sendbuf[:rank * c])
    most = (size + 1) // 2 * c
    pack = ctx.scratch(most)
    unpack = ctx.scratch(most)
    k = 1
    while k < size:
        # Blocks with bit k set form runs [j, j+k) for j = k, 3k, 5k, ...:
        # contiguous slices, so packing is a few copies (no index arrays,
        # which would have to live in the buffers' own memory).
        runs = [(j, min(j + k, size)) for j in range(k, size, 2 * k)]
        n = 0
        for a, b in runs:
            ctx.copy(pack[n:n + (b - a) * c], flat[a * c:b * c])
            n += (b - a) * c
        ctx.sendrecv(pack[:n], (rank + k) % size, unpack[:n], (rank - k) % size)
        n = 0
        for a, b in runs:
            ctx.copy(flat[a * c:b * c], unpack[n:n + (b - a) * c])
            n += (b - a) * c
        k <<= 1
    # Block i now came from rank - i: block j of recvbuf is flat block
    # (rank - j) mod N, i.e. flat reversed around the rank.
    for j in range(size):
        i = (rank - j) % size
        ctx.copy(recvbuf[j * c:(j + 1) * c], flat[i * c:(i + 1) * c])
