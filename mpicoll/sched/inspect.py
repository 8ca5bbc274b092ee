"""Plans without a communicator: what any rank of any algorithm would do.

``plan_of("allreduce", "ring", size=4, rank=1, count=10)`` records the plan
rank 1 of 4 runs for a 10-element allreduce — the same recording the
executors use, so the demo, the bench's cost model and the docs read the
algorithms' real schedules instead of re-deriving them.
"""
from mpi4py import MPI

from ..core.registry import info, lookup
from .record import record

__all__ = ["plan_of", "plans_of", "call_arrays", "call_arrays_v", "Len"]


class Len:
    """Stands for an array of ``size`` elements while a plan is recorded."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


def call_arrays(primitive, size, rank, count, root=0, counts=None, op=MPI.SUM):
    """The algorithm arguments of a call on ``rank`` (arrays as :class:`Len`).

    As the primitive's implementation passes them (its ``call_arrays``,
    :mod:`mpicoll.calls`).

    ``count``: elements of each rank's vector (bcast, reduce, allreduce, scan,
    exscan), of each rank's block (gather, allgather, scatter, alltoall and the
    v-collectives, whose ``counts``, when given, are the per-rank blocks instead;
    for alltoallv ``counts[j]`` is what every rank sends to rank j), or the total
    (reduce_scatter, split as ``counts`` or evenly).
    """
    return info(primitive).call_arrays(size, rank, count, root, counts, op)


#: The same, for the vector collectives and the scans (one function serves all).
call_arrays_v = call_arrays


def plan_of(primitive, algorithm, size, rank, count, itemsize=8, root=0, op=MPI.SUM,
            counts=None, layout=None):
    """The :class:`~mpicoll.sched.plan.Plan` of ``rank`` (of ``size``) for one call.

    ``layout``: a :class:`mpicoll.core.topology.Layout` of ``size`` ranks for node-aware
    algorithms (default: one node).
    """
    if algorithm == "native":
        raise ValueError("native: the MPI library's own collective has no mpicoll plan")
    fn = lookup(primitive, algorithm)
    args = call_arrays(primitive, size, rank, count, root, counts, op)
    return record(fn, rank, size, args, itemsize, op if info(primitive).reduces else None,
                  layout)


def plans_of(primitive, algorithm, size, count, **kw):
    """Every rank's plan, a list indexed by rank."""
    return [plan_of(primitive, algorithm, size, r, count, **kw) for r in range(size)]
