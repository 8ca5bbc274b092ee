"""What the block collectives' runs share: the root checked, the receive buffer, the input."""
from mpi4py import MPI

from ..args.buffers import as_array, check_root, recv_array, snapshot
from ..core.errors import ArgumentError

__all__ = ["rooted", "recv_out", "recv_as_send", "recv_block", "snapshot_if"]


def rooted(call, bufs, root):
    """A rooted call's first checks: (root checked, whether this rank is it, the buffers)."""
    root = check_root(root, call.size)
    return (root, call.rank == root, *bufs())


def recv_out(recvbuf):
    """``recvbuf`` as the call's output, and its writable array."""
    return recvbuf, as_array("recvbuf", recvbuf, writable=True)


def recv_as_send(sendbuf, recvbuf):
    """(sendbuf's array, output, recvbuf's array): recvbuf as large as sendbuf, or allocated."""
    data = as_array("sendbuf", sendbuf)
    out, dest = recv_array("recvbuf", recvbuf, data, data.size, "as many as sendbuf",
                           sendbuf.shape)
    return data, out, dest


def recv_block(recvbuf, why):
    """A scattering call's own recvbuf: (output, writable array); None refused (``why``)."""
    if recvbuf is None:
        raise ArgumentError(
            f"recvbuf: expected an array to receive this rank's block ({why}); got None",
            MPI.ERR_BUFFER)
    return recv_out(recvbuf)


def snapshot_if(in_place, data):
    """(input, prologue): in place, a snapshot of ``data`` and its refresh; else (data, None)."""
    return snapshot(data) if in_place else (data, None)
