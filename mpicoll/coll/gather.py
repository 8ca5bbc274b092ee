"""Gather: block i of ``recvbuf`` on ``root`` receives rank i's ``sendbuf``.

Per rank, N = 3, root = 0::

    sendbuf: rank 0 [1 1]   rank 1 [2 2]   rank 2 [3 3]
    recvbuf: rank 0 [1 1 2 2 3 3]   (ranks 1, 2: nothing)

``recvbuf`` (root only) holds N blocks of ``sendbuf.size`` elements.
Costs: α per message, β per byte, n bytes per rank's block.
"""
from mpi4py import MPI

from ..core.registry import register
from ._common import aliases
from .cost import Cost, lg
from .links import Split
from .textbook import F, Textbook, always


@register("gather", "native")
def gather_native(ctx, sendbuf, recvbuf, root):
    """The MPI library's own ``MPI_Gather``."""
    in_place = ctx.rank == root and aliases(sendbuf, recvbuf)
    ctx.mpi.Gather(MPI.IN_PLACE if in_place else sendbuf, recvbuf, root)


@register("gather", "linear", cost=Cost(
    "(N-1)α + (N-1)nβ", alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().linear(N, K, n)),
    textbook=Textbook("(N-1)K/N", "root", "recv",
                      lambda n, k: F((n - 1) * k, n), always))
def gather_linear(ctx, sendbuf, recvbuf, root):
    """Every rank sends its block straight to the root (receives posted at once).

    Cost: (N-1)α + (N-1)nβ at the root; 1 step. Fine for small N; the
    root's link is the bottleneck.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    if rank != root:
        ctx.send(sendbuf, root)
        return
    reqs = [ctx.irecv(recvbuf[i * c:(i + 1) * c], i) for i in range(size) if i != root]
    ctx.copy(recvbuf[root * c:(root + 1) * c], sendbuf)
    ctx.waitall(reqs)


def binomial_gather(ctx, sendbuf, recvbuf, root):
    """Binomial-tree gather (shared with composite algorithms)."""
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    rel = (rank - root) % size
    # Relative rank r collects the blocks of relative ranks [r, r + subtree).
    subtree = size if rel == 0 else min(rel & -rel, size - rel)
    if rel and subtree == 1:        # a leaf: send my block to my parent
        ctx.send(sendbuf, (rel - (rel & -rel) + root) % size)
        return
    if rel == 0 and root == 0:
        tmp = recvbuf           # relative order is absolute order
    else:
        tmp = ctx.scratch(subtree * c)
    ctx.copy(tmp[:c], sendbuf)
    mask = 1
    while mask < size:
        if rel & mask:
            ctx.send(tmp, (rel - mask + root) % size)
            return
        if rel + mask < size:
            nb = min(mask, size - rel - mask)
            ctx.recv(tmp[mask * c:(mask + nb) * c], (rel + mask + root) % size)
        mask <<= 1
    if tmp is not recvbuf:      # root != 0: rotate relative order into place
        k = (size - root) * c
        ctx.copy(recvbuf[root * c:], tmp[:k])
        ctx.copy(recvbuf[:root * c], tmp[k:])


@register("gather", "binomial", cost=Cost(
    "⌈log2 N⌉α + (N-1)nβ", alpha=lambda k: lg(k.N), beta=lambda k: (k.N - 1) * k.n,
    links=lambda N, K, n: Split().tree(N, K, lambda d: min(d, N - d) * n)),
    textbook=Textbook("(N-1)K/N", "root", "recv",
                      lambda n, k: F((n - 1) * k, n), always))
def gather_binomial(ctx, sendbuf, recvbuf, root):
    """Binomial tree: subtrees forward their collected blocks up the tree.

    Cost: ⌈log2 N⌉α + (N-1)nβ; ⌈log2 N⌉ steps. Inner nodes and a root
    other than 0 use a temporary buffer (plus one local rotation at the root).
    """
    binomial_gather(ctx, sendbuf, recvbuf, root)
