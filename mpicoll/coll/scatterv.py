"""Scatterv: ``root``'s block i (``counts[i]`` at ``displs[i]``) lands in rank i's ``recvbuf``.

Per rank, N = 3, root = 0, counts [1, 0, 2], displs [3, 0, 0]::

    sendbuf: rank 0 [3 3 9 1]   (ranks 1, 2: ignored)
    recvbuf: rank 0 [1]   rank 1 []   rank 2 [3 3]

Algorithms take ``(ctx, sendbuf, recvbuf, counts, displs, root)``: ``counts``
on every rank, ``sendbuf`` and ``displs`` on the root only (None elsewhere);
``recvbuf`` is None on the root when the call is in place (its block stays
in ``sendbuf``). Send blocks may leave gaps, overlap or run out of order.
Costs: α per message, β per byte, m bytes in all (Σ counts), m_i rank i's.
"""
from mpi4py import MPI

from ..core.registry import register
from ._vcommon import block, child_ranks, native, pack, span, subtotal, tree_place
from .cost import Cost, lg
from .gatherv import _equal_blocks, _nonempty


@register("scatterv", "native")
def scatterv_native(ctx, sendbuf, recvbuf, counts, displs, root):
    """The MPI library's own ``MPI_Scatterv``."""
    if ctx.rank != root:
        native(ctx, "Scatterv", None, recvbuf, root, outputs=(1,))
        return
    native(ctx, "Scatterv", [sendbuf, (list(counts), list(displs))],
           MPI.IN_PLACE if recvbuf is None else recvbuf, root, outputs=(1,))


@register("scatterv", "linear", cost=Cost(
    "(N-1)α + (m - m_root)β", where={"m_root": lambda k: k.counts[k.root]},
    alpha=lambda k: k.N - 1, beta=lambda k: k.m - k.counts[k.root], exact=_nonempty))
def scatterv_linear(ctx, sendbuf, recvbuf, counts, displs, root):
    """The root sends each rank its block straight from ``sendbuf`` (sends posted at once).

    Cost: (N-1)α + (m - m_root)β at the root; 1 step; empty blocks send
    nothing, nothing is copied but the root's own block. The root's link is
    the bottleneck.
    """
    rank = ctx.rank
    if rank != root:
        if counts[rank]:
            ctx.recv(recvbuf, root)
        return
    reqs = [ctx.isend(block(sendbuf, counts, displs, i), i)
            for i in range(ctx.size) if i != root and counts[i]]
    if recvbuf is not None:
        ctx.copy(recvbuf, block(sendbuf, counts, displs, root))
    ctx.waitall(reqs)


def binomial_scatterv(ctx, sendbuf, recvbuf, counts, displs, root):
    """Binomial-tree scatterv: each rank passes its subtree's halves down, largest first."""
    size, rank = ctx.size, ctx.rank
    rel, subtree, parent, n = tree_place(size, rank, root, counts)
    top = 1
    while top < size:
        top <<= 1
    if rel == 0:
        reqs = []
        mask = top >> 1
        while mask > 0:             # the largest subtree first: its chain is the longest
            members = child_ranks(size, root, 0, mask)
            n = subtotal(counts, members)
            if n:
                start = span(counts, displs, members)
                if start is not None:
                    out = sendbuf[start:start + n]
                else:
                    out = ctx.scratch(n)
                    pack(ctx, out, sendbuf, counts, displs, members)
                reqs.append(ctx.isend(out, (mask + root) % size))
            mask >>= 1
        if recvbuf is not None:
            ctx.copy(recvbuf, block(sendbuf, counts, displs, root))
        ctx.waitall(reqs)
        return
    if not n:                       # nothing for this whole subtree: no message at all
        return
    if subtree == 1:
        ctx.recv(recvbuf, parent)
        return
    tmp = ctx.scratch(n)
    ctx.recv(tmp, parent)           # this subtree's blocks, back to back in relative order
    mine = counts[rank]
    kids = []
    off = mine
    mask = 1
    while mask < subtree:
        m = subtotal(counts, child_ranks(size, root, rel, mask))
        kids.append((mask, off, m))
        off += m
        mask <<= 1
    reqs = [ctx.isend(tmp[o:o + m], (rel + k + root) % size) for k, o, m in reversed(kids) if m]
    ctx.copy(recvbuf, tmp[:mine])
    ctx.waitall(reqs)


@register("scatterv", "binomial", cost=Cost(
    "⌈log2 N⌉α + (m - m_root)β", where={"m_root": lambda k: k.counts[k.root]},
    alpha=lambda k: lg(k.N), beta=lambda k: k.m - k.counts[k.root], exact=_equal_blocks))
def scatterv_binomial(ctx, sendbuf, recvbuf, counts, displs, root):
    """Binomial tree: the root sends each subtree its blocks back to back; inner nodes split them.

    Cost: ⌈log2 N⌉α + (m - m_root)β at the root; ⌈log2 N⌉ steps. Inner nodes
    receive into a temporary; the root packs a subtree's blocks first when
    they do not lie back to back in ``sendbuf``. Needs every rank's count on
    every rank (the API layer exchanges them).
    """
    binomial_scatterv(ctx, sendbuf, recvbuf, counts, displs, root)
