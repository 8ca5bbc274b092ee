"""scan: rank i gets the reduction of ranks 0..i's vectors, in rank order (``MPI_Scan``)."""
from mpi4py import MPI

from ..args.bufspec import reduction_bufs
from ..args.user_ops import wrap as wrap_user_op
from ..core.rules import Auto, Rule
from ..sched.inspect import Len
from .allreduce import AllreduceSpec
from .allreduce import run as allreduce_run
from .primitive import Primitive, define


def scan(sendbuf, recvbuf=None, op=MPI.SUM):
    """Inclusive prefix reduction: rank i gets ranks 0..i's ``sendbuf`` reduced with ``op``.

    Any op, in rank order. ``sendbuf=MPI.IN_PLACE`` reduces ``recvbuf`` in place.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[1 1]``, ``[3 3]``, ``[6 6]``.
    """
    return (sendbuf, recvbuf), (op,)


def run(call, bufs, op, algorithm):
    """Scan and exscan (``call.primitive`` says which): one vector in, one out, an op.

    Validated exactly as allreduce is, so the allreduce implementation serves.
    """
    return allreduce_run(call, bufs, op, algorithm)


def Scan(comm, call, bnd, algorithm, sendbuf, recvbuf, op=MPI.SUM):
    """mpi4py's ``Scan``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops
    run(call, lambda: reduction_bufs(bnd, sendbuf, recvbuf, op, False), op, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=MPI.SUM):
    """Scan's (and exscan's) algorithm arguments on ``rank``, arrays as lengths (``Len``)."""
    return (Len(count), Len(count), op)


class ScanSpec(AllreduceSpec):
    """The bench and test spec of scan."""

    raw = "comm.Scan(sendbuf, recvbuf, op)"
    native_coll = "scan"

    def busbw(self, n):
        """nccl-tests' factor, as reduce's: 1."""
        return 1.0

    def output_fn(self, c):
        """The reduction over ranks 0 .. this rank."""
        return lambda g: c.red_expected(g, c.rank + 1)

    def raw_call(self, c, comm):
        """``comm.Scan(sendbuf, recvbuf, op)``."""
        return lambda: comm.Scan(c.send, c.recv, c.op)


def prefixed(k, exclusive):
    """Scan's and exscan's spec: rank r ends with ranks 0..r (exclusive: 0..r-1) reduced."""
    pre = list(k.mode.prefixes(k.N, k.ar(k.n)))
    ranks = []
    for r in range(k.N):
        x = k.mode.inp(r, k.ar(k.n))
        if not exclusive:
            want = pre[r]
        else:
            want = None if r == 0 else pre[r - 1]      # exscan's rank 0 keeps its recvbuf
        if k.inplace:
            ranks.append(k.Rank((None, k.Len(k.n), k.op), [x], [x if want is None else want],
                                ["inout"]))
        else:
            o = k.mode.orig(k.n)
            ranks.append(k.Rank((k.Len(k.n), k.Len(k.n), k.op), [x, o],
                                [x, o if want is None else want], ["in", "out"]))
    return ranks


def symbolic(k):
    """The verifier's spec: rank r's recvbuf ends as ranks 0..r's inputs reduced."""
    return prefixed(k, exclusive=False)


def prefix_soak(k, fn, native):
    """Scan's and exscan's soak case: ``fn`` (mpicoll's) as ``native`` (mpi4py's)."""
    want = k.zeros(k.c)
    native(k.mine, want, k.op)
    return k.run(fn, k.mine, k.zeros(k.c), k.op), want


def soak(k):
    """The soak's case: as ``comm.Scan``."""
    return prefix_soak(k, k.api.scan, k.comm.Scan)


#: auto's rule: MPICH's only algorithm; log N latency, any op.
AUTO = Auto(Rule("recursive_doubling"))

PRIMITIVE = define(Primitive("scan", run=run, api=(scan,), methods=(Scan,),
                             count_kind="vector", in_place=True,
                             call_arrays=call_arrays, spec=ScanSpec(), reduces=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
