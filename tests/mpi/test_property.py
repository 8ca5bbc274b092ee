"""Property-based tests: hypothesis drives random *valid* calls, each checked against
NumPy (computed on the rank, in rank order) and against the native MPI collective.

Every rank must draw the same examples, so the tests run derandomized (the seed
comes from the test itself), without a database, health checks or deadlines
(timing differs per rank), and without shrinking. Each example's verdict is
agreed across ranks before asserting, so all ranks pass or fail the same
example together (a rank-local failure can never leave the others waiting).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mpi4py import MPI
from refdata import OPS, data, keeps_rank_order, reduce_ref, usable

import mpicoll

world = MPI.COMM_WORLD
N, RANK = world.Get_size(), world.Get_rank()

SETTINGS = settings(max_examples=100 if N <= 4 else 40, derandomize=True, database=None,
                    deadline=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.generate], print_blob=False)

pytestmark = pytest.mark.timeout(600)

REDUCE_CASES = [("float64", "SUM"), ("int32", "SUM"), ("int64", "PROD"), ("int16", "MIN"),
                ("float32", "MAX"), ("uint8", "BXOR"), ("int32", "BAND"), ("uint32", "BOR"),
                ("bool", "LAND"), ("bool", "LOR"), ("bool", "LXOR"), ("complex128", "SUM"),
                ("complex64", "PROD"), ("float64", "USER_ADD"), ("complex128", "AFFINE")]
MOVE_DTYPES = ["float64", "int32", "uint8", "complex64", "bool", "int16", "float32"]


def agreed(ok, what):
    """Assert on every rank if the example failed on any rank."""
    every = world.allgather((bool(ok), what if not ok else ""))
    bad = [(r, w) for r, (o, w) in enumerate(every) if not o]
    assert not bad, f"failed on ranks {[r for r, _ in bad]}: {bad[0][1]}"


def same_draw(*values):
    """Guard: every rank drew the same example (else the test itself is broken)."""
    every = world.allgather(repr(values))
    assert all(e == every[0] for e in every), f"ranks drew different examples: {every}"


def bitwise(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


counts = st.one_of(st.integers(0, 2 * N + 3), st.integers(0, 3000))


@SETTINGS
@given(st.data())
def test_random_reductions(d):
    prim = d.draw(st.sampled_from(["reduce", "allreduce", "reduce_scatter"]), "primitive")
    dt, opname = d.draw(st.sampled_from(REDUCE_CASES), "dtype/op")
    op = OPS[opname]
    names = [a for a in usable(prim)
             if op.is_commutative or keeps_rank_order(mpicoll.algorithm_info(prim, a))]
    algo = d.draw(st.sampled_from(names + ["auto"]), "algorithm")
    c = d.draw(counts, "count")
    root = d.draw(st.integers(0, N - 1), "root")
    in_place = d.draw(st.booleans(), "in_place")
    face = d.draw(st.sampled_from(["functional", "P2PComm"]), "face")
    same_draw(prim, dt, opname, algo, c, root, in_place, face)
    pc = mpicoll.P2PComm(world, **({prim: algo} if algo != "auto" else {}))
    kw = dict(algorithm=algo)
    if prim == "reduce_scatter":
        rc = [d.draw(st.integers(0, c), f"count{i}") for i in range(N)]
        total = sum(rc)
        mine = data(RANK, total, dt, opname)
        every = [data(r, total, dt, opname) for r in range(N)]
        off = sum(rc[:RANK])
        ref = reduce_ref(every, opname, dt)[off:off + rc[RANK]]
        native = np.empty(rc[RANK], dt)
        world.Reduce_scatter(mine, native, rc, op)
        keep = mine.copy()
        if face == "P2PComm":
            got = np.full(rc[RANK], 0, dt)
            pc.Reduce_scatter(mine, got, rc, op)
        elif in_place:
            buf = mine.copy()
            got = mpicoll.reduce_scatter(MPI.IN_PLACE, buf, rc, op, **kw)[:rc[RANK]]
        else:
            got = mpicoll.reduce_scatter(mine, None, rc, op, **kw)
    else:
        mine = data(RANK, c, dt, opname)
        every = [data(r, c, dt, opname) for r in range(N)]
        keep = mine.copy()
        ref = reduce_ref(every, opname, dt)
        native = np.empty(c, dt)
        if prim == "allreduce":
            world.Allreduce(mine, native, op)
            if face == "P2PComm":
                got = np.empty(c, dt)
                pc.Allreduce(mine, got, op)
            elif in_place:
                got = mpicoll.allreduce(MPI.IN_PLACE, mine.copy(), op, **kw)
            else:
                got = mpicoll.allreduce(mine, None, op, **kw)
        else:
            world.Reduce(mine, native, op, root)
            if face == "P2PComm":
                got = np.empty(c, dt)
                pc.Reduce(mine, got, op, root)
            elif in_place and RANK == root:
                got = mpicoll.reduce(MPI.IN_PLACE, mine.copy(), op, root, **kw)
            else:
                got = mpicoll.reduce(mine, None, op, root, **kw)
            if RANK != root:
                got, ref, native = ref, ref, ref      # nothing defined off the root
    ok = bitwise(got, ref) and bitwise(got, native) and bitwise(mine, keep)
    agreed(ok, f"{prim}/{algo} {face} dtype={dt} op={opname} count={c} root={root} "
               f"in_place={in_place} rank={RANK}: got {np.asarray(got)[:6]} ref {ref[:6]}")


@SETTINGS
@given(st.data())
def test_random_data_movement(d):
    prim = d.draw(st.sampled_from(["bcast", "gather", "allgather", "scatter", "alltoall"]),
                  "primitive")
    algo = d.draw(st.sampled_from(list(usable(prim)) + ["auto"]), "algorithm")
    dt = d.draw(st.sampled_from(MOVE_DTYPES), "dtype")
    c = d.draw(counts, "count")
    root = d.draw(st.integers(0, N - 1), "root")
    shape2d = d.draw(st.booleans(), "2-D")
    in_place = d.draw(st.booleans(), "in_place")
    same_draw(prim, algo, dt, c, root, shape2d, in_place)
    kw = dict(algorithm=algo)
    mine = data(RANK, c, dt)
    if shape2d and c % 2 == 0:
        mine = mine.reshape(2, c // 2)
    keep = mine.copy()
    every = [data(r, c, dt).reshape(mine.shape) for r in range(N)]
    if prim == "bcast":
        buf = mine.copy() if RANK == root else np.zeros_like(mine)
        got = mpicoll.bcast(buf, root, **kw)
        native = mine.copy()
        world.Bcast(native, root)
        ref = every[root]
    elif prim == "gather":
        if in_place and RANK == root:
            buf = np.zeros((N,) + mine.shape, dt)
            buf[root] = mine
            got = mpicoll.gather(MPI.IN_PLACE, buf, root, **kw)
        else:
            got = mpicoll.gather(mine, None, root, **kw)
        native = np.empty((N,) + mine.shape, dt) if RANK == root else None
        world.Gather(mine, native, root)
        ref = np.stack(every)
        if RANK != root:
            got = native = ref if got is None else got
    elif prim == "allgather":
        if in_place:
            buf = np.zeros((N,) + mine.shape, dt)
            buf[RANK] = mine
            got = mpicoll.allgather(MPI.IN_PLACE, buf, **kw)
        else:
            got = mpicoll.allgather(mine, None, **kw)
        native = np.empty((N,) + mine.shape, dt)
        world.Allgather(mine, native)
        ref = np.stack(every)
    elif prim == "scatter":
        full = np.concatenate([data(r, c, dt, salt=3) for r in range(N)])
        send = full.copy() if RANK == root else None
        if in_place and RANK == root:
            assert mpicoll.scatter(send, MPI.IN_PLACE, root, **kw) is None
            got = send[root * c:(root + 1) * c]
        else:
            got = mpicoll.scatter(send, np.empty(c, dt), root, **kw)
        native = np.empty(c, dt)
        world.Scatter(full if RANK == root else None, native, root)
        ref = full[RANK * c:(RANK + 1) * c]
    else:
        send = np.concatenate([data(RANK * N + j, c, dt) for j in range(N)])
        keep = send.copy()
        mine = send
        got = (mpicoll.alltoall(MPI.IN_PLACE, send.copy(), **kw) if in_place
               else mpicoll.alltoall(send, None, **kw))
        native = np.empty_like(send)
        world.Alltoall(send, native)
        ref = np.concatenate([data(i * N + RANK, c, dt) for i in range(N)])
    ok = (bitwise(got, ref)
          and bitwise(np.asarray(got).reshape(-1), np.asarray(native).reshape(-1))
          and bitwise(mine, keep))
    agreed(ok, f"{prim}/{algo} dtype={dt} count={c} root={root} 2-D={shape2d} "
               f"in_place={in_place} rank={RANK}")


@SETTINGS
@given(st.data())
def test_random_bad_root_or_count_raises_everywhere(d):
    """Random invalid roots / recv sizes on a random subset of ranks: all ranks raise."""
    prim = d.draw(st.sampled_from(["bcast", "reduce", "gather", "scatter"]), "primitive")
    bad_ranks = d.draw(st.sets(st.integers(0, N - 1), min_size=1), "bad ranks")
    bad_root = d.draw(st.one_of(st.integers(N, 2**40), st.integers(-2**40, -1)), "bad root")
    same_draw(prim, sorted(bad_ranks), bad_root)
    root = bad_root if RANK in bad_ranks else 0
    x = np.arange(4.0)
    keep = x.copy()
    try:
        if prim == "bcast":
            mpicoll.bcast(x, root)
        elif prim == "reduce":
            mpicoll.reduce(x, None, MPI.SUM, root)
        elif prim == "gather":
            mpicoll.gather(x, None, root)
        else:
            mpicoll.scatter(np.arange(4.0 * N), np.empty(4), root)
        raised = None
    except mpicoll.ArgumentError as exc:
        raised = str(exc)
    ok = raised is not None and bitwise(x, keep) and (
        "root" in raised and (RANK in bad_ranks or "rank(s)" in raised))
    agreed(ok, f"{prim} bad_ranks={sorted(bad_ranks)} root={bad_root} rank={RANK}: {raised}")
    assert mpicoll.allreduce(np.ones(1))[0] == N
