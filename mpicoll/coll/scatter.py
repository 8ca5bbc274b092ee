"""Scatter: block i of ``sendbuf`` on ``root`` lands in ``recvbuf`` on rank i.

Per rank, N = 3, root = 0::

    sendbuf: rank 0 [1 1 2 2 3 3]   (ranks 1, 2: ignored)
    recvbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]

Costs: α per message, β per byte, n bytes per block.
"""
from ..core.registry import register
from .cost import Cost, lg
from .links import Split
from .textbook import F, Textbook, always


@register("scatter", "native")
def scatter_native(ctx, sendbuf, recvbuf, root):
    """The MPI library's own ``MPI_Scatter``."""
    ctx.mpi.Scatter(sendbuf, recvbuf, root)


@register("scatter", "linear", cost=Cost(
    "(N-1)(α + nβ)", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().linear(N, K, n)),
    textbook=Textbook("(N-1)K/N", "root", "sent",
                      lambda n, k: F((n - 1) * k, n), always))
def scatter_linear(ctx, sendbuf, recvbuf, root):
    """The root sends each rank its block directly (sends posted at once).

    Cost: (N-1)(α + nβ) at the root; 1 step. The root's link is the bottleneck.
    """
    size, rank, c = ctx.size, ctx.rank, recvbuf.size
    if rank != root:
        ctx.recv(recvbuf, root)
        return
    reqs = [ctx.isend(sendbuf[i * c:(i + 1) * c], i) for i in range(size) if i != root]
    ctx.copy(recvbuf, sendbuf[root * c:(root + 1) * c])
    ctx.waitall(reqs)


@register("scatter", "binomial", cost=Cost(
    "⌈log2 N⌉α + (N-1)nβ", alpha=lambda k: lg(k.N), beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().tree(N, K, lambda d: min(d, N - d) * n)),
    textbook=Textbook("(N-1)K/N", "root", "sent",
                      lambda n, k: F((n - 1) * k, n), always))
def scatter_binomial(ctx, sendbuf, recvbuf, root):
    """Binomial tree: each rank passes the blocks of its subtree's halves down.

    Cost: ⌈log2 N⌉α + (N-1)nβ; ⌈log2 N⌉ steps. Inner nodes and a root other
    than 0 use a temporary buffer (the root rotates its data once).
    """
    size, rank, c = ctx.size, ctx.rank, recvbuf.size
    rel = (rank - root) % size
    subtree = size if rel == 0 else min(rel & -rel, size - rel)
    if rel == 0:
        if root == 0:
            tmp = sendbuf
        else:                   # relative order: blocks root, root+1, ..., root-1
            tmp = ctx.scratch(size * c)
            k = (size - root) * c
            ctx.copy(tmp[:k], sendbuf[root * c:])
            ctx.copy(tmp[k:], sendbuf[:root * c])
    elif subtree == 1:
        tmp = recvbuf
    else:
        tmp = ctx.scratch(subtree * c)
    mask = 1
    while mask < size:
        if rel & mask:
            ctx.recv(tmp, (rel - mask + root) % size)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rel + mask < size:
            nb = min(mask, size - rel - mask)
            ctx.send(tmp[mask * c:(mask + nb) * c], (rel + mask + root) % size)
        mask >>= 1
    if tmp is not recvbuf:
        ctx.copy(recvbuf, tmp[:c])
