"""allgather: every rank's block into every rank's buffer, in rank order (``MPI_Allgather``)."""
from ..args.buffers import as_array, is_in_place, recv_array, whole_blocks
from ..args.bufspec import parse_bufspec, recv_spec
from ..core.blocks import pof2_below
from ..core.rules import Auto, KiB, N, Rule, n
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_out
from .gather import GatherSpec, gathered
from .primitive import Primitive, define


def allgather(sendbuf, recvbuf=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank.

    Per rank, N = 3: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[[1 1] [2 2] [3 3]]`` everywhere.
    ``sendbuf=MPI.IN_PLACE``: this rank's block is already in ``recvbuf``.
    """
    return (sendbuf, recvbuf), ()


def run(call, bufs, algorithm):
    """The allgather implementation (every face): validate, agree, launch; the output."""
    with call.checking():
        sendbuf, recvbuf = bufs()
        n = call.size
        if is_in_place(sendbuf):
            out, dest = recv_out(recvbuf)
            c = whole_blocks("recvbuf", dest, n)
            data = dest[call.rank * c:(call.rank + 1) * c]
        else:
            data = as_array("sendbuf", sendbuf)
            out, dest = recv_array("recvbuf", recvbuf, data, n * data.size,
                                   f"{n} ranks x {data.size}", (n,) + sendbuf.shape)
        fn = call.choose(algorithm, nbytes=data.nbytes, count=data.size, dtype=data.dtype,
                         like=(data, dest))
    call.settle()
    run_call(call, data.size, data.itemsize, fn, data, dest)
    return out


def Allgather(comm, call, bnd, algorithm, sendbuf, recvbuf):
    """mpi4py's ``Allgather``: its buffer forms parsed, then :func:`run`."""
    n = comm.Get_size()

    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        return s, recv_spec("recvbuf", recvbuf, s, bnd, blocks=n)
    run(call, bufs, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Allgather's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), Len(size * count))


class AllgatherSpec(GatherSpec):
    """The bench and test spec of allgather."""

    rooted = False
    raw = "comm.Allgather(sendbuf, recvbuf)"
    native_coll = "allgather"
    nccl_method = "allGather"
    torch_fn = "all_gather_into_tensor"

    def alloc(self, c):
        """A block to send and N blocks to receive, on every rank."""
        c.send, c.recv = c.am.empty(c.block, c.dtype), c.am.empty(c.count, c.dtype)

    def args(self, c):
        """The arguments: ``(send, recv)``."""
        return (c.send, c.recv)

    def raw_call(self, c, comm):
        """``comm.Allgather(sendbuf, recvbuf)``."""
        return lambda: comm.Allgather(c.send, c.recv)

    def nccl_args(self, c, send, recv, dtype, op, stream):
        """NCCL's ``allGather(send, recv, sendcount, datatype, stream)``: one block."""
        return (send, recv, c.block, dtype, stream)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.all_gather_into_tensor(output, input)``."""
        return lambda: fn(recv, send, group=group)

    def smpi_actions(self, rank, n, nbytes, root):
        """``<rank> allgather <block> <block>``: ``nbytes`` is all N blocks."""
        b = nbytes // n
        return [f"{rank} allgather {b} {b}"]

    def mpich_choice(self, n, nbytes, itemsize):
        """Recursive doubling below 512 KiB at a power-of-two N, else Bruck to 80 KiB, or ring."""
        if n == pof2_below(n) and nbytes < 524288:
            return "rdb"
        return "bruck" if nbytes <= 81920 else "ring"


def symbolic(k):
    """The verifier's spec: block i of every recvbuf ends as rank i's input."""
    return gathered(k, rooted=False)


def soak(k):
    """The soak's case: as ``comm.Allgather``."""
    got = k.run(k.api.allgather, k.mine, None, inout=k.own_row)
    want = k.empty(k.size, k.c)
    k.comm.Allgather(k.mine, want)
    return got, want


#: auto's rule: recursive doubling's log N steps while the gathered vector is short, the ring
#: (each byte once) beyond.
AUTO = Auto(Rule("recursive_doubling", N * n < 80 * KiB), Rule("ring"), note="n: one block")

PRIMITIVE = define(Primitive("allgather", run=run, api=(allgather,), methods=(Allgather,),
                             in_place=True,
                             call_arrays=call_arrays, spec=AllgatherSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
