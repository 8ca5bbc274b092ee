"""Alltoallv: rank i's send block j (``sendcounts[j]`` at ``sdispls[j]``) is rank j's block i.

Per rank, N = 2, sendcounts rank 0 [1, 2], rank 1 [0, 1] (so recvcounts
rank 0 [1, 0], rank 1 [2, 1]), packed displacements::

    sendbuf: rank 0 [a0 b0 b0]   rank 1 [c1]
    recvbuf: rank 0 [a0]         rank 1 [b0 b0 c1]

Algorithms take ``(ctx, sendbuf, recvbuf, sendcounts, sdispls, recvcounts,
rdispls)``, all of them this rank's own: rank i's ``sendcounts[j]`` equals
rank j's ``recvcounts[i]`` (MPI's rule). In place, the API layer hands the
algorithms a snapshot of ``recvbuf`` as ``sendbuf``.
Costs: α per message, β per byte, s and r the bytes this rank sends to and
receives from the other ranks, b the largest block.
"""
from ..core.registry import register
from ._vcommon import block, exchange, native
from .cost import Cost


def _equal(k):
    """``exact``: every block the same, nonempty."""
    flat = [c for row in k.counts for c in row]
    return None if min(flat) == max(flat) > 0 else "blocks of unequal or zero counts"


def _block(k):
    return max(c for row in k.counts for c in row)


@register("alltoallv", "native")
def alltoallv_native(ctx, sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls):
    """The MPI library's own ``MPI_Alltoallv``."""
    native(ctx, "Alltoallv", [sendbuf, (list(sendcounts), list(sdispls))],
           [recvbuf, (list(recvcounts), list(rdispls))], outputs=(1,))


@register("alltoallv", "pairwise", cost=Cost(
    "(N-1)α + (N-1)·b·β", where={"b": _block}, alpha=lambda k: k.N - 1,
    beta=lambda k: (k.N - 1) * _block(k), exact=_equal))
def alltoallv_pairwise(ctx, sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls):
    """Pairwise exchange: in step i, send to rank + i and receive from rank - i.

    Cost: (N-1)α + (N-1)·b·β (each step as long as its largest block);
    N-1 steps, empty blocks skipped. One message in flight per direction:
    no flooding at large N; long blocks.
    """
    size, rank = ctx.size, ctx.rank
    ctx.copy(block(recvbuf, recvcounts, rdispls, rank), block(sendbuf, sendcounts, sdispls, rank))
    for i in range(1, size):
        dst, src = (rank + i) % size, (rank - i) % size
        exchange(ctx, block(sendbuf, sendcounts, sdispls, dst), dst,
                 block(recvbuf, recvcounts, rdispls, src), src)


@register("alltoallv", "linear", cost=Cost(
    "(N-1)α + max(s, r)β", where={"s": lambda k: (k.N - 1) * _block(k),
                                  "r": lambda k: (k.N - 1) * _block(k)},
    alpha=lambda k: k.N - 1, beta=lambda k: (k.N - 1) * _block(k),
    # every rank posts its N-1 receives and N-1 sends apart (no sendrecv)
    msgs=lambda k: 2 * (k.N - 1), elems=lambda k: 2 * (k.N - 1) * _block(k), exact=_equal))
def alltoallv_linear(ctx, sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls):
    """Every receive and every send posted at once, then one wait (MPICH's "scattered").

    Cost: (N-1)α + max(s, r)β; 1 step, empty blocks skipped. Lowest latency;
    at large N all ranks flood the network at once. Peers are taken in the
    order rank + 1, rank + 2, ... so that no rank is everyone's first target.
    """
    size, rank = ctx.size, ctx.rank
    reqs = []
    for i in range(1, size):
        src = (rank - i) % size
        if recvcounts[src]:
            reqs.append(ctx.irecv(block(recvbuf, recvcounts, rdispls, src), src))
    for i in range(1, size):
        dst = (rank + i) % size
        if sendcounts[dst]:
            reqs.append(ctx.isend(block(sendbuf, sendcounts, sdispls, dst), dst))
    ctx.copy(block(recvbuf, recvcounts, rdispls, rank), block(sendbuf, sendcounts, sdispls, rank))
    ctx.waitall(reqs)
