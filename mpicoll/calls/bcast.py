"""bcast: the root's buffer into every rank's (``MPI_Bcast``)."""
from mpi4py import MPI

from ..args.buffers import as_array, check_root
from ..args.bufspec import is_rank, missing, parse_bufspec
from ..core.rules import Auto, KiB, N, Rule, n
from ..engine.launch import run_call
from ..sched.inspect import Len
from .primitive import Primitive, define
from .spec import Spec, blocks_data


def bcast(buf, root=0):
    """Broadcast ``buf`` from ``root`` into ``buf`` on every rank; return ``buf``.

    Per rank, N = 3: ``[1 2 3]`` on rank 0 and zeros elsewhere -> ``[1 2 3]`` everywhere.
    """
    return (buf,), (root,)


def run(call, bufs, root, algorithm):
    """The bcast implementation (every face): validate, agree, launch; the buffer."""
    with call.checking():
        (buf,) = bufs()
        root = check_root(root, call.size)
        flat = as_array("buf", buf, writable=call.rank != root)
        fn = call.choose(algorithm, nbytes=flat.nbytes, count=flat.size, dtype=flat.dtype,
                         root=root, like=(flat,))
    call.settle()
    run_call(call, flat.size, flat.itemsize, fn, flat, root)
    return buf


def Bcast(comm, call, bnd, algorithm, buf, root=0):
    """mpi4py's ``Bcast``: its buffer forms parsed, then :func:`run`."""
    def bufs():
        role = "send" if is_rank(root, comm.Get_rank()) else "recv"
        b = parse_bufspec("buf", buf, bnd=bnd, role=role)
        if b is MPI.IN_PLACE:
            raise missing("buf", buf)
        return (b,)
    run(call, bufs, root, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Bcast's algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), root)


class BcastSpec(Spec):
    """The bench and test spec of bcast."""

    rooted = True
    raw = "comm.Bcast(buf, root)"
    native_coll = "bcast"
    nccl_method = "bcast"
    torch_fn = "broadcast"

    def busbw(self, n):
        """nccl-tests' factor: 1."""
        return 1.0

    def alloc(self, c):
        """One vector on every rank."""
        c.recv = c.am.empty(c.count, c.dtype)

    def io(self, c):
        """The root's vector is the input; every rank's is the output."""
        return (c.recv if c.rank == c.root else None), c.recv

    def input_fn(self, c):
        """The root's data (also every rank's expected output)."""
        return lambda g: blocks_data(c.root, g, c.dtype)

    output_fn = input_fn

    def args(self, c):
        """The arguments: ``(buf, root)``."""
        return (c.recv, c.root)

    def raw_call(self, c, comm):
        """``comm.Bcast(buf, root)``."""
        return lambda: comm.Bcast(c.recv, c.root)

    def nccl_args(self, c, send, recv, dtype, op, stream):
        """NCCL's ``bcast(buf, count, datatype, root, stream)``: the whole vector."""
        return (recv, c.count, dtype, c.root, stream)

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.broadcast(buf, src=root)``."""
        return lambda: fn(recv, src=c.root, group=group)

    def smpi_actions(self, rank, n, nbytes, root):
        """``<rank> bcast <bytes> <root>``."""
        return [f"{rank} bcast {nbytes} {root}"]

    def mpich_choice(self, n, nbytes, itemsize):
        """A binomial tree below 12 KiB or at N <= 8, else scatter then allgather.

        The allgather by recursive doubling below 512 KiB at an even N, else by the ring.
        """
        if nbytes < 12288 or n <= 8:
            return "binomial_tree"
        return "scatter_rdb_allgather" if nbytes < 524288 and n % 2 == 0 else \
            "scatter_LR_allgather"


def symbolic(k):
    """The verifier's spec: every rank's buffer ends as the root's input."""
    want = k.mode.inp(k.root, k.ar(k.n))
    return [k.Rank((k.Len(k.n), k.root), [want], [want], ["in"]) if r == k.root
            else k.Rank((k.Len(k.n), k.root), [k.mode.orig(k.n)], [want], ["out"])
            for r in range(k.N)]


def soak(k):
    """The soak's case: the root's vector, as ``comm.Bcast`` leaves it."""
    got = k.api.bcast(k.mine.copy() if k.is_root else k.zeros(k.c), k.root, **k.kw)
    want = k.mine.copy()
    k.comm.Bcast(want, k.root)
    return got, want


#: auto's rule: the binomial tree's log N latency for short messages and few ranks, MPICH's
#: scatter then ring allgather (bandwidth) beyond.
AUTO = Auto(Rule("binomial", (n < 12 * KiB) | (N < 8)), Rule("scatter_allgather"))

PRIMITIVE = define(Primitive("bcast", run=run, api=(bcast,), methods=(Bcast,),
                             count_kind="vector",
                             call_arrays=call_arrays, spec=BcastSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
