"""reduce: every rank's sendbuf reduced with an op into the root's recvbuf (``MPI_Reduce``)."""
from mpi4py import MPI

from ..args.buffers import as_array, is_in_place, not_in_place
from ..args.bufspec import is_rank, parse_bufspec, recv_spec
from ..args.user_ops import wrap as wrap_user_op
from ..core.blocks import pof2_below
from ..core.ops import check_op
from ..core.rules import POF2, SHORT, Auto, N, Rule, commutative, count, n
from ..engine.launch import run_call
from ..sched.inspect import Len
from ._common import recv_as_send, recv_out, rooted, snapshot_if
from .primitive import Primitive, define
from .spec import Spec, in_place_torch


def reduce(sendbuf, recvbuf=None, op=MPI.SUM, root=0):
    """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` on ``root``.

    Returns the result on the root, None elsewhere. ``sendbuf=MPI.IN_PLACE``
    on the root takes its input from ``recvbuf``.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> root gets ``[6 6]``.
    """
    return (sendbuf, recvbuf), (op, root)


def run(call, bufs, op, root, algorithm):
    """The reduce implementation (every face): validate, agree, launch; the output on the root."""
    with call.checking():
        root, is_root, sendbuf, recvbuf = rooted(call, bufs, root)
        if is_in_place(sendbuf):
            if not is_root:
                raise not_in_place("sendbuf", "on the root")
            out, data = recv_out(recvbuf)
            dest = data
        elif is_root:
            data, out, dest = recv_as_send(sendbuf, recvbuf)
        else:
            data, out, dest = as_array("sendbuf", sendbuf), None, None
        check_op(op, data.dtype)
        fn = call.choose(algorithm, op=op, nbytes=data.nbytes, count=data.size,
                         dtype=data.dtype, root=root, like=(data, dest))
    call.settle()
    # in place: algorithms may write recvbuf before reading sendbuf
    data, pro = snapshot_if(is_in_place(sendbuf), data)
    run_call(call, data.size, data.itemsize, fn, data, dest, op, root, prologue=pro)
    return out if is_root else None


def Reduce(comm, call, bnd, algorithm, sendbuf, recvbuf, op=MPI.SUM, root=0):
    """mpi4py's ``Reduce``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops

    def bufs():
        s = parse_bufspec("sendbuf", sendbuf, bnd=bnd)
        r = None
        if is_rank(root, comm.Get_rank()):     # elsewhere recvbuf is not looked at (mpi4py)
            r = recv_spec("recvbuf", recvbuf, s, bnd)
        return bnd.reduction(op, s, r)
    run(call, bufs, op, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=MPI.SUM):
    """Reduce's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), Len(count) if rank == root else None, op, root)


class ReduceSpec(Spec):
    """The bench and test spec of reduce."""

    rooted = reduces = True
    raw = "comm.Reduce(sendbuf, recvbuf, op, root)"
    native_coll = "reduce"
    nccl_method = "reduce"
    torch_fn = "reduce"

    def busbw(self, n):
        """nccl-tests' factor: 1."""
        return 1.0

    def alloc(self, c):
        """A vector to send on every rank; one to receive on the root."""
        c.send = c.am.empty(c.count, c.dtype)
        c.recv = c.am.empty_on(c.rank == c.root, c.count, c.dtype)

    def input_fn(self, c):
        """The case's reduction input (``c.red_input``)."""
        return c.red_input

    def output_fn(self, c):
        """The reduction over every rank (``c.red_expected``)."""
        return c.red_expected

    def args(self, c):
        """The arguments: ``(send, recv, op, root)``."""
        return (c.send, c.recv, c.op, c.root)

    def raw_call(self, c, comm):
        """``comm.Reduce(sendbuf, recvbuf, op, root)``: recvbuf is None off the root."""
        return lambda: comm.Reduce(c.send, c.recv, c.op, c.root)

    def nccl_args(self, c, send, recv, dtype, op, stream):
        """NCCL's ``reduce(send, recv, count, datatype, op, root, stream)``: the whole vector."""
        return (send, recv, c.count, dtype, op, c.root, stream)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.reduce(tensor, dst=root, op)``, in place: on a copy of the input."""
        # reduce is in place: the input is copied into the output, off the root into
        # scratch (gloo leaves scratch values in the tensor there)
        target = recv if recv is not None else send.new_empty(send.shape)
        return in_place_torch(fn, send, target, dst=c.root, op=op, group=group)

    def smpi_actions(self, rank, n, nbytes, root):
        """``<rank> reduce <bytes> 0 <root>``: the whole vector."""
        return [f"{rank} reduce {nbytes} 0 {root}"]

    def mpich_choice(self, n, nbytes, itemsize):
        """Binomial below 2 KiB or one element per power-of-two rank, else scatter then gather."""
        small = nbytes // itemsize < pof2_below(n) or nbytes < 2048
        return "binomial" if small else "scatter_gather"


def symbolic(k):
    """The verifier's spec: the root's recvbuf ends as all ranks' inputs reduced, in rank order."""
    n = k.n
    full = k.mode.reduction(0, k.N, k.ar(n))
    ranks = []
    for r in range(k.N):
        x = k.mode.inp(r, k.ar(n))
        if r == k.root:
            ranks.append(k.Rank((k.Len(n), k.Len(n), k.op, k.root), [x, k.mode.orig(n)],
                                [x, full], ["in", "out"]))
        else:
            ranks.append(k.Rank((k.Len(n), None, k.op, k.root), [x], [x], ["in"]))
    return ranks


def soak(k):
    """The soak's case: as ``comm.Reduce``; nothing returned off the root."""
    got = k.run(k.api.reduce, k.mine, None, k.op, k.root, in_place=k.in_place and k.is_root)
    want = k.empty(k.c) if k.is_root else None
    k.comm.Reduce(k.mine, want, k.op, k.root)
    return k.rooted(got, want, "reduce")


#: auto's rule: Rabenseifner (reduce-scatter then gather) for long vectors with at least one
#: element per power-of-two rank; it combines out of rank order, so commutative ops only.
AUTO = Auto(Rule("rabenseifner", commutative & (n >= SHORT) & (count >= POF2) & (N > 1)),
            Rule("binomial"))

PRIMITIVE = define(Primitive("reduce", run=run, api=(reduce,), methods=(Reduce,),
                             count_kind="vector",
                             call_arrays=call_arrays, spec=ReduceSpec(), reduces=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
