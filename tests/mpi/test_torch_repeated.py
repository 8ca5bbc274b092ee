"""Repeated blocking ``dist.all_reduce`` calls on one tensor (mpicoll/torch/_repeated.py).

The group serves a repeated call from its memo entry's compiled program and
returns the same completed work; every guarantee of the full path holds: new
data, a tensor whose storage changed, another op, and one rank that differs on
the 100th call (every rank raises, nothing is written). Checked against mpi4py
on the same data.
"""
import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
dist = pytest.importorskip("torch.distributed")
import numpy as np  # noqa: E402

import mpicoll  # noqa: E402
import mpicoll.torch  # noqa: E402

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


@pytest.fixture(scope="module", autouse=True)
def group():
    """The default group over "mpicoll" with torch's default timeout (no deadline per call)."""
    dist.init_process_group(backend="mpicoll")
    yield dist.distributed_c10d._get_default_group()
    dist.destroy_process_group()


def _opts(op=dist.ReduceOp.SUM):
    o = dist.AllreduceOptions()
    o.reduceOp = op
    o.asyncOp = False
    return o


@pytest.mark.mpi
def test_repeated_calls_see_new_data_and_return_one_work(group):
    t = torch.empty(3, dtype=torch.float64)
    works = []
    for k in range(100):
        x = np.arange(3.0) * (RANK + 1) + k
        t.copy_(torch.from_numpy(x))
        works.append(group.allreduce([t], _opts()))
        works[-1].wait()
        want = np.empty(3)
        comm.Allreduce(x, want)
        np.testing.assert_array_equal(t.numpy(), want)
    # the first call left a remembered call behind (its memo entry served the others)
    assert len(group._repeated.calls) == 1
    from mpicoll.core import watchdog
    if not watchdog.ON:      # (a group with a timeout made earlier in this process watches
        assert works[2] is works[99]    # every call: then none is served by the remembered call)


@pytest.mark.mpi
def test_storage_and_op_changes_take_the_full_path(group):
    t = torch.ones(4, dtype=torch.float64)
    for _ in range(3):
        t.fill_(RANK + 1.0)
        dist.all_reduce(t)
        assert (t == N * (N + 1) / 2).all()
    t.set_(torch.full((6,), RANK + 2.0, dtype=torch.float64))    # new storage, same object
    dist.all_reduce(t)
    assert t.numel() == 6 and (t == N * (N + 3) / 2).all()
    t.fill_(RANK + 1.0)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert (t == N).all()
    t.fill_(RANK + 1.0)
    dist.all_reduce(t)                                            # and back to SUM
    assert (t == N * (N + 1) / 2).all()


@pytest.mark.mpi(min_size=2)
def test_one_rank_differs_on_the_100th_call(group):
    t = torch.empty(2, dtype=torch.float64)
    for _ in range(99):
        t.fill_(1.0)
        dist.all_reduce(t)
    t.fill_(-7.0)
    op = dist.ReduceOp.MAX if RANK == 1 else dist.ReduceOp.SUM
    with pytest.raises(mpicoll.CollectiveMismatchError):
        dist.all_reduce(t, op=op)
    assert (t == -7.0).all()                                      # nothing was written
    t.fill_(1.0)
    dist.all_reduce(t)
    assert (t == N).all()
