"""The ``"mpicoll"`` torch.distributed backend, generated matrix (runs under the MPI suite).

Every torch.distributed collective the backend serves x every dtype it runs x
sizes 0, 1, not divisible by N, large x every root (sampled past N = 5) x
blocking and ``async_op=True``. Each rank computes the expected result itself
from every rank's deterministic input, in torch on float64 (values are small
integers or halves, so every dtype holds them exactly and any summation order
gives the same bits), and compares bitwise; a subset is compared with gloo on
the same data (a gloo group beside the default mpicoll group). Hostile calls
raise on every rank and leave the group usable. Skipped with the reason where
torch is not installed.
"""
import datetime

import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
dist = pytest.importorskip("torch.distributed")
import mpicoll  # noqa: E402
import mpicoll.torch  # noqa: E402

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.bool]
# Sizes: empty, one, fewer than the ranks, not divisible by the ranks, large.
SIZES = sorted({0, 1, max(N - 1, 1), 2 * N + 1}) + [20011]
R = dist.ReduceOp
# torch 2.13 renamed the tensor forms (the old names still work, with a FutureWarning).
all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def roots():
    return list(range(N)) if N <= 5 else [0, N // 2, N - 1]


@pytest.fixture(scope="module", autouse=True)
def groups():
    """The default group over "mpicoll" (env:// without MASTER_ADDR: the MPI rendezvous), and
    a gloo group beside it for cross-checks; destroyed at the end of the module.
    """
    dist.init_process_group(backend="mpicoll", timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    yield gloo
    dist.destroy_process_group()


def data(rank, n, dtype, kind="SUM", salt=0):
    """Rank ``rank``'s input: ``n`` small values that ``dtype`` holds exactly."""
    k = torch.arange(n, dtype=torch.int64) * 3 + rank * 7 + salt * 5
    if dtype is torch.bool:
        return (k % 3 != 0)
    if kind == "PRODUCT":
        v = 1 + k % 2
    elif kind in ("BAND", "BOR", "BXOR"):
        v = (k * 37 + 11) % 100
    elif dtype.is_floating_point or dtype.is_complex or dtype in (torch.int8, torch.int16,
                                                                  torch.int32, torch.int64):
        v = k % 7 - 3
    else:
        v = k % 7
    out = v.to(torch.float64 if (dtype.is_floating_point or dtype.is_complex) else torch.int64)
    if dtype.is_complex:
        out = out + 1j * (k % 4).to(torch.float64) * (0 if kind == "PRODUCT" else 1)
    return out.to(dtype)


def expected_reduce(inputs, kind, dtype, factor=2.5):
    """The reduction of the ranks' inputs in rank order, computed apart from the backend."""
    wide = torch.complex128 if dtype.is_complex else (
        torch.float64 if dtype.is_floating_point else torch.int64)
    if dtype is torch.bool:
        acc = inputs[0].clone()
        for x in inputs[1:]:
            acc = {"SUM": torch.logical_or, "MAX": torch.logical_or, "BOR": torch.logical_or,
                   "PRODUCT": torch.logical_and, "MIN": torch.logical_and,
                   "BAND": torch.logical_and, "BXOR": torch.logical_xor}[kind](acc, x)
        return acc
    xs = [x.to(wide) for x in inputs]
    if kind == "PREMUL_SUM":
        xs = [(x.to(dtype) * factor).to(wide) for x in inputs]
    acc = xs[0].clone()
    for x in xs[1:]:
        if kind in ("SUM", "AVG", "PREMUL_SUM"):
            acc = acc + x
        elif kind == "PRODUCT":
            acc = acc * x
        elif kind == "MIN":
            acc = torch.minimum(acc, x)
        elif kind == "MAX":
            acc = torch.maximum(acc, x)
        elif kind == "BAND":
            acc = acc & x
        elif kind == "BOR":
            acc = acc | x
        elif kind == "BXOR":
            acc = acc ^ x
    out = acc.to(dtype)
    if kind == "AVG":
        # torch hands complex tensors to a backend as real views: AVG divides each part.
        (torch.view_as_real(out) if dtype.is_complex else out).div_(len(inputs))
    return out


def kinds(dtype):
    """The ReduceOps torch defines for ``dtype``."""
    if dtype is torch.bool:
        return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    if dtype.is_complex:
        # torch refuses PRODUCT, MIN, MAX and the bitwise ops on complex tensors itself; the
        # others reach the backend as real views (torch.view_as_real).
        return ["SUM", "AVG", "PREMUL_SUM"]
    if dtype.is_floating_point:
        return ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
    return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def op_of(kind):
    return dist._make_nccl_premul_sum(2.5) if kind == "PREMUL_SUM" else getattr(R, kind)


def same(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got, want)
    assert torch.equal(got, want), (what, got, want)


def run(fn, *args, async_op, **kwargs):
    """Call ``fn(*args, async_op=async_op, **kwargs)``; for async calls, check the work
    object and wait on it.
    """
    work = fn(*args, async_op=async_op, **kwargs)
    if async_op:
        assert work is not None
        assert work.wait()
        assert work.is_completed()
        return work
    assert work is None
    return None


FACES = [False, True]


# -- reductions ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce(dtype):
    for kind in kinds(dtype):
        for n in (SIZES if kind in ("SUM", "AVG") else [1, 2 * N + 1]):
            for async_op in FACES:
                t = data(RANK, n, dtype, kind)
                work = run(dist.all_reduce, t, op=op_of(kind), async_op=async_op)
                want = expected_reduce([data(r, n, dtype, kind) for r in range(N)], kind, dtype)
                same(t, want, ("all_reduce", kind, n, async_op))
                if work is not None:
                    # The future holds what the backend was given: complex tensors as real views.
                    value = work.get_future().value()[0]
                    same(value, torch.view_as_real(want) if dtype.is_complex else want, "future")


def _sparse_input(rank, shape, sparse_dim, nnz, dtype, coalesced):
    """Rank ``rank``'s sparse COO tensor: ``nnz`` entries (repeats when not coalesced)."""
    gen = torch.Generator().manual_seed(1000 * rank + nnz)
    idx = torch.stack([torch.randint(0, shape[d], (nnz,), generator=gen)
                       for d in range(sparse_dim)]) if nnz else torch.zeros(sparse_dim, 0,
                                                                           dtype=torch.int64)
    vals = (torch.randint(-4, 5, (nnz, *shape[sparse_dim:]), generator=gen)).to(dtype)
    t = torch.sparse_coo_tensor(idx, vals, shape)
    return t.coalesce() if coalesced else t


SPARSE_CASES = [((7,), 1, 3), ((5, 4), 2, 6), ((5, 4), 1, 2), ((3, 2, 2), 1, 4),
                ((6, 3, 2), 2, 5), ((9,), 1, 0)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64,
                                   torch.bfloat16], ids=str)
def test_sparse_all_reduce_sum_matches_the_dense_sum(groups, dtype):
    """SUM of sparse COO tensors: every rank's entries, compared with the dense sum of the
    ranks' inputs (computed here) and with gloo's answer.
    """
    for shape, sparse_dim, nnz in SPARSE_CASES:
        for coalesced in (True, False):
            # different entry counts on different ranks (rank 1 none at all)
            counts = [0 if r == 1 else nnz + r for r in range(N)]
            inputs = [_sparse_input(r, shape, sparse_dim, counts[r], dtype, coalesced)
                      for r in range(N)]
            want = sum(x.to_dense().to(torch.float64) for x in inputs).to(dtype)
            t = inputs[RANK].clone()
            dist.all_reduce(t)
            assert t.layout == torch.sparse_coo and t.is_coalesced()
            same(t.to_dense(), want, ("sparse all_reduce", shape, sparse_dim, nnz, coalesced))
            if dtype is not torch.bfloat16:
                g = inputs[RANK].clone()
                dist.all_reduce(g, group=groups)
                same(t.to_dense(), g.to_dense(), ("gloo sparse all_reduce", shape, nnz))
    # async_op: completed work, same answer
    t = _sparse_input(RANK, (5, 4), 2, 3, dtype, True)
    want = sum(_sparse_input(r, (5, 4), 2, 3, dtype, True).to_dense().to(torch.float64)
               for r in range(N)).to(dtype)
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    same(t.to_dense(), want, "sparse all_reduce async")


def test_sparse_all_reduce_refusals_raise_on_every_rank():
    t = _sparse_input(RANK, (4, 3), 1, 2, torch.float32, True)
    with pytest.raises(mpicoll.ArgumentError, match="ReduceOp.SUM only"):
        dist.all_reduce(t.clone(), op=R.MAX)
    # a shape that differs on one rank: a mismatch named on every rank, before entries move
    bad = _sparse_input(RANK, (4, 3) if RANK else (4, 2), 1, 2, torch.float32, True)
    if N > 1:
        with pytest.raises(mpicoll.CollectiveMismatchError, match="rank 0.*shape"):
            dist.all_reduce(bad)
    t2 = t.clone()
    dist.all_reduce(t2)
    want = sum(_sparse_input(r, (4, 3), 1, 2, torch.float32, True).to_dense()
               for r in range(N))
    assert torch.equal(t2.to_dense(), want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_updates_only_dst(dtype):
    for kind in kinds(dtype)[:3]:
        for n in [0, 1, 2 * N + 1]:
            for dst in roots():
                for async_op in FACES:
                    t = data(RANK, n, dtype, kind)
                    mine = t.clone()
                    run(dist.reduce, t, dst=dst, op=op_of(kind), async_op=async_op)
                    if RANK == dst:
                        want = expected_reduce([data(r, n, dtype, kind) for r in range(N)],
                                               kind, dtype)
                        same(t, want, ("reduce", kind, n, dst))
                    else:
                        same(t, mine, ("reduce leaves the others", kind, n, dst))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_scatter(dtype):
    for kind in kinds(dtype)[:3]:
        for n in [0, 1, 3]:
            for async_op in FACES:
                ins = [data(RANK, n, dtype, kind, salt=j) for j in range(N)]
                keep = [x.clone() for x in ins]
                out = torch.zeros(n, dtype=dtype)
                run(dist.reduce_scatter, out, ins, op=op_of(kind), async_op=async_op)
                want = expected_reduce([data(r, n, dtype, kind, salt=RANK) for r in range(N)],
                                       kind, dtype)
                same(out, want, ("reduce_scatter", kind, n))
                for x, k in zip(ins, keep, strict=True):
                    same(x, k, "inputs untouched")
                # The tensor form: one input of N blocks.
                big = torch.cat(ins) if n else torch.zeros(0, dtype=dtype)
                out2 = torch.zeros(n, dtype=dtype)
                run(reduce_scatter_tensor, out2, big, op=op_of(kind), async_op=async_op)
                same(out2, want, ("reduce_scatter_tensor", kind, n))


def test_reduce_scatter_uneven_blocks():
    counts = [(r % 3) + 1 for r in range(N)]
    ins = [data(RANK, counts[j], torch.float32, salt=j) for j in range(N)]
    out = torch.zeros(counts[RANK])
    dist.reduce_scatter(out, ins)
    same(out, expected_reduce([data(r, counts[RANK], torch.float32, salt=RANK)
                               for r in range(N)], "SUM", torch.float32), "uneven")


def test_all_reduce_coalesced_and_chunks():
    a, b = data(RANK, 5, torch.float32), data(RANK, 3, torch.float32, salt=1)
    dist.all_reduce_coalesced([a, b])
    same(a, expected_reduce([data(r, 5, torch.float32) for r in range(N)], "SUM", torch.float32),
         "coalesced a")
    same(b, expected_reduce([data(r, 3, torch.float32, salt=1) for r in range(N)], "SUM",
                            torch.float32), "coalesced b")


# -- data movement --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast(dtype):
    for n in SIZES:
        for src in roots():
            for async_op in FACES:
                t = data(RANK, n, dtype) if RANK == src else torch.zeros(n, dtype=dtype)
                run(dist.broadcast, t, src=src, async_op=async_op)
                same(t, data(src, n, dtype), ("broadcast", n, src))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather(dtype):
    for n in SIZES:
        for async_op in FACES:
            t = data(RANK, n, dtype)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(N)]
            run(dist.all_gather, outs, t, async_op=async_op)
            for r in range(N):
                same(outs[r], data(r, n, dtype), ("all_gather", n, r))
            # Chunks of one tensor (no copy on the way) and the tensor form.
            big = torch.zeros(N * n, dtype=dtype)
            run(dist.all_gather, list(big.chunk(N)) if n else
                [torch.zeros(0, dtype=dtype) for _ in range(N)], t, async_op=async_op)
            if n:
                same(big, torch.cat([data(r, n, dtype) for r in range(N)]), ("chunks", n))
            big2 = torch.zeros(N, n, dtype=dtype)
            run(all_gather_tensor, big2, t, async_op=async_op)
            for r in range(N):
                same(big2[r], data(r, n, dtype), ("all_gather_into_tensor", n, r))


def _coalesced_inputs(rank, dtype, count, same_shape):
    """Rank ``rank``'s ``count`` inputs, every value distinct across ranks and tensors.

    ``same_shape``: three elements each (a [tensor][rank] reading then raises nothing);
    else tensor i has i + 1 elements and the last none.
    """
    shapes = ([3] * count if same_shape else [i + 1 for i in range(count - 1)] + [0])
    return [(torch.arange(n, dtype=torch.int64) + 1 + 10 * i + 100 * rank).to(dtype)
            for i, n in enumerate(shapes)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex64], ids=str)
@pytest.mark.parametrize("count", ["ranks", "ranks+1", "one"])
def test_all_gather_coalesced_lays_out_by_rank_then_tensor(groups, dtype, count):
    """output_tensor_lists[r][i] is rank r's input i (torch's layout). With as many inputs as
    ranks, all of one shape, a [tensor][rank] reading raises nothing and transposes the
    result: this catches it.
    """
    k = {"ranks": N, "ranks+1": N + 1, "one": 1}[count]
    mine = _coalesced_inputs(RANK, dtype, k, count != "ranks+1")
    want = [_coalesced_inputs(r, dtype, k, count != "ranks+1") for r in range(N)]
    flat = [tuple(t.tolist()) for row in want for t in row if t.numel()]
    assert len(set(flat)) == len(flat)
    for async_op in FACES:
        outs = [[torch.full_like(x, 99) for x in mine] for _ in range(N)]
        work = dist.all_gather_coalesced(outs, mine, async_op=async_op)
        if async_op:
            work.wait()
        for r in range(N):
            for i in range(k):
                same(outs[r][i], want[r][i], ("all_gather_coalesced", async_op, r, i))
    ref = [[torch.full_like(x, 99) for x in mine] for _ in range(N)]
    dist.all_gather_coalesced(ref, mine, group=groups)
    for r in range(N):
        for i in range(k):
            same(outs[r][i], ref[r][i], ("gloo all_gather_coalesced", r, i))


def test_all_gather_coalesced_bad_layout_raises_on_every_rank():
    mine = [torch.ones(2), torch.ones(3)]
    # [tensor][rank] instead of [rank][tensor]: on rank 0 only, so the others must be told.
    outs = ([[torch.zeros(2) for _ in range(N)], [torch.zeros(3) for _ in range(N)]]
            if RANK == 0 else [[torch.zeros(2), torch.zeros(3)] for _ in range(N)])
    with pytest.raises(mpicoll.ArgumentError, match="output_tensor_lists"):
        dist.all_gather_coalesced(outs, mine)
    good = [[torch.zeros(2), torch.zeros(3)] for _ in range(N)]
    dist.all_gather_coalesced(good, mine)
    assert all(torch.equal(row[1], torch.ones(3)) for row in good)


@pytest.mark.parametrize("n", [1, 5, 20011])
def test_in_place_tensor_forms_as_fsdp_calls_them(n):
    """all_gather_into_tensor with the input its rank's block of the output (FSDP2's call),
    reduce_scatter_tensor with the output a block of the input; other overlaps refused on
    every rank.
    """
    for async_op in FACES:
        out = torch.zeros(N * n)
        mine = out.narrow(0, RANK * n, n)
        mine.copy_(data(RANK, n, torch.float32))
        run(all_gather_tensor, out, mine, async_op=async_op)
        same(out, torch.cat([data(r, n, torch.float32) for r in range(N)]), ("in place", n))
        big = torch.cat([data(RANK, n, torch.float32, salt=j) for j in range(N)])
        want = sum(torch.cat([data(r, n, torch.float64, salt=j) for j in range(N)])
                   for r in range(N))[RANK * n:(RANK + 1) * n].float()
        run(reduce_scatter_tensor, big.narrow(0, RANK * n, n), big, async_op=async_op)
        same(big.narrow(0, RANK * n, n), want, ("reduce_scatter output in input", n))
    if N * n == 1:
        return                          # no shifted block overlaps a one-element output
    out = torch.zeros(N * n + 1)
    with pytest.raises(mpicoll.ArgumentError, match="overlaps output_tensor"):
        all_gather_tensor(out.narrow(0, 0, N * n), out.narrow(0, 1, n) if RANK == 0
                          else torch.zeros(n))


def test_tensor_storage_stays_resizable_after_a_call():
    """FSDP1 frees its flat parameters with storage().resize_(0) after calls filled them."""
    for n in (3, 1 << 16):
        t = torch.ones(N * n)
        dist.all_reduce(t)
        outs = torch.zeros(N * n)
        all_gather_tensor(outs, torch.ones(n))
        for x in (t, outs):
            x.untyped_storage().resize_(0)
            x.untyped_storage().resize_(N * n * 4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_and_scatter(dtype):
    for n in [0, 1, 2 * N + 1]:
        for root in roots():
            for async_op in FACES:
                t = data(RANK, n, dtype)
                outs = [torch.zeros(n, dtype=dtype) for _ in range(N)] if RANK == root else None
                run(dist.gather, t, outs, dst=root, async_op=async_op)
                if RANK == root:
                    for r in range(N):
                        same(outs[r], data(r, n, dtype), ("gather", n, root, r))
                ins = [data(root, n, dtype, salt=j) for j in range(N)] if RANK == root else None
                out = torch.zeros(n, dtype=dtype)
                run(dist.scatter, out, ins, src=root, async_op=async_op)
                same(out, data(root, n, dtype, salt=RANK), ("scatter", n, root))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all(dtype):
    for n in [0, 1, 3]:
        for async_op in FACES:
            ins = [data(RANK, n + j % 2, dtype, salt=j) for j in range(N)]
            outs = [torch.zeros(n + RANK % 2, dtype=dtype) for _ in range(N)]
            run(dist.all_to_all, outs, ins, async_op=async_op)
            for r in range(N):
                same(outs[r], data(r, n + RANK % 2, dtype, salt=RANK), ("all_to_all", n, r))
            # The single-tensor form: equal splits, then explicit split sizes (rows of 2).
            src = torch.cat([data(RANK, n, dtype, salt=j) for j in range(N)]) if n else \
                torch.zeros(0, dtype=dtype)
            dst = torch.zeros_like(src)
            run(dist.all_to_all_single, dst, src, async_op=async_op)
            if n:
                same(dst, torch.cat([data(r, n, dtype, salt=RANK) for r in range(N)]),
                     ("all_to_all_single", n))
            splits_in = [(RANK + j) % 3 for j in range(N)]
            splits_out = [(r + RANK) % 3 for r in range(N)]
            src = torch.cat([data(RANK, 2 * s, dtype, salt=j).reshape(s, 2)
                             for j, s in enumerate(splits_in)])
            dst = torch.zeros(sum(splits_out), 2, dtype=dtype)
            run(dist.all_to_all_single, dst, src, splits_out, splits_in, async_op=async_op)
            want = torch.cat([data(r, 2 * s, dtype, salt=RANK).reshape(s, 2)
                              for r, s in enumerate(splits_out)])
            same(dst, want, ("all_to_all_single splits", n))


def test_barrier_and_monitored_barrier():
    dist.barrier()
    dist.barrier(async_op=True).wait()
    dist.group.WORLD.monitored_barrier(datetime.timedelta(seconds=60))


@pytest.mark.skipif(N == 1, reason="a barrier of one rank never waits")
def test_monitored_barrier_reports_missing_ranks_as_gloo():
    """The process group's monitored_barrier with a timeout, timedelta(0) included: rank 0
    names the ranks that did not arrive in a RuntimeError (gloo's wording), the others say
    they arrived; the group stays usable.
    """
    pg = dist.new_group(list(range(N)))
    zero = datetime.timedelta(0)
    # rank 0 alone, zero timeout (torch's test_monitored_barrier_gloo_rank_0_timeout)
    if RANK == 0:
        with pytest.raises(RuntimeError, match="Rank 0 timed out in monitoredBarrier") as e:
            pg.monitored_barrier(zero)
        assert "Rank 1 failed to pass monitoredBarrier" in str(e.value)
        assert e.value.missing == list(range(1, N))
        with pytest.raises(RuntimeError, match="Ranks? 1(, 2)*.* failed to pass") as e:
            pg.monitored_barrier(zero, wait_all_ranks=True)
        assert ", ".join(str(r) for r in range(1, N)) in str(e.value)
    comm.Barrier()
    # every rank, zero timeout: each raises at once, nothing left in flight
    with pytest.raises(mpicoll.BarrierTimeoutError, match=f"Rank {RANK} timed out"):
        pg.monitored_barrier(zero)
    comm.Barrier()
    pg.monitored_barrier(datetime.timedelta(seconds=60))
    # the last rank stays away for a short timeout
    late = N - 1
    if RANK != late:
        with pytest.raises(RuntimeError) as e:
            pg.monitored_barrier(datetime.timedelta(seconds=0.3), wait_all_ranks=True)
        if RANK == 0:
            assert f"Rank {late} failed to pass monitoredBarrier in 300 ms" in str(e.value)
            assert e.value.missing == [late]
        else:
            assert (f"Rank {RANK} successfully reached monitoredBarrier, but received errors "
                    f"while waiting for send/recv from rank 0") in str(e.value)
    comm.Barrier()
    t = torch.ones(3) * RANK
    dist.all_reduce(t, group=pg)
    assert torch.equal(t, torch.full((3,), float(sum(range(N)))))
    dist.destroy_process_group(pg)


def test_object_collectives():
    objs = [None] * N
    dist.all_gather_object(objs, {"rank": RANK, "s": "x" * RANK})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(N)]
    for src in roots():
        box = [{"from": src}, list(range(src))] if RANK == src else [None, None]
        dist.broadcast_object_list(box, src=src)
        assert box == [{"from": src}, list(range(src))]
        got = [None] * N if RANK == src else None
        dist.gather_object(("r", RANK), got, dst=src)
        if RANK == src:
            assert got == [("r", r) for r in range(N)]
        out = [None]
        dist.scatter_object_list(out, [f"to {r}" for r in range(N)] if RANK == src else None,
                                 src=src)
        assert out == [f"to {RANK}"]


# -- point to point --------------------------------------------------------------------

def test_send_recv_isend_irecv_batch():
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        t = data(RANK, 7, dtype)
        got = torch.zeros(7, dtype=dtype)
        if N > 1:
            reqs = [dist.isend(t, nxt), dist.irecv(got, prv)]
            for q in reqs:
                q.wait()
            same(got, data(prv, 7, dtype), ("isend/irecv", dtype))
            got.zero_()
            ops = [dist.P2POp(dist.isend, t, nxt, tag=3), dist.P2POp(dist.irecv, got, prv, tag=3)]
            for q in dist.batch_isend_irecv(ops):
                q.wait()
            same(got, data(prv, 7, dtype), ("batch_isend_irecv", dtype))
    if N > 1:
        # Blocking send/recv; recv without a source names the sender.
        if RANK == 0:
            for _ in range(1, N):
                box = torch.zeros(1, dtype=torch.int64)
                sender = dist.recv(box)
                assert int(box.item()) == sender * 10
        else:
            dist.send(torch.tensor([RANK * 10]), dst=0)


# -- groups, errors, DDP, gloo ---------------------------------------------------------

def test_new_group_runs_on_its_ranks():
    evens = list(range(0, N, 2))
    pg = dist.new_group(evens)
    if RANK in evens:
        t = torch.tensor([float(RANK)])
        dist.all_reduce(t, group=pg)
        assert t.item() == float(sum(evens))
        assert dist.get_world_size(pg) == len(evens)
        assert pg.comm.Get_size() == len(evens)
    dist.destroy_process_group(pg)
    dist.barrier()


def expect_everywhere(exc_type, match, fn):
    with pytest.raises(exc_type, match=match) as info:
        fn()
    return str(info.value)


def test_hostile_calls_raise_on_every_rank_and_leave_the_group_usable():
    if N == 1:
        pytest.skip("needs two ranks to disagree")
    last = RANK == N - 1
    # Non-contiguous on one rank: every rank raises, naming it.
    t = torch.zeros(4, 2).t() if last else torch.zeros(2, 4)
    msg = expect_everywhere(mpicoll.ArgumentError, "contiguous", lambda: dist.all_reduce(t))
    assert f"rank(s) {N - 1}" in msg or last
    # Another shape on one rank.
    x = torch.ones(3 if last else 4)
    expect_everywhere(mpicoll.CollectiveMismatchError, "count", lambda: dist.all_reduce(x))
    # Another dtype on one rank.
    y = torch.ones(4, dtype=torch.float64 if last else torch.float32)
    expect_everywhere(mpicoll.CollectiveMismatchError, "dtype", lambda: dist.broadcast(y, 0))
    # Async: the failing rank raises when it calls (with its reason), the others at wait
    # (naming the rank: a nonblocking agreement carries no text).
    z = torch.zeros(4, 2).t() if last else torch.zeros(2, 4)
    msg = expect_everywhere(mpicoll.ArgumentError,
                            "contiguous" if last else f"invalid arguments on rank\\(s\\) {N - 1}",
                            lambda: dist.all_reduce(z, async_op=True).wait())
    # A list of the wrong length on one rank.
    outs = [torch.zeros(2) for _ in range(N + (1 if last else 0))]
    expect_everywhere(mpicoll.ArgumentError, "tensor_list",
                      lambda: dist.all_gather(outs, torch.zeros(2)))
    # An op torch does not define for the dtype (every rank).
    expect_everywhere(mpicoll.ArgumentError, "AVG",
                      lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=R.AVG))
    # A bad root: mpicoll's check, on every rank.
    expect_everywhere(Exception, "root|rank|group",
                      lambda: dist.broadcast(torch.zeros(2), src=N))
    # The group still works.
    ok = torch.ones(3)
    dist.all_reduce(ok)
    assert torch.equal(ok, torch.full((3,), float(N)))


def test_algorithms_traffic_and_options():
    pg = dist.new_group(list(range(N)),
                        pg_options=mpicoll.torch.Options(algorithms="allreduce=ring"))
    t = data(RANK, 2 * N + 1, torch.float32)
    with mpicoll.traffic() as tr:
        dist.all_reduce(t, group=pg)
    calls = [c for c in tr.calls if c.primitive == "allreduce"]
    assert calls and calls[-1].algorithm == "ring"
    if N > 1:
        assert calls[-1].sent_msgs == 2 * (N - 1)
    same(t, expected_reduce([data(r, 2 * N + 1, torch.float32) for r in range(N)], "SUM",
                            torch.float32), "ring")
    dist.destroy_process_group(pg)
    with pytest.raises(mpicoll.ArgumentError, match="no algorithm"):
        mpicoll.torch.Options(algorithms={"allreduce": "nonesuch"})


def test_matches_gloo_on_the_same_data(groups):
    gloo = groups
    for dtype in [torch.float32, torch.float64, torch.int32, torch.uint8]:
        for kind in ["SUM", "PRODUCT", "MIN", "MAX"]:
            a, b = data(RANK, 2 * N + 1, dtype, kind), data(RANK, 2 * N + 1, dtype, kind)
            dist.all_reduce(a, op=getattr(R, kind))
            dist.all_reduce(b, op=getattr(R, kind), group=gloo)
            same(a, b, ("gloo all_reduce", dtype, kind))
        for src in roots():
            a = data(RANK, 9, dtype) if RANK == src else torch.zeros(9, dtype=dtype)
            b = a.clone()
            dist.broadcast(a, src)
            dist.broadcast(b, src, group=gloo)
            same(a, b, ("gloo broadcast", dtype, src))
        x = data(RANK, 5, dtype)
        oa = [torch.zeros(5, dtype=dtype) for _ in range(N)]
        ob = [torch.zeros(5, dtype=dtype) for _ in range(N)]
        dist.all_gather(oa, x)
        dist.all_gather(ob, x, group=gloo)
        for p, q in zip(oa, ob, strict=True):
            same(p, q, ("gloo all_gather", dtype))
        src = torch.cat([data(RANK, 2, dtype, salt=j) for j in range(N)])
        da, db = torch.zeros_like(src), torch.zeros_like(src)
        dist.all_to_all_single(da, src)
        dist.all_to_all_single(db, src, group=gloo)
        same(da, db, ("gloo all_to_all_single", dtype))


def _train(group, steps=4):
    torch.manual_seed(7 + RANK)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(RANK)
    for _ in range(steps):
        x = torch.randn(6, 8, generator=gen)
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_ddp_trains_to_the_parameters_gloo_gives(groups):
    ours = _train(None)
    theirs = _train(groups)
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6), (ours - theirs).abs().max()
    # DDP keeps the replicas identical: every rank holds the same parameters.
    every = [torch.zeros_like(ours) for _ in range(N)]
    dist.all_gather(every, ours)
    for p in every:
        same(p, ours, "replicas")
