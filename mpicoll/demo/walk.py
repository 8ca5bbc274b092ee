"""The demo's walk through the seed: each primitive on its data, per rank, checked against native.

Every ``walk_*`` function runs on every rank and returns a :class:`Step`:
this rank's "Before"/"After" lines (None where the seed prints nothing),
lines rank 0 prints first, the recorded traffic and the problems found when
comparing with the MPI library's own collective on the same data.

``dev`` puts the data where the collective runs: the identity for host
arrays, ``cupy.asarray`` with ``--device gpu``. The reference collective always
runs on a host copy of the same data (a CUDA-unaware MPI must never see a
device pointer), and results are compared on the host.
"""
import numpy as np
from mpi4py import MPI

from .. import api as V
from .. import distributed as dist
from ..engine.context import traffic
from .output import fmt, fmt_list, host, same

__all__ = ["Step", "WALKS", "SEED_NAMES", "TITLES"]

#: The seed's word for each primitive in its printed lines.
SEED_NAMES = {"bcast": "broadcast", "reduce": "reduce", "allreduce": "all_reduce",
              "gather": "gather", "allgather": "all_gather", "scatter": "scatter",
              "reduce_scatter": "ReduceScatter"}

TITLES = {
    "bcast": "broadcast: rank {root}'s [1 .. K] to every rank (dist.broadcast)",
    "reduce": "reduce: sum of [rank+1]*K lands on rank {root} (dist.reduce, SUM)",
    "allreduce": "all_reduce: sum of [rank+1]*K on every rank (dist.all_reduce, SUM)",
    "gather": "gather: every rank's [rank+1]*K into a list on rank {root} (dist.gather)",
    "allgather": "all_gather: every rank's [rank+1]*K into a list on every rank (dist.all_gather)",
    "scatter": "scatter: rank {root}'s list [[i+1]*K for i] to rank i (dist.scatter)",
    "reduce_scatter": "reduce_scatter: the seed's powers; rank j gets the sum of everyone's "
                      "j-th tensor (dist.reduce_scatter, SUM)",
    "scan": "scan: prefix sums; rank r gets the sum of [i+1]*K over ranks i <= r "
            "(mpicoll.scan, SUM; torch.distributed has no scan)",
}


class Step:
    """What one rank saw in one walkthrough call."""

    __slots__ = ("before", "after", "lead", "traffic", "problems")

    def __init__(self):
        self.before = self.after = None
        self.lead = []
        self.traffic = None
        self.problems = []


def _check(step, got, want, what):
    if not same(got, want):
        step.problems.append(f"{what}: got {fmt(got)}, native MPI gives {fmt(want)}")


def _on_host(a):
    """``dev`` of a host run: the data stays the NumPy array it is."""
    return a


def _stack(arrays):
    return np.stack([host(a) for a in arrays])


def _run(step, fn, *args, **kwargs):
    with traffic() as t:
        fn(*args, **kwargs)
    step.traffic = t.calls


def walk_bcast(comm, k, dtype, root, dev=_on_host):
    s, rank, name = Step(), comm.Get_rank(), SEED_NAMES["bcast"]
    tensor = dev(np.arange(1, k + 1, dtype=dtype) if rank == root else np.zeros(k, dtype=dtype))
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = host(tensor).copy()
    comm.Bcast(ref, root)
    _run(s, dist.broadcast, tensor, src=root)
    s.after = f"After {name} on rank {rank}: {fmt(tensor)}"
    _check(s, tensor, ref, "broadcast")
    return s


def _ones(rank, k, dtype):
    return np.array([rank + 1] * k, dtype=dtype)


def walk_reduce(comm, k, dtype, root, dev=_on_host):
    s, rank, name = Step(), comm.Get_rank(), SEED_NAMES["reduce"]
    mine = _ones(rank, k, dtype)
    tensor = dev(mine.copy())
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = np.zeros_like(mine)
    comm.Reduce(mine, ref, MPI.SUM, root)
    _run(s, dist.reduce, tensor, dst=root, op=dist.ReduceOp.SUM)
    s.after = f"After {name} on rank {rank}: {fmt(tensor)}"
    # The seed: only the dst rank's tensor changes.
    _check(s, tensor, ref if rank == root else mine, "reduce")
    return s


def walk_allreduce(comm, k, dtype, root, dev=_on_host):
    s, rank, name = Step(), comm.Get_rank(), SEED_NAMES["allreduce"]
    mine = _ones(rank, k, dtype)
    tensor = dev(mine.copy())
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = np.zeros_like(mine)
    comm.Allreduce(mine, ref, MPI.SUM)
    _run(s, dist.all_reduce, tensor, op=dist.ReduceOp.SUM)
    s.after = f"After {name} on rank {rank}: {fmt(tensor)}"
    _check(s, tensor, ref, "all_reduce")
    return s


def walk_gather(comm, k, dtype, root, dev=_on_host):
    s, rank, n, name = Step(), comm.Get_rank(), comm.Get_size(), SEED_NAMES["gather"]
    mine = _ones(rank, k, dtype)
    tensor = dev(mine.copy())
    gather_list = [dev(np.zeros(k, dtype=dtype)) for _ in range(n)] if rank == root else None
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = np.zeros((n, k), dtype=dtype) if rank == root else None
    comm.Gather(mine, ref, root)
    _run(s, dist.gather, tensor, gather_list, dst=root)
    if rank == root:                  # the seed prints the list on the dst rank only
        s.after = f"After {name} on rank {rank}: {fmt_list(gather_list)}"
        _check(s, _stack(gather_list), ref, "gather")
    return s


def walk_allgather(comm, k, dtype, root, dev=_on_host):
    s, rank, n, name = Step(), comm.Get_rank(), comm.Get_size(), SEED_NAMES["allgather"]
    mine = _ones(rank, k, dtype)
    tensor = dev(mine.copy())
    gather_list = [dev(np.zeros(k, dtype=dtype)) for _ in range(n)]
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = np.zeros((n, k), dtype=dtype)
    comm.Allgather(mine, ref)
    _run(s, dist.all_gather, gather_list, tensor)
    s.after = f"After {name} on rank {rank}: {fmt_list(gather_list)}"
    _check(s, _stack(gather_list), ref, "all_gather")
    return s


def walk_scatter(comm, k, dtype, root, dev=_on_host):
    s, rank, n, name = Step(), comm.Get_rank(), comm.Get_size(), SEED_NAMES["scatter"]
    scatter_list = None
    if rank == root:
        scatter_list = [dev(np.array([i + 1] * k, dtype=dtype)) for i in range(n)]
        s.lead = [f"Rank {rank}: Tensor to scatter: {fmt_list(scatter_list)}"]
    tensor = dev(np.zeros(k, dtype=dtype))
    s.before = f"Before {name} on rank {rank}: {fmt(tensor)}"
    ref = np.zeros(k, dtype=dtype)
    comm.Scatter(_stack(scatter_list) if rank == root else None, ref, root)
    _run(s, dist.scatter, tensor, scatter_list, src=root)
    s.after = f"After {name} on rank {rank}: {fmt(tensor)}"
    _check(s, tensor, ref, "scatter")
    return s


def seed_powers(rank, n, dtype):
    """The seed's reduce_scatter input: ``[(rank+1)*1, (rank+1)*2] ** (j+1)`` for j < N."""
    return [np.array([(rank + 1) * i for i in range(1, 3)], dtype=dtype) ** (j + 1)
            for j in range(n)]


def walk_reduce_scatter(comm, k, dtype, root, dev=_on_host):
    s, rank, n, name = Step(), comm.Get_rank(), comm.Get_size(), SEED_NAMES["reduce_scatter"]
    mine = seed_powers(rank, n, dtype)
    input_tensor = [dev(t.copy()) for t in mine]
    output_tensor = dev(np.zeros(2, dtype=dtype))
    s.before = f"Before {name} on rank {rank}: {fmt_list(input_tensor)}"
    ref = np.zeros(2, dtype=dtype)
    comm.Reduce_scatter_block(np.stack(mine), ref, MPI.SUM)
    _run(s, dist.reduce_scatter, output_tensor, input_tensor, op=dist.ReduceOp.SUM)
    s.after = f"After {name} on rank {rank}: {fmt(output_tensor)}"
    _check(s, output_tensor, ref, "reduce_scatter")
    return s


def walk_scan(comm, k, dtype, root, dev=_on_host):
    """Inclusive prefix sums, the MPI_Scan the seed leaves out (all algorithms keep rank order)."""
    s, rank = Step(), comm.Get_rank()
    mine = _ones(rank, k, dtype)
    tensor = dev(mine.copy())
    s.before = f"Before scan on rank {rank}: {fmt(tensor)}"
    ref = np.zeros_like(mine)
    comm.Scan(mine, ref, MPI.SUM)
    with traffic() as t:
        out = V.scan(tensor, op=MPI.SUM, algorithm=dist._algo("scan"))
    s.traffic = t.calls
    if rank == 0:
        s.lead = ["rank r ends with 1 + 2 + ... + (r+1) in every element: the sum over ranks 0..r"]
    s.after = f"After scan on rank {rank}: {fmt(out)}"
    _check(s, out, ref, "scan")
    return s


WALKS = {"bcast": walk_bcast, "reduce": walk_reduce, "allreduce": walk_allreduce,
         "gather": walk_gather, "allgather": walk_allgather, "scatter": walk_scatter,
         "reduce_scatter": walk_reduce_scatter, "scan": walk_scan}
