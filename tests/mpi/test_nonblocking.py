"""Nonblocking and persistent collectives beyond the generated matrix.

The matrix (test_matrix.py, faces ``nonblocking`` and ``persistent``) checks
one request at a time. Here: every algorithm of a primitive outstanding at
once, waited for in a different order on different ranks, with the user's
own point-to-point traffic in between; persistent requests started many
times with new data (several active together); errors raised on every rank;
the request API of mpicoll, P2PComm and mpicoll.distributed.
"""
import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, usable

import mpicoll
import mpicoll.distributed as dist
from mpicoll.core.registry import EXTENDED_PRIMITIVES

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


def user_ring_traffic(k):
    """The user's own messages on COMM_WORLD, interleaved with outstanding collectives."""
    out = np.empty(3)
    comm.Sendrecv(np.full(3, RANK + k, dtype=float), (RANK + 1) % N, 77,
                  out, (RANK - 1) % N, 77)
    assert out.tolist() == [(RANK - 1) % N + k] * 3


def wait_in_rank_order(reqs):
    """Even ranks wait first to last, odd ranks last to first."""
    order = range(len(reqs)) if RANK % 2 == 0 else reversed(range(len(reqs)))
    res = [None] * len(reqs)
    for i in order:
        res[i] = reqs[i].Wait()
    return res


def _start(primitive, algo, c):
    """Start one nonblocking call of ``primitive``; return (request, reference on this rank)."""
    op = MPI.SUM
    mine = data(RANK, c, "float64", "SUM")
    every = [data(r, c, "float64", "SUM") for r in range(N)]
    root = (N - 1) if N > 1 else 0
    if primitive == "bcast":
        buf = mine.copy() if RANK == root else np.zeros(c)
        return mpicoll.ibcast(buf, root, algorithm=algo), every[root]
    if primitive == "reduce":
        ref = np.sum(every, axis=0) if RANK == root else None
        return mpicoll.ireduce(mine, None, op, root, algorithm=algo), ref
    if primitive == "allreduce":
        return mpicoll.iallreduce(mine, None, op, algorithm=algo), np.sum(every, axis=0)
    if primitive == "gather":
        ref = np.array(every) if RANK == root else None
        return mpicoll.igather(mine, None, root, algorithm=algo), ref
    if primitive == "allgather":
        return mpicoll.iallgather(mine, None, algorithm=algo), np.array(every)
    if primitive == "scatter":
        full = np.concatenate(every)
        req = mpicoll.iscatter(full if RANK == root else None, np.empty(c), root, algorithm=algo)
        return req, every[RANK]
    if primitive == "reduce_scatter":
        full = [data(r, c * N, "float64", "SUM") for r in range(N)]
        ref = np.sum(full, axis=0)[RANK * c:(RANK + 1) * c]
        return mpicoll.ireduce_scatter_block(full[RANK], None, op, algorithm=algo), ref
    if primitive == "alltoall":
        send = np.concatenate([data(RANK * N + j, c, "float64") for j in range(N)])
        ref = np.concatenate([data(i * N + RANK, c, "float64") for i in range(N)])
        return mpicoll.ialltoall(send, None, algorithm=algo), ref
    raise AssertionError(primitive)


@pytest.mark.mpi
# The vector collectives and the scans: their nonblocking forms are in test_vmatrix.py.
@pytest.mark.parametrize("primitive", [p for p in mpicoll.PRIMITIVES
                                       if p != "barrier" and p not in EXTENDED_PRIMITIVES])
@pytest.mark.parametrize("c", [1, 7, 2 * 8 + 1])
def test_all_algorithms_outstanding_at_once(primitive, c):
    started = []
    for k, algo in enumerate(usable(primitive)):
        started.append(_start(primitive, algo, c))
        user_ring_traffic(k)
    barrier = mpicoll.ibarrier(algorithm="dissemination")
    results = wait_in_rank_order([r for r, _ in started] + [barrier])
    for (req, ref), got, algo in zip(started, results, usable(primitive), strict=False):
        if ref is None:
            assert got is None, algo
        else:
            np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(ref).reshape(-1),
                                          err_msg=f"{primitive}/{algo} c={c}")
        assert req.Test() and req.is_completed()


@pytest.mark.mpi
def test_blocking_call_while_requests_are_outstanding():
    x = np.arange(5.0) + RANK
    q = mpicoll.iallreduce(x, None, algorithm="ring")
    y = mpicoll.allreduce(x, algorithm="recursive_doubling")   # blocking, meanwhile
    np.testing.assert_array_equal(q.Wait(), y)
    np.testing.assert_array_equal(y, comm.allreduce(x))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("algo", ["ring", "recursive_doubling", "rabenseifner"])
def test_blocking_call_before_the_wait_while_peers_wait_first(algo):
    """Rank 0 makes blocking calls (functional, memoized the second time, and P2PComm)
    before waiting; the others wait first, then make them: valid MPI. Rank 0's requests
    must advance while it blocks (a progress thread starts for them and stops once they
    are done).
    """
    from mpicoll.engine import progress
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI initialised without MPI_THREAD_MULTIPLE")
    x = np.arange(1000.0) + RANK
    z, one, y = np.empty(1000), np.ones(1), np.empty(3)
    pc = mpicoll.P2PComm(comm)               # shares COMM_WORLD's handle

    def blocking():
        b = mpicoll.allreduce(one, algorithm="ring")
        pc.Allreduce(np.ones(3), y)
        return b

    blocking()                  # (the private communicators exist before the token below)
    p = mpicoll.allreduce_init(x, z, MPI.MAX, algorithm=algo)   # a collective call itself
    for _ in range(2):
        if RANK:
            comm.Recv(np.empty(0), 0, tag=72)        # rank 0's requests have started
        q = mpicoll.iallreduce(x, None, algorithm=algo)
        p.Start()
        if RANK == 0:
            # Nobody else has started: nothing of the requests could move yet.
            for r in range(1, N):
                comm.Send(np.empty(0), r, tag=72)
            b = blocking()
            mpicoll.waitall([p, q])
        else:
            mpicoll.waitall([q, p])
            b = blocking()
        np.testing.assert_array_equal(q.result, comm.allreduce(x))
        np.testing.assert_array_equal(z, np.arange(1000.0) + N - 1)       # MAX over the ranks
        assert b.tolist() == [N] and y.tolist() == [N] * 3
        assert not progress.auto_started()       # the thread stopped with the requests
    p.Free()


def _p2p(c):
    return mpicoll.P2PComm(c, allreduce="ring")


FACES = {       # the same call in each face: a persistent one returns its request
    "blocking": lambda x, y, c: mpicoll.allreduce(x, y, algorithm="ring", comm=c),
    "persistent": lambda x, y, c: mpicoll.allreduce_init(x, y, algorithm="ring", comm=c),
    "P2PComm": lambda x, y, c: _p2p(c).Allreduce(x, y),
    "P2PComm persistent": lambda x, y, c: _p2p(c).Allreduce_init(x, y),
    "nonblocking": lambda x, y, c: mpicoll.iallreduce(x, y, algorithm="ring", comm=c).Wait(),
}
FACE_NAME = {"blocking": "allreduce", "persistent": "allreduce_init", "P2PComm": "allreduce",
             "P2PComm persistent": "allreduce_init"}


def _every_face_pairs_up(x, y, c):
    """Each face's next call completes with the right sum on every rank (the ranks'
    persistent request tags compared first: tags out of step would hang, not fail).
    """
    from mpicoll.engine.call import _state
    from mpicoll.engine.context import private_comm
    p_seq = _state(private_comm(c)).p_seq
    assert c.allgather(p_seq) == [p_seq] * N
    for face, call in FACES.items():
        y[...] = 0
        p = call(x, y, c)
        if "persistent" in face:
            p.Start()
            p.Wait()
            p.Free()
        np.testing.assert_array_equal(y, np.full(4, N * (N + 1) / 2), err_msg=face)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("mode", ["agree", "checked"])
@pytest.mark.parametrize("faces", [("blocking", "persistent"), ("persistent", "blocking"),
                                   ("P2PComm", "P2PComm persistent")])
def test_a_blocking_call_against_its_persistent_form_raises_everywhere(mode, faces):
    """Rank 0 makes the blocking call, the others its ``_init`` form (or the other way
    round): both agree through the same Allgather, and without the face in the
    fingerprint they agreed -- one rank then ran the algorithm while the others waited
    for ``Start`` (a hang). Every rank raises naming both faces -- for the functional
    faces after the blocking call was remembered (memo); each P2PComm face is a new
    drop-in (the full path) -- and the persistent tags stay in step after.
    """
    c = comm.Dup()
    try:
        mpicoll.set_check(c, mode)
        x, y = np.full(4, RANK + 1.0), np.empty(4)
        _every_face_pairs_up(x, y, c)           # the blocking calls remembered (memo)
        mine, theirs = faces
        with pytest.raises(mpicoll.CollectiveMismatchError) as err:
            FACES[mine if RANK == 0 else theirs](x, y, c)
        text = str(err.value)
        assert "the ranks called different collectives" in text
        assert f"{FACE_NAME[mine]} on rank 0" in text
        assert f"{FACE_NAME[theirs]} on rank{'s' if N > 2 else ''} 1" in text
        assert f"{mode} mode; nothing was sent" in text
        _every_face_pairs_up(x, y, c)
    finally:
        c.Free()


@pytest.mark.mpi(min_size=2)
def test_an_argument_error_in_a_blocking_call_against_its_persistent_form():
    """Rank 0's blocking call has a bad recvbuf, the others make the ``_init`` call:
    rank 0 raises its error, the others that error named with its rank and the
    mismatch.
    """
    c = comm.Dup()
    try:
        mpicoll.set_check(c, "agree")           # (not MPICOLL_CHECK's: local would hang)
        x = np.ones(4)
        with pytest.raises(mpicoll.ArgumentError) as err:
            if RANK == 0:
                mpicoll.allreduce(x, np.empty(4, np.float32), algorithm="ring", comm=c)
            else:
                mpicoll.allreduce_init(x, np.empty(4), algorithm="ring", comm=c)
        text = str(err.value)
        assert "recvbuf: expected dtype float64" in text
        if RANK:
            assert "rank(s) 0" in text
            assert "allreduce on rank 0" in text and "allreduce_init on rank" in text
        _every_face_pairs_up(np.full(4, RANK + 1.0), np.empty(4), c)
    finally:
        c.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("algo", usable("allreduce"))
def test_persistent_restarts_with_new_data(algo):
    x, y = np.empty(11), np.empty(11)
    # Two persistent requests active together, and an in-place one: its input is
    # re-read from recvbuf at every Start.
    p1 = mpicoll.allreduce_init(x, y, algorithm=algo)
    z = np.empty(4)
    p2 = mpicoll.allreduce_init(MPI.IN_PLACE, z, MPI.MAX, algorithm=algo)
    for step in range(4):
        x[...] = np.arange(11.0) * (RANK + 1) + step
        z[...] = RANK * 10 + step
        p1.Start()
        p2.Start()
        user_ring_traffic(step)
        mpicoll.waitall([p2, p1] if RANK % 2 else [p1, p2])
        np.testing.assert_array_equal(y, comm.allreduce(x))
        assert z.tolist() == [(N - 1) * 10 + step] * 4
    p1.Free()
    p2.Free()


@pytest.mark.mpi
def test_persistent_start_while_active_is_refused():
    x = np.ones(3)
    p = mpicoll.bcast_init(x, 0, algorithm="binomial")
    p.Start()
    if N > 1 and not p.Test():
        with pytest.raises(RuntimeError, match="still active"):
            p.Start()
    p.Wait()
    p.Free()
    with pytest.raises(MPI.Exception):
        p.Start()


@pytest.mark.mpi(min_size=2)
def test_bad_argument_on_one_rank_raises_everywhere():
    x = np.ones(4)
    bad = N - 1
    if RANK == bad:
        with pytest.raises(mpicoll.ArgumentError, match="root"):
            mpicoll.ibcast(x, root=N + 3)
    else:
        req = mpicoll.ibcast(x, root=0)
        with pytest.raises(mpicoll.ArgumentError, match=f"rank\\(s\\) {bad}"):
            req.Wait()
    # The communicator is still usable afterwards.
    np.testing.assert_array_equal(mpicoll.allreduce(x), np.full(4, N))


@pytest.mark.mpi(min_size=2)
def test_mismatched_nonblocking_calls_raise_everywhere():
    x = np.ones(4)
    algo = "ring" if RANK == 0 else "recursive_doubling"
    req = mpicoll.iallreduce(x, None, algorithm=algo)
    with pytest.raises(mpicoll.CollectiveMismatchError):
        req.Wait()
    np.testing.assert_array_equal(mpicoll.allreduce(x), np.full(4, N))


@pytest.mark.mpi
def test_testall_and_waitall():
    reqs = [mpicoll.iallgather(np.full(2, RANK + k), None, algorithm="ring") for k in range(3)]
    while not mpicoll.testall(reqs):
        pass
    for k, r in enumerate(reqs):
        np.testing.assert_array_equal(r.result, np.repeat(np.arange(N) + k, 2).reshape(N, 2))
    assert [r.shape for r in mpicoll.waitall(reqs)] == [(N, 2)] * 3


@pytest.mark.mpi
def test_p2pcomm_nonblocking_and_persistent_methods():
    pc = mpicoll.P2PComm(comm, allreduce="rabenseifner", bcast="scatter_allgather",
                         alltoall="bruck")
    x, y = np.arange(6.0) + RANK, np.empty(6)
    r1 = pc.Iallreduce(x, y, MPI.SUM)
    b = np.arange(9.0) if RANK == 0 else np.zeros(9)
    r2 = pc.Ibcast([b, MPI.DOUBLE], root=0)
    s = np.arange(2 * N, dtype="i") + 100 * RANK
    t = np.empty(2 * N, dtype="i")
    r3 = pc.Ialltoall(s, t)
    r4 = pc.Ibarrier()
    mpicoll.waitall([r4, r3, r2, r1])
    np.testing.assert_array_equal(y, comm.allreduce(x))
    assert b.tolist() == list(range(9))
    want = np.empty_like(t)
    comm.Alltoall(s, want)
    np.testing.assert_array_equal(t, want)
    p = pc.Allreduce_init(x, y, MPI.SUM)
    for _ in range(3):
        x += 1
        p.Start()
        p.Wait()
        np.testing.assert_array_equal(y, comm.allreduce(x))
    p.Free()
    q = pc.Barrier_init()
    q.Start()
    q.Wait()


@pytest.mark.mpi
def test_distributed_async_op():
    dist.init_process_group(backend="p2p", algorithms={"all_reduce": "ring"})
    try:
        t = np.full(5, RANK + 1.0)
        work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
        lst = [np.empty(2) for _ in range(N)]
        w2 = dist.all_gather(lst, np.full(2, float(RANK)), async_op=True)
        assert work.wait() is True
        assert w2.wait() is True and work.is_completed()
        np.testing.assert_allclose(t, np.full(5, (N + 1) / 2))
        assert [row.tolist() for row in lst] == [[float(r)] * 2 for r in range(N)]
        assert dist.barrier(async_op=True).wait()
        assert dist.all_reduce(np.ones(2)) is None      # blocking still returns None
    finally:
        dist.destroy_process_group()


@pytest.mark.mpi
def test_progress_thread_completes_requests_while_the_caller_computes():
    """MPICOLL_PROGRESS=thread: requests advance with no mpicoll call from the caller."""
    import time

    from mpicoll.engine import progress
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI initialised without MPI_THREAD_MULTIPLE")
    progress.start()
    try:
        x = np.arange(1000.0) + RANK
        reqs = [mpicoll.iallreduce(x, None, algorithm=a)
                for a in usable("allreduce")]
        reqs.append(mpicoll.ibarrier(algorithm="binomial"))
        deadline = time.monotonic() + 60
        while not all(r._done for r in reqs):          # no Test/Wait: only the thread advances
            assert time.monotonic() < deadline, "the progress thread did not complete the requests"
            time.sleep(0.001)
        user_ring_traffic(0)
        for r in wait_in_rank_order(reqs)[:-1]:
            np.testing.assert_array_equal(r, comm.allreduce(x))
        p = mpicoll.bcast_init(x, 0, algorithm="pipeline")
        for _ in range(3):
            p.Start()
            p.Wait()
        p.Free()
    finally:
        progress.stop()
    assert not progress.enabled()
