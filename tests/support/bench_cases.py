"""The bench's check cases of every rank of a job, made in one process (serial tests)."""
from mpi4py import MPI

from mpicoll.bench import specs


class OneRank:
    """What a bench case reads of its communicator: the job's size and its rank."""

    def __init__(self, n, rank):
        self.n, self.rank = n, rank

    def Get_size(self):
        return self.n

    def Get_rank(self):
        return self.rank


def every_rank(prim, n, nbytes, dtype, opname, root=0):
    """``prim``'s :class:`mpicoll.bench.specs.Case` on each of ``n`` ranks, NumPy arrays."""
    am = specs.ArrayModule("numpy")
    op = getattr(MPI, opname.upper())
    return [specs.Case(specs.SPECS[prim], nbytes, dtype=dtype, op=op, opname=opname, root=root,
                       comm=OneRank(n, r), am=am) for r in range(n)]
