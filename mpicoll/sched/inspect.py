"""Plans without a communicator: what any rank of any algorithm would do.

``plan_of("allreduce", "ring", size=4, rank=1, count=10)`` records the plan
rank 1 of 4 runs for a 10-element allreduce — the same recording the
executors use, so the demo, the bench's cost model and the docs read the
algorithms' real schedules instead of re-deriving them.
"""
from mpi4py import MPI

from .. import coll as _coll  # noqa: F401  (fills the registry)
from ..core.blocks import offsets
from ..core.registry import EXTENDED_PRIMITIVES, lookup
from .record import record

__all__ = ["plan_of", "plans_of", "call_arrays", "call_arrays_v", "Len"]


class Len:
    """Stands for an array of ``size`` elements while a plan is recorded."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


def call_arrays(primitive, size, rank, count, root=0, counts=None, op=MPI.SUM):
    """The algorithm arguments of a call (arrays as lengths), as ``mpicoll.collectives`` passes them.

    ``count``: elements of each rank's vector (bcast, reduce, allreduce), of
    each rank's block (gather, allgather, scatter, alltoall), or the total
    (reduce_scatter, split as ``counts`` or evenly).
    """
    if primitive in EXTENDED_PRIMITIVES:
        return call_arrays_v(primitive, size, rank, count, root, counts, op)
    A = Len
    if primitive == "bcast":
        return (A(count), root)
    if primitive == "reduce":
        return (A(count), A(count) if rank == root else None, op, root)
    if primitive == "allreduce":
        return (A(count), A(count), op)
    if primitive == "gather":
        return (A(count), A(size * count) if rank == root else None, root)
    if primitive == "allgather":
        return (A(count), A(size * count))
    if primitive == "scatter":
        return (A(size * count) if rank == root else None, A(count), root)
    if primitive == "reduce_scatter":
        if counts is None:
            q, r = divmod(count, size)
            counts = [q + 1] * r + [q] * (size - r)
        return (A(sum(counts)), A(counts[rank]), list(counts), op)
    if primitive == "alltoall":
        return (A(size * count), A(size * count))
    if primitive == "barrier":
        return ()
    raise ValueError(f"primitive: unknown {primitive!r}")


def call_arrays_v(primitive, size, rank, count, root=0, counts=None, op=MPI.SUM):
    """Arguments of one call, arrays as lengths.

    ``count``: elements of each rank's block (gatherv, scatterv, allgatherv;
    the bench's equal blocks, back to back) or of the vector (scan, exscan).
    ``counts``, when given, are the per-rank block counts instead; for
    alltoallv ``counts[j]`` is what every rank sends to rank j (so rank i
    receives ``counts[i]`` from each), default ``count`` everywhere.
    """
    A = Len
    if primitive in ("scan", "exscan"):
        return (A(count), A(count), op)
    cs = [count] * size if counts is None else [int(c) for c in counts]
    at = offsets(cs)[:-1]
    total = sum(cs)
    if primitive == "gatherv":
        is_root = rank == root
        return (A(cs[rank]), A(total) if is_root else None, cs, at if is_root else None, root)
    if primitive == "scatterv":
        is_root = rank == root
        return (A(total) if is_root else None, A(cs[rank]), cs, at if is_root else None, root)
    if primitive == "allgatherv":
        return (A(cs[rank]), A(total), cs, at)
    if primitive == "alltoallv":
        rc = [cs[rank]] * size
        return (A(total), A(sum(rc)), cs, at, rc, offsets(rc)[:-1])
    raise ValueError(f"primitive: unknown {primitive!r}")


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
    return record(fn, rank, size, args, itemsize, op if primitive in
                  ("reduce", "allreduce", "reduce_scatter", "scan", "exscan") else None, layout)


def plans_of(primitive, algorithm, size, count, **kw):
    """Every rank's plan, a list indexed by rank."""
    return [plan_of(primitive, algorithm, size, r, count, **kw) for r in range(size)]
