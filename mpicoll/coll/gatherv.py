"""Gatherv: rank i's ``sendbuf`` (``counts[i]`` elements) lands at ``root``'s ``displs[i]``.

Per rank, N = 3, root = 0, counts [1, 0, 2], displs [3, 0, 0]::

    sendbuf: rank 0 [1]   rank 1 []   rank 2 [3 3]
    recvbuf: rank 0 [3 3 . 1]   (ranks 1, 2: nothing; '.' is left as it was)

Algorithms take ``(ctx, sendbuf, recvbuf, counts, displs, root)``: ``counts``
(every rank's count, known on every rank), ``recvbuf`` and ``displs`` on the
root only (None elsewhere); ``sendbuf`` is None on the root when the call is
in place (its block is already at ``displs[root]``). Blocks may leave gaps,
run out of rank order or be empty; receive blocks never overlap.
Costs: α per message, β per byte, m bytes in all (Σ counts), m_i rank i's.
"""
from mpi4py import MPI

from ..core.registry import register
from ._vcommon import block, child_ranks, native, span, subtotal, tree_place, unpack
from .cost import Cost, lg


def _equal_blocks(k):
    """``exact`` for the v-collectives' formulas: every block the same, nonempty."""
    if k.counts and min(k.counts) == max(k.counts) > 0:
        return None
    return "blocks of unequal or zero counts"


def _nonempty(k):
    return None if k.counts and min(k.counts) > 0 else "empty blocks send nothing"


@register("gatherv", "native")
def gatherv_native(ctx, sendbuf, recvbuf, counts, displs, root):
    """The MPI library's own ``MPI_Gatherv``."""
    if ctx.rank != root:
        native(ctx, "Gatherv", sendbuf, None, root)
        return
    native(ctx, "Gatherv", MPI.IN_PLACE if sendbuf is None else sendbuf,
           [recvbuf, (list(counts), list(displs))], root, outputs=(1,))


@register("gatherv", "linear", cost=Cost(
    "(N-1)α + (m - m_root)β", where={"m_root": lambda k: k.counts[k.root]},
    alpha=lambda k: k.N - 1, beta=lambda k: k.m - k.counts[k.root], exact=_nonempty))
def gatherv_linear(ctx, sendbuf, recvbuf, counts, displs, root):
    """Every rank sends its block straight to its place on the root (receives posted at once).

    Cost: (N-1)α + (m - m_root)β at the root; 1 step; empty blocks send
    nothing. No copies besides the root's own block. The root's link is
    the bottleneck.
    """
    rank = ctx.rank
    if rank != root:
        if counts[rank]:
            ctx.send(sendbuf, root)
        return
    reqs = [ctx.irecv(block(recvbuf, counts, displs, i), i)
            for i in range(ctx.size) if i != root and counts[i]]
    ctx.copy(block(recvbuf, counts, displs, root), sendbuf)
    ctx.waitall(reqs)


def binomial_gatherv(ctx, sendbuf, recvbuf, counts, displs, root):
    """Binomial-tree gatherv (shared with allgatherv's gatherv_bcast).

    Relative rank r collects the blocks of relative ranks [r, r + subtree)
    back to back and forwards them to its parent. The root receives each
    child's subtree straight into ``recvbuf`` when those blocks lie there
    back to back, in order; otherwise into a temporary and copies them out.
    """
    size, rank = ctx.size, ctx.rank
    rel, subtree, parent, n = tree_place(size, rank, root, counts)
    if rel == 0:
        reqs, later = [], []
        mask = 1
        while mask < size:           # child ``mask`` holds relative [mask, mask + nb)
            members = child_ranks(size, root, 0, mask)
            n = subtotal(counts, members)
            if n:
                start = span(counts, displs, members)
                if start is not None:
                    reqs.append(ctx.irecv(recvbuf[start:start + n], (mask + root) % size))
                else:
                    tmp = ctx.scratch(n)
                    reqs.append(ctx.irecv(tmp, (mask + root) % size))
                    later.append((tmp, members))
            mask <<= 1
        ctx.copy(block(recvbuf, counts, displs, root), sendbuf)
        ctx.waitall(reqs)
        for tmp, members in later:
            unpack(ctx, recvbuf, tmp, counts, displs, members)
        return
    if not n:                       # nothing in this whole subtree: no message at all
        return
    if subtree == 1:
        ctx.send(sendbuf, parent)
        return
    tmp = ctx.scratch(n)
    mine = counts[rank]
    ctx.copy(tmp[:mine], sendbuf)
    reqs = []
    off = mine
    mask = 1
    while mask < subtree:           # children rel + mask, each with min(mask, ...) ranks
        m = subtotal(counts, child_ranks(size, root, rel, mask))
        if m:
            reqs.append(ctx.irecv(tmp[off:off + m], (rel + mask + root) % size))
        off += m
        mask <<= 1
    ctx.waitall(reqs)
    ctx.send(tmp, parent)


@register("gatherv", "binomial", cost=Cost(
    "⌈log2 N⌉α + (m - m_root)β", where={"m_root": lambda k: k.counts[k.root]},
    alpha=lambda k: lg(k.N), beta=lambda k: k.m - k.counts[k.root], exact=_equal_blocks))
def gatherv_binomial(ctx, sendbuf, recvbuf, counts, displs, root):
    """Binomial tree: subtrees forward their collected blocks, back to back, up the tree.

    Cost: ⌈log2 N⌉α + (m - m_root)β at the root; ⌈log2 N⌉ steps. Inner nodes
    copy into a temporary; the root also copies a subtree out when its
    blocks do not lie back to back in ``recvbuf``. Needs every rank's count
    on every rank (the API layer exchanges them).
    """
    binomial_gatherv(ctx, sendbuf, recvbuf, counts, displs, root)
