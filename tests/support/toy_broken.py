"""A wrong algorithm for the toy primitive (tests/support/toy_primitive.py): it never
receives its left neighbour's block. The generated matrix must catch it.
"""
import mpicoll


@mpicoll.register("allgather_twin", "skipper")
def twin_skipper(ctx, sendbuf, recvbuf):
    """Like the neighbour exchange, but the block from rank - 1 is never received.

    Cost: (N-2)(α + nβ); N-2 steps.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf)
    for s in range(2, size):
        to, frm = (rank + s) % size, (rank - s) % size
        ctx.sendrecv(recvbuf[rank * c:(rank + 1) * c], to, recvbuf[frm * c:(frm + 1) * c], frm)
