"""allreduce: every rank gets the reduction of every rank's sendbuf (``MPI_Allreduce``)."""
from mpi4py import MPI

from ..args.buffers import is_in_place
from ..args.bufspec import parse_bufspec, recv_spec
from ..args.user_ops import wrap as wrap_user_op
from ..core.blocks import pof2_below
from ..core.ops import check_op
from ..core.rules import SHORT, Auto, Rule, n, non_commutative
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_as_send, recv_out
from .primitive import Primitive, define
from .reduce import ReduceSpec
from .spec import in_place_torch


def allreduce(sendbuf, recvbuf=None, op=MPI.SUM):
    """Reduce every rank's ``sendbuf`` with ``op``; every rank gets the result.

    Results are bitwise identical on every rank. ``sendbuf=MPI.IN_PLACE``
    reduces ``recvbuf`` in place.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[6 6]`` everywhere.
    """
    return (sendbuf, recvbuf), (op,)


def run(call, bufs, op, algorithm):
    """The allreduce implementation (every face): validate, agree, launch; the output."""
    with call.checking():
        sendbuf, recvbuf = bufs()
        if is_in_place(sendbuf):
            out, dest = recv_out(recvbuf)
            data = None
        else:
            data, out, dest = recv_as_send(sendbuf, recvbuf)
        check_op(op, dest.dtype)
        fn = call.choose(algorithm, op=op, nbytes=dest.nbytes, count=dest.size,
                         dtype=dest.dtype, like=(data, dest))
    call.settle()
    run_call(call, dest.size, dest.itemsize, fn, data, dest, op)
    return out


def Allreduce(comm, call, bnd, algorithm, sendbuf, recvbuf, op=MPI.SUM):
    """mpi4py's ``Allreduce``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops

    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        r = recv_spec("recvbuf", recvbuf, s, bnd)
        return bnd.reduction(op, s, r)
    run(call, bufs, op, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=MPI.SUM):
    """Allreduce's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), Len(count), op)


class AllreduceSpec(ReduceSpec):
    """The bench and test spec of allreduce."""

    rooted = False
    raw = "comm.Allreduce(sendbuf, recvbuf, op)"
    native_coll = "allreduce"
    nccl_method = "allReduce"
    torch_fn = "all_reduce"

    def busbw(self, n):
        """nccl-tests' factor: 2 (n - 1) / n."""
        return 2.0 * (n - 1) / n

    def alloc(self, c):
        """A vector to send and one to receive, on every rank."""
        c.send, c.recv = c.am.empty(c.count, c.dtype), c.am.empty(c.count, c.dtype)

    def args(self, c):
        """The arguments: ``(send, recv, op)``."""
        return (c.send, c.recv, c.op)

    def raw_call(self, c, comm):
        """``comm.Allreduce(sendbuf, recvbuf, op)``."""
        return lambda: comm.Allreduce(c.send, c.recv, c.op)

    def nccl_args(self, c, send, recv, dtype, op, stream):
        """NCCL's ``allReduce(send, recv, count, datatype, op, stream)``: the whole vector."""
        return (send, recv, c.count, dtype, op, stream)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.all_reduce(tensor, op)``, in place: on a copy of the input."""
        return in_place_torch(fn, send, recv, op=op, group=group)     # all_reduce is in place

    def smpi_actions(self, rank, n, nbytes, root):
        """``<rank> allreduce <bytes> 0``: the whole vector."""
        return [f"{rank} allreduce {nbytes} 0"]

    def mpich_choice(self, n, nbytes, itemsize):
        """Rabenseifner past 2 KiB with an element per power-of-two rank, else rec. doubling."""
        return "rab_rdb" if nbytes > 2048 and nbytes // itemsize >= pof2_below(n) else "rdb"


def symbolic(k):
    """The verifier's spec: every recvbuf ends as all ranks' inputs reduced, in rank order."""
    n = k.n
    full = k.mode.reduction(0, k.N, k.ar(n))
    ranks = []
    for r in range(k.N):
        x = k.mode.inp(r, k.ar(n))
        if k.inplace:
            ranks.append(k.Rank((None, k.Len(n), k.op), [x], [full], ["inout"]))
        else:
            ranks.append(k.Rank((k.Len(n), k.Len(n), k.op), [x, k.mode.orig(n)], [x, full],
                                ["in", "out"]))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Allreduce``."""
    got = k.run(k.api.allreduce, k.mine, None, k.op)
    want = k.empty(k.c)
    k.comm.Allreduce(k.mine, want, k.op)
    return got, want


#: auto's rule (after the shm step, mpicoll.core.defaults.SHM_FROM): recursive doubling's
#: log N latency for short vectors and for ops that must keep rank order, the ring beyond.
AUTO = Auto(Rule("recursive_doubling", (n <= SHORT) | non_commutative), Rule("ring"))

PRIMITIVE = define(Primitive("allreduce", run=run, api=(allreduce,), methods=(Allreduce,),
                             count_kind="vector", in_place=True,
                             call_arrays=call_arrays, spec=AllreduceSpec(), reduces=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
