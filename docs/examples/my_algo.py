"""A plug-in algorithm: allreduce through rank 0 (the contributor's guide's example).

Load it with ``--import docs/examples/my_algo.py`` (demo, bench) or import it
before the first call; then ``mpicoll.allreduce(x, algorithm="star")``.
"""
from mpicoll import register


@register("allreduce", "star")
def allreduce_star(ctx, sendbuf, recvbuf, op):
    """Star: every rank sends its vector to rank 0, which reduces in rank order and sends back.

    Cost: 2(N-1)(α + nβ) + (N-1)nγ at rank 0; 2(N-1) steps there. Any op (rank
    order kept); rank 0 is the bottleneck.
    """
    ctx.copy(recvbuf, sendbuf)                  # nothing when in place (sendbuf is None)
    if ctx.rank == 0:
        tmp = ctx.scratch(recvbuf.size)
        for r in range(1, ctx.size):
            ctx.recv(tmp, r)
            # ranks 0..r-1 come first; a user op writes its second operand, so copy back
            ctx.copy(recvbuf, ctx.reduce(recvbuf, tmp, recvbuf))
        for r in range(1, ctx.size):
            ctx.send(recvbuf, r)
    else:
        ctx.send(recvbuf, 0)
        ctx.recv(recvbuf, 0)
