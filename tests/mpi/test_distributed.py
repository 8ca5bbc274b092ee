"""mpicoll.distributed runs the seed's examples on NumPy arrays, both backends."""
import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
import mpicoll.distributed as dist

N, RANK = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()


@pytest.fixture(params=["p2p", "native", "nccl", "mpi"])
def group(request):
    dist.init_process_group(backend=request.param)
    yield request.param
    dist.destroy_process_group()


@pytest.mark.mpi
def test_seed_examples(group):
    assert dist.get_rank() == RANK and dist.get_world_size() == N
    # broadcast
    t = np.array([1, 2, 3, 4, 5], np.float32) if RANK == 0 else np.zeros(5, np.float32)
    dist.broadcast(t, src=0)
    assert np.array_equal(t, [1, 2, 3, 4, 5])
    # reduce: only dst changes
    t = np.array([RANK + 1] * 5, np.float32)
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    want = N * (N + 1) / 2 if RANK == 0 else RANK + 1
    assert np.array_equal(t, np.full(5, want, np.float32))
    # all_reduce
    t = np.array([RANK + 1] * 5, np.float32)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    assert np.array_equal(t, np.full(5, N * (N + 1) / 2, np.float32))
    # gather
    t = np.array([RANK + 1] * 5, np.float32)
    gl = [np.zeros(5, np.float32) for _ in range(N)] if RANK == 0 else None
    dist.gather(t, gl, dst=0)
    if RANK == 0:
        for i, g in enumerate(gl):
            assert np.array_equal(g, np.full(5, i + 1, np.float32))
    # all_gather
    gl = [np.zeros(5, np.float32) for _ in range(N)]
    dist.all_gather(gl, t)
    for i, g in enumerate(gl):
        assert np.array_equal(g, np.full(5, i + 1, np.float32))
    # scatter
    sl = [np.array([i + 1] * 5, np.float32) for i in range(N)] if RANK == 0 else None
    out = np.zeros(5, np.float32)
    dist.scatter(out, sl, src=0)
    assert np.array_equal(out, np.full(5, RANK + 1, np.float32))
    # reduce_scatter: the seed's powers pattern
    inp = [np.array([(RANK + 1) * i for i in range(1, 3)], np.float32) ** (j + 1)
           for j in range(N)]
    out = np.zeros(2, np.float32)
    dist.reduce_scatter(out, inp, op=dist.ReduceOp.SUM)
    want = sum(np.array([(r + 1) * i for i in range(1, 3)], np.float32) ** (RANK + 1)
               for r in range(N))
    assert np.array_equal(out, want)
    if N == 3:
        assert out.tolist() == [[6, 12], [14, 56], [36, 288]][RANK]
    dist.barrier()


@pytest.mark.mpi
def test_ops_and_algorithms():
    dist.init_process_group("p2p", algorithms={"all_reduce": "ring", "broadcast": "pipeline"})
    try:
        for op, ref in ((dist.ReduceOp.MAX, N), (dist.ReduceOp.MIN, 1),
                        (dist.ReduceOp.AVG, (N + 1) / 2),
                        (dist.ReduceOp.PRODUCT, float(np.prod(np.arange(1, N + 1))))):
            t = np.full(3, RANK + 1.0)
            dist.all_reduce(t, op=op)
            assert np.allclose(t, ref), (op, t)
        with mpicoll.traffic() as tr:
            dist.all_reduce(np.ones(4), op=dist.ReduceOp.SUM)
        assert tr.calls[0].algorithm == "ring"
    finally:
        dist.destroy_process_group()


@pytest.mark.mpi
def test_bad_use():
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(mpicoll.ArgumentError, match="backend"):
        dist.init_process_group("carrier-pigeon")
    with pytest.raises(mpicoll.ArgumentError, match="all_reduce"):
        dist.init_process_group("p2p", algorithms={"all_reduce": "nope"})
    dist.init_process_group("p2p")
    try:
        t = np.zeros(5, np.float32)
        with pytest.raises(mpicoll.ArgumentError, match="tensor_list"):
            dist.all_gather([np.zeros(5, np.float32)] * (N + 1), t)
        with pytest.raises(mpicoll.ArgumentError, match="AVG"):
            dist.all_reduce(np.ones(2, "i"), op=dist.ReduceOp.AVG)
    finally:
        dist.destroy_process_group()
