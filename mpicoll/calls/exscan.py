"""exscan: rank i gets the reduction of ranks 0..i-1's vectors, in rank order (``MPI_Exscan``)."""
from mpi4py import MPI

from ..args.bufspec import reduction_bufs
from ..args.user_ops import wrap as wrap_user_op
from ..core.rules import Auto, Rule
from .primitive import Primitive, define
from .scan import ScanSpec, call_arrays, prefix_soak, prefixed, run


def exscan(sendbuf, recvbuf=None, op=MPI.SUM):
    """Exclusive prefix reduction: rank i gets ranks 0..i-1's ``sendbuf`` reduced with ``op``.

    Rank 0's result is undefined in MPI: its ``recvbuf`` is left as it was
    (an allocated one is uninitialised). ``sendbuf=MPI.IN_PLACE`` takes the
    input from ``recvbuf``.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> (rank 0: as it was),
    ``[1 1]``, ``[3 3]``.
    """
    return (sendbuf, recvbuf), (op,)


def Exscan(comm, call, bnd, algorithm, sendbuf, recvbuf, op=MPI.SUM):
    """mpi4py's ``Exscan``: its buffer forms parsed, then :func:`run`."""
    op = wrap_user_op(op, comm)      # a user op over a derived datatype: see args.user_ops
    # Rank 0's recvbuf is left as it was (MPI leaves it undefined): read it too, so that a
    # derived datatype's unpack writes back what was there.
    run(call, lambda: reduction_bufs(bnd, sendbuf, recvbuf, op, True), op, algorithm)


class ExscanSpec(ScanSpec):
    """The bench and test spec of exscan."""

    raw = "comm.Exscan(sendbuf, recvbuf, op)"
    native_coll = "exscan"

    def io(self, c):
        """The input, and the output except on rank 0 (MPI leaves rank 0's undefined)."""
        # Rank 0's result is undefined in MPI: not checked (it keeps the sentinel).
        return c.send, (c.recv if c.rank else None)

    def output_fn(self, c):
        """The reduction over ranks 0 .. this rank - 1."""
        return lambda g: c.red_expected(g, c.rank)

    def raw_call(self, c, comm):
        """``comm.Exscan(sendbuf, recvbuf, op)``."""
        return lambda: comm.Exscan(c.send, c.recv, c.op)


def symbolic(k):
    """The verifier's spec: rank r's recvbuf ends as ranks 0..r-1's reduced; rank 0's kept."""
    return prefixed(k, exclusive=True)


def soak(k):
    """The soak's case: as ``comm.Exscan``; rank 0's result (undefined) not compared."""
    got, want = prefix_soak(k, k.api.exscan, k.comm.Exscan)
    return k.nothing() if k.rank == 0 else (got, want)


#: auto's rule: MPICH's only algorithm; log N latency, any op.
AUTO = Auto(Rule("recursive_doubling"))

PRIMITIVE = define(Primitive("exscan", run=run, api=(exscan,), methods=(Exscan,),
                             count_kind="vector", in_place=True,
                             call_arrays=call_arrays, spec=ExscanSpec(), reduces=True,
                             auto=AUTO, symbolic=symbolic, soak=soak))
