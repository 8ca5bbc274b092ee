"""The shm algorithms' own paths: symmetric arrays, node-shared results, the scratch segment,
the point-to-point fallback above ``MPICOLL_SHM_MAX``, what traffic() counts, and refusals.

The generated matrices (test_matrix.py, test_spec_matrix.py) already run ``shm`` on ordinary
buffers wherever it can run (refdata.usable). Here each way of reaching a peer's data is
forced in turn — ``view`` (arrays from :func:`mpicoll.shm.empty`), ``cma`` (ordinary
buffers, single-copy reads), ``segment`` (``MPICOLL_SHM_CMA=0``), and the fallback — and
every result is checked against NumPy on the rank, in rank order.
"""
import contextlib
import os

import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, on_nodes, reduce_ref

import mpicoll

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()
COUNTS = (0, 1, max(N - 1, 1), 2 * N + 1, 20011)


@contextlib.contextmanager
def env(**values):
    """A fresh ``COMM_WORLD.Dup()`` made while ``values`` are in the environment (the node's
    memory, and whether single-copy reads are used, is set up on its first shm call, here),
    its ranks on one node whatever ``MPICOLL_NODES`` the suite was launched with.
    """
    values.setdefault("MPICOLL_NODES", "")
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    c = comm.Dup()
    try:
        mpicoll.barrier(comm=c, algorithm="shm")       # makes the node memory now
        yield c
    finally:
        c.Free()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def path_of(t):
    return t.calls[-1].path


def check_primitives(c, make, expect_path, counts=COUNTS, dt="float64"):
    """Every shm primitive on ``c`` with inputs from ``make(n, dtype)`` (filled here), against
    NumPy; ``expect_path``: the traffic record's path of the data-moving calls.
    """
    for n in counts:
        every = [data(r, n, dt, "SUM") for r in range(N)]
        red = reduce_ref(every, "SUM", dt)
        x = make(n, dt)
        x[...] = every[RANK]
        with mpicoll.traffic() as t:
            got = mpicoll.allreduce(x, op=MPI.SUM, comm=c, algorithm="shm")
        assert np.array_equal(got, red), f"allreduce n={n}"
        from mpicoll.device.peer_memory import MAILBOX_BYTES
        want = "shm-mailbox" if n * np.dtype(dt).itemsize <= MAILBOX_BYTES else expect_path
        assert n == 0 or path_of(t) == want, f"path n={n}"
        for root in range(N):
            res = mpicoll.reduce(x, None, MPI.SUM, root, comm=c, algorithm="shm")
            if RANK == root:
                assert np.array_equal(res, red), f"reduce n={n} root={root}"
            b = make(n, dt)
            b[...] = every[root] if RANK == root else -1
            mpicoll.bcast(b, root, comm=c, algorithm="shm")
            assert np.array_equal(b, every[root]), f"bcast n={n} root={root}"
            g = mpicoll.gather(x, None, root, comm=c, algorithm="shm")
            if RANK == root:
                assert np.array_equal(g.reshape(N, n), np.stack(every)), f"gather root={root}"
            s = make(N * n, dt)
            s[...] = np.arange(N * n) + 7 * root
            sc = mpicoll.scatter(s if RANK == root else None, np.empty(n, dt), root,
                                 comm=c, algorithm="shm")
            assert np.array_equal(sc, s[RANK * n:(RANK + 1) * n]), f"scatter root={root}"
        ag = mpicoll.allgather(x, comm=c, algorithm="shm")
        assert np.array_equal(ag.reshape(N, n), np.stack(every)), f"allgather n={n}"
        a2 = make(N * n, dt)
        a2[...] = np.arange(N * n) + 1000 * RANK
        out = mpicoll.alltoall(a2, comm=c, algorithm="shm")
        want = np.concatenate([np.arange(RANK * n, (RANK + 1) * n) + 1000 * q for q in range(N)])
        assert np.array_equal(out, want), f"alltoall n={n}"
        rs = make(N * n, dt)
        full = [data(r, N * n, dt, "SUM") for r in range(N)]
        rs[...] = full[RANK]
        blk = mpicoll.reduce_scatter_block(rs, op=MPI.SUM, comm=c, algorithm="shm")
        assert np.array_equal(blk, reduce_ref(full, "SUM", dt)[RANK * n:(RANK + 1) * n])


def ordinary(n, dt):
    return np.empty(n, dt)


def test_ordinary_buffers_single_copy():
    with env(MPICOLL_SHM_CMA=1) as c:
        shm = mpicoll.shm.report(c)
        check_primitives(c, ordinary, "shm-cma" if shm["path"] == "cma" else "shm-segment")


def test_ordinary_buffers_through_the_segment():
    with env(MPICOLL_SHM_CMA=0) as c:
        assert mpicoll.shm.report(c)["path"] == "segment"
        check_primitives(c, ordinary, "shm-segment")


def test_symmetric_arrays_read_in_place():
    made = []

    def symmetric(n, dt):
        a = mpicoll.shm.empty(n, dt)
        made.append(a)
        return a

    before = mpicoll.shm.stats()["windows"]
    try:
        with env() as c:
            check_primitives(c, symmetric, "shm-view", counts=(0, 1, 2 * N + 1, 4099))
        assert mpicoll.shm.stats()["windows"] == before + len(made)
    finally:
        for a in made:
            mpicoll.shm.free(a)
    assert mpicoll.shm.stats()["windows"] == before


@pytest.mark.parametrize("n", [0, 1, 2 * N + 1, 20011])
def test_node_shared_result(n):
    """Allreduce and allgather into one array for the whole node: each rank writes its part,
    nothing is copied back, every rank sees the whole result.
    """
    every = [data(r, n, "float32", "SUM") for r in range(N)]
    x = mpicoll.shm.empty(n, np.float32)
    y = mpicoll.shm.zeros(n, np.float32, shared=True)
    g = mpicoll.shm.zeros(N * n, np.float32, shared=True)
    try:
        x[...] = every[RANK]
        comm.Barrier()
        with env() as c, mpicoll.traffic() as t:
            mpicoll.allreduce(x, y, op=MPI.SUM, comm=c, algorithm="shm")
            mpicoll.allgather(x, g, comm=c, algorithm="shm")
        assert np.array_equal(y, reduce_ref(every, "SUM", "float32"))
        assert np.array_equal(g.reshape(N, n), np.stack(every))
        # Reads: the reduction of this rank's slice only (N-1 peers' slices); the allgather
        # reads nothing (each rank writes its own block of the shared result).
        mine = len(np.array_split(np.arange(n), N)[RANK])
        assert t.calls[0].read_bytes == (N - 1) * mine * 4
        assert t.calls[1].read_bytes == 0
    finally:
        for a in (g, y, x):
            mpicoll.shm.free(a)


@pytest.mark.parametrize("n", [1001, 5001], ids=["mailbox", "large"])
def test_read_bytes_follow_the_cost_formulas(n):
    """traffic() counts the bytes each rank reads from its peers: the docstrings' β_r terms,
    for small calls (through the mailbox: every reducing rank reads every peer's vector)
    and large ones (each rank reduces its slice).
    """
    from mpicoll.device.peer_memory import MAILBOX_BYTES
    small = 8 * n <= MAILBOX_BYTES
    x = np.arange(n, dtype=np.float64) + RANK
    sizes = [len(p) for p in np.array_split(np.arange(n), N)]
    with env() as c, mpicoll.traffic() as t:
        mpicoll.allreduce(x, comm=c, algorithm="shm")
        mpicoll.reduce(x, None, MPI.SUM, N - 1, comm=c, algorithm="shm")
        mpicoll.bcast(x.copy(), 0, comm=c, algorithm="shm")
        mpicoll.allgather(x, comm=c, algorithm="shm")
        mpicoll.alltoall(np.zeros(N * 5), comm=c, algorithm="shm")
    ar, rd, bc, ag, a2 = t.calls
    mine = sizes[RANK]
    if small:
        assert ar.read_bytes == 8 * (N - 1) * n and ar.path == "shm-mailbox"
        assert rd.read_bytes == (8 * (N - 1) * n if RANK == N - 1 else 0)
    else:
        assert ar.read_bytes == 8 * ((N - 1) * mine + (n - mine)) and ar.path != "shm-mailbox"
        assert rd.read_bytes == 8 * ((N - 1) * mine + (n - mine if RANK == N - 1 else 0))
    assert bc.read_bytes == (0 if RANK == 0 else 8 * n)
    assert ag.read_bytes == 8 * (N - 1) * n
    assert a2.read_bytes == 8 * (N - 1) * 5
    assert not any(r.sent_msgs for r in t.calls)
    # the registered formulas say the same
    for rec, prim in ((ar, "allreduce"), (rd, "reduce")):
        count, _ = mpicoll.algorithm_info(prim, "shm").reads.at(8 * n)
        assert rec.read_bytes == 8 * count(N, RANK, n, N - 1 if prim == "reduce" else 0, None)


def test_non_commutative_op_keeps_rank_order():
    """in_0 (op) in_1 (op) ... on every rank, on each path (2x2 matrix products)."""
    def matmul(a, b, dt):
        a = np.frombuffer(a, np.float64).reshape(-1, 2, 2)
        b = np.frombuffer(b, np.float64).reshape(-1, 2, 2)
        b[...] = a @ b

    op = MPI.Op.Create(matmul, commute=False)
    try:
        k = 3
        mats = [np.array([[1.0, r + 1], [0.0, 1.0 + (r % 2)]]) for r in range(N)]
        mine = np.tile(mats[RANK], (k, 1, 1)).ravel()
        want = mats[0]
        for m in mats[1:]:
            want = want @ m
        # A whole matrix per element: a contiguous datatype of 4 doubles.
        mtype = MPI.DOUBLE.Create_contiguous(4).Commit()
        try:
            for cma in (1, 0):
                with env(MPICOLL_SHM_CMA=cma) as c:
                    out = np.empty_like(mine)
                    mpicoll.P2PComm(c, allreduce="shm").Allreduce([mine, k, mtype],
                                                                   [out, k, mtype], op)
                    assert np.allclose(out.reshape(k, 2, 2), np.tile(want, (k, 1, 1))), cma
        finally:
            mtype.Free()
    finally:
        op.Free()


def test_in_place_allreduce_equals_out_of_place_across_chunks():
    """In place, each rank's slice is both an input and the output: chunk by chunk its own
    elements are kept before the chunk is written. Over slices of several cache chunks,
    with a sum (rank order: the same bits as out of place) and a non-commutative user op
    (2x2 matrix products), on both read paths.
    """
    from mpicoll.device.peer_memory import CHUNK
    n = N * (2 * CHUNK // 8 + 7) + 3                  # float64: > 2 chunks per rank's slice
    rng = np.random.default_rng(17 + RANK)
    mine = rng.standard_normal(n)

    def matmul(a, b, dt):
        a = np.frombuffer(a, np.float64).reshape(-1, 2, 2)
        b = np.frombuffer(b, np.float64).reshape(-1, 2, 2)
        b[...] = a @ b

    op = MPI.Op.Create(matmul, commute=False)
    mtype = MPI.DOUBLE.Create_contiguous(4).Commit()
    k = n // 4
    mats = np.tile(np.array([[1.0, RANK + 1], [0.0, 1.0 + (RANK % 2)]]), (k, 1, 1)).ravel()
    try:
        for cma in (1, 0):
            with env(MPICOLL_SHM_CMA=cma) as c:
                out = np.empty_like(mine)
                mpicoll.allreduce(mine, out, comm=c, algorithm="shm")
                inplace = mine.copy()
                mpicoll.allreduce(MPI.IN_PLACE, inplace, comm=c, algorithm="shm")
                assert np.array_equal(inplace, out), cma
                assert np.array_equal(out, reduce_ref(
                    [np.random.default_rng(17 + r).standard_normal(n) for r in range(N)],
                    "SUM", np.float64)), cma
                p2p = mpicoll.P2PComm(c, allreduce="shm")
                mout = np.empty_like(mats)
                p2p.Allreduce([mats, k, mtype], [mout, k, mtype], op)
                mine_in_place = mats.copy()
                p2p.Allreduce(MPI.IN_PLACE, [mine_in_place, k, mtype], op)
                assert np.array_equal(mine_in_place, mout), cma
                want = np.eye(2)
                for r in range(N):
                    want = want @ np.array([[1.0, r + 1], [0.0, 1.0 + (r % 2)]])
                assert np.allclose(mout.reshape(k, 2, 2), np.tile(want, (k, 1, 1))), cma
    finally:
        mtype.Free()
        op.Free()


def test_fallback_above_the_segment_cap():
    """No single-copy reads and a segment too small for the call: every rank runs the
    point-to-point algorithm instead (messages, no reads), with the same results.
    """
    n = 4096
    every = [data(r, n, "float64", "SUM") for r in range(N)]
    with env(MPICOLL_SHM_CMA=0, MPICOLL_SHM_MAX=1024) as c:
        with mpicoll.traffic() as t:
            got = mpicoll.allreduce(every[RANK], op=MPI.SUM, comm=c, algorithm="shm")
            small = mpicoll.allreduce(every[RANK][:8], op=MPI.SUM, comm=c, algorithm="shm")
        assert np.array_equal(got, reduce_ref(every, "SUM", "float64"))
        assert np.array_equal(small, reduce_ref([e[:8] for e in every], "SUM", "float64"))
        big, little = t.calls
        assert big.read_bytes == 0
        assert (big.sent_msgs > 0) == (N > 1)
        assert little.sent_msgs == 0 and little.path == "shm-mailbox"    # small: the mailbox


def test_refused_across_nodes_on_every_rank():
    if N < 2:
        pytest.skip("needs two ranks to make two nodes")
    with on_nodes("1") as c:
        with pytest.raises(mpicoll.ArgumentError, match="algorithm.*one node"):
            mpicoll.allreduce(np.ones(4), comm=c, algorithm="shm")
        # auto never picks it there, and still answers
        assert np.array_equal(mpicoll.allreduce(np.ones(4), comm=c), np.full(4, N))


def test_report_and_bad_arguments():
    rep = mpicoll.shm.report()
    assert [d["ranks"] for d in rep["nodes"]] == [N]
    assert rep["path"] in ("cma", "segment")
    assert rep["nodes"][0]["cma"] == (rep["path"] == "cma")
    with pytest.raises(mpicoll.ArgumentError, match="a: expected an array made by"):
        mpicoll.shm.free(np.zeros(3))
    old = os.environ.get("MPICOLL_SHM_MAX")
    os.environ["MPICOLL_SHM_MAX"] = "lots"
    try:
        with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_SHM_MAX: expected"):
            mpicoll.shm.report()
    finally:
        if old is None:
            del os.environ["MPICOLL_SHM_MAX"]
        else:
            os.environ["MPICOLL_SHM_MAX"] = old


@pytest.mark.parametrize("cma", [1, 0])
def test_sizes_that_differ_over_the_node_are_refused_on_every_rank(cma):
    """A rank reads its peers' arrays as if they had its own size: where they do not, every
    rank raises (none reads past a peer's buffer, none is left waiting).
    """
    if N < 2:
        pytest.skip("needs two ranks")
    with env(MPICOLL_SHM_CMA=cma) as c:
        mpicoll.set_check(c, "local")       # the agreement would catch it before the shm code
        x = np.ones(4 + RANK)
        for call, name in [(lambda: mpicoll.allreduce(x, comm=c, algorithm="shm"), "sendbuf"),
                           (lambda: mpicoll.bcast(x, 0, comm=c, algorithm="shm"), "buf"),
                           (lambda: mpicoll.allgather(x, comm=c, algorithm="shm"), "sendbuf"),
                           (lambda: mpicoll.scatter(np.ones(N * N) if RANK == 0 else None,
                                                    np.empty(N + (RANK == N - 1)), 0, comm=c,
                                                    algorithm="shm"), "recvbuf")]:
            with pytest.raises(mpicoll.ArgumentError,
                               match=f"{name}: the shm algorithm needs the same number"):
                call()
        # and the communicator still works
        assert np.array_equal(mpicoll.allreduce(np.ones(3), comm=c, algorithm="shm"),
                              np.full(3, N))


def test_auto_takes_shm_for_large_calls_on_one_node():
    """auto: shm from SHM_FROM bytes on one node with host arrays, never across nodes."""
    from mpicoll.core.defaults import SHM_FROM
    big = np.ones(SHM_FROM["allreduce"] // 8)
    with env() as c, mpicoll.traffic() as t:
        got = mpicoll.allreduce(big, comm=c)
        mpicoll.allreduce(big[:1000], comm=c)
    assert np.array_equal(got, np.full(big.size, N))
    assert [r.algorithm for r in t.calls] == ["shm" if N > 1 else t.calls[0].algorithm,
                                              t.calls[1].algorithm]
    assert t.calls[1].algorithm != "shm"
    if N > 1:
        with on_nodes("1") as c, mpicoll.traffic() as t:
            got = mpicoll.allreduce(big, comm=c)
        assert np.array_equal(got, np.full(big.size, N)) and t.calls[0].algorithm != "shm"
