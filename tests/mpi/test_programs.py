"""Compiled programs (mpicoll.engine.program): repeated calls keep the full path's guarantees.

A repeated call is served by its memo entry and runs its compiled program of
persistent requests; the default mode still agrees before anything is sent.
Here one rank differs on the 1st, the 2nd or the 100th call of the same
program -- another algorithm, op, count, dtype or collective -- and every
rank must raise ``CollectiveMismatchError`` with no user buffer written
(each buffer holds a sentinel, checked after the error), through the
functional, ``P2PComm`` and nonblocking faces; the next correct call must
then give the right result. (Persistent requests agree once, when they are
made: tests/mpi/test_nonblocking.py covers their mismatches.)
"""
import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import memo as _memo
from mpicoll.engine import program as _program

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()
ODD = 1 % max(N, 1)                       # the rank that differs
SENTINEL = -7.0

FACES = ("functional", "p2pcomm", "nonblocking")
DIFFS = ("algorithm", "op", "count", "dtype", "collective")
_p2p = {}


def _comm(algo):
    pc = _p2p.get(algo)
    if pc is None:
        pc = _p2p[algo] = mpicoll.P2PComm(comm, allreduce=algo, bcast="binomial")
    return pc


def allreduce(face, x, y, op=MPI.SUM, algo="recursive_doubling"):
    if face == "functional":
        mpicoll.allreduce(x, y, op, algorithm=algo)
    elif face == "p2pcomm":
        _comm(algo).Allreduce(x, y, op)
    else:
        mpicoll.iallreduce(x, y, op, algorithm=algo).Wait()


def bcast(face, x):
    if face == "functional":
        mpicoll.bcast(x, 0, algorithm="binomial")
    elif face == "p2pcomm":
        _comm("recursive_doubling").Bcast(x, 0)
    else:
        mpicoll.ibcast(x, 0, algorithm="binomial").Wait()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("at", (1, 2, 100))
@pytest.mark.parametrize("diff", DIFFS)
def test_one_rank_differs_on_a_repeated_call(face, at, diff):
    x, y = np.empty(4), np.empty(4)
    for k in range(at - 1):
        x[...] = np.arange(4.0) + RANK + k
        allreduce(face, x, y)
        np.testing.assert_array_equal(y, comm.allreduce(x))
    # the call where rank ODD differs: every buffer holds the sentinel
    x[...] = RANK + 1.0
    y[...] = SENTINEL
    mine = (x, y)
    with pytest.raises(mpicoll.CollectiveMismatchError):
        if RANK != ODD:
            allreduce(face, x, y)
        elif diff == "algorithm":
            allreduce(face, x, y, algo="ring")
        elif diff == "op":
            allreduce(face, x, y, op=MPI.PROD)
        elif diff == "count":
            mine = (np.full(5, 2.0), np.full(5, SENTINEL))
            allreduce(face, *mine)
        elif diff == "dtype":
            mine = (np.full(4, 2.0, np.float32), np.full(4, SENTINEL, np.float32))
            allreduce(face, *mine)
        else:
            mine = (np.full(4, SENTINEL),)
            bcast(face, mine[0])
    # nothing was written anywhere: inputs as given, outputs still the sentinel
    if RANK != ODD or diff in ("algorithm", "op"):
        np.testing.assert_array_equal(x, RANK + 1.0)
        np.testing.assert_array_equal(y, SENTINEL)
    else:
        for a in mine:
            assert (a == SENTINEL).all() or (a == 2.0).all()
        np.testing.assert_array_equal(mine[-1], SENTINEL)
    # and the same program serves the next correct call
    x[...] = np.arange(4.0) * (RANK + 1)
    allreduce(face, x, y)
    np.testing.assert_array_equal(y, comm.allreduce(x))


@pytest.mark.mpi
@pytest.mark.parametrize("primitive", ("allreduce", "bcast", "allgather", "reduce_scatter",
                                       "alltoall", "reduce", "gather", "scatter"))
def test_programs_repeat_every_algorithm_against_native(primitive):
    """Every algorithm's compiled program, run many times on new data, equals native MPI."""
    for algo in mpicoll.usable_algorithms(primitive):
        if algo == "native":
            continue
        for count in (0, 1, N + 2):
            for k in range(3):
                got, want = _one(primitive, algo, count, k)
                np.testing.assert_array_equal(got, want, err_msg=f"{primitive} {algo} {count}")


def _one(primitive, algo, count, k):
    """One call of ``primitive`` with fresh data on fixed buffers: (result, native result)."""
    key = (primitive, algo, count)
    bufs = _bufs.get(key)
    if bufs is None:
        per = count * N if primitive in ("reduce_scatter", "alltoall", "scatter") else count
        out = count * N if primitive in ("allgather", "gather", "alltoall") else count
        bufs = _bufs[key] = (np.empty(per), np.empty(out), np.empty(out))
    x, y, ref = bufs
    x[...] = np.arange(x.size) * (RANK + 1) + k
    y[...] = SENTINEL
    ref[...] = SENTINEL
    if primitive == "allreduce":
        mpicoll.allreduce(x, y, algorithm=algo)
        comm.Allreduce(x, ref)
    elif primitive == "bcast":
        y[...] = x
        mpicoll.bcast(y, 0, algorithm=algo)
        ref[...] = x
        comm.Bcast(ref, 0)
    elif primitive == "allgather":
        mpicoll.allgather(x, y, algorithm=algo)
        comm.Allgather(x, ref)
    elif primitive == "reduce_scatter":
        mpicoll.reduce_scatter_block(x, y, algorithm=algo)
        comm.Reduce_scatter_block(x, ref)
    elif primitive == "alltoall":
        mpicoll.alltoall(x, y, algorithm=algo)
        comm.Alltoall(x, ref)
    elif primitive == "reduce":
        mpicoll.reduce(x, y, root=N - 1, algorithm=algo)
        comm.Reduce(x, ref, root=N - 1)
    elif primitive == "gather":
        mpicoll.gather(x, y, root=N - 1, algorithm=algo)
        comm.Gather(x, ref, root=N - 1)
    else:
        mpicoll.scatter(x, y, root=N - 1, algorithm=algo)
        comm.Scatter(x, ref, root=N - 1)
    return y.copy(), ref.copy()


_bufs = {}


@pytest.mark.mpi
def test_a_repeated_call_runs_its_compiled_program():
    x, y = np.ones(3), np.empty(3)
    for _ in range(3):
        mpicoll.allreduce(x, y, algorithm="ring")
    entry = _memo._memo[("allreduce", id(None), "ring", id(x), id(y), id(MPI.SUM))]
    assert isinstance(entry.program, _program.Program) and entry.fast
    assert entry.program.messages == 4 * (N - 1)     # 2 (N - 1) sends, as many receives
    np.testing.assert_array_equal(y, N)


@pytest.mark.mpi
def test_persistent_start_inside_traffic_counts_a_request_made_outside():
    x, y = np.ones(N * 2), np.empty(N * 2)
    req = mpicoll.allreduce_init(x, y, algorithm="ring")
    with mpicoll.traffic() as t:
        for _ in range(3):
            req.Start()
            req.Wait()
    req.Free()
    np.testing.assert_array_equal(y, N)
    assert len(t.calls) == 3
    # the ring sends 2 (N - 1) blocks of 2 elements each
    assert t.sent_msgs == 3 * 2 * (N - 1)
    assert t.sent_bytes == 3 * 2 * (N - 1) * 2 * 8
    assert t.recv_bytes == t.sent_bytes


@pytest.mark.mpi
def test_persistent_requests_interleave_with_other_requests():
    """Two persistent requests and a nonblocking call in flight at once, waited in any order."""
    a, b = np.ones(5), np.empty(5)
    c, d = np.full(3, RANK + 1.0), np.empty(3)
    r1 = mpicoll.allreduce_init(a, b, algorithm="ring")
    r2 = mpicoll.allreduce_init(c, d, algorithm="recursive_doubling")
    for k in range(4):
        a[...] = k
        r1.Start()
        r2.Start()
        e = np.full(2, float(RANK))
        r3 = mpicoll.iallreduce(e, algorithm="ring")
        if k % 2:
            r2.Wait()
            r1.Wait()
        else:
            r1.Wait()
            r2.Wait()
        np.testing.assert_array_equal(r3.Wait(), N * (N - 1) / 2)
        np.testing.assert_array_equal(b, k * N)
        np.testing.assert_array_equal(d, N * (N + 1) / 2)
    r1.Free()
    r2.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("algo", mpicoll.usable_algorithms("barrier"))
def test_repeated_barriers_still_synchronize(algo):
    """A barrier's program keeps its order: no rank leaves before every rank arrived.

    Each round one rank arrives late (a short sleep, only to make an early exit likely
    to show); every rank marks its arrival in its own slot of an RMA window before the
    barrier and reads every slot after it. A barrier compiled without the order its
    zero-byte tokens carry would let a rank read a slot still unmarked. In ``local`` mode:
    the default mode's agreement (an ``Allgather``) would synchronize the ranks by itself.
    """
    import time
    local = comm.Dup()
    mpicoll.set_check(local, "local")
    win = MPI.Win.Allocate(8 * 64, 8, comm=comm)
    mark = np.empty(1, np.int64)
    seen = np.empty(1, np.int64)
    try:
        for k in range(12):
            if RANK == k % N:
                time.sleep(0.02)
            mark[0] = k + 1
            win.Lock(RANK)
            win.Put(mark, RANK, target=k % 64)
            win.Unlock(RANK)
            mpicoll.barrier(algorithm=algo, comm=local)
            for r in range(N):
                win.Lock(r, MPI.LOCK_SHARED)
                win.Get(seen, r, target=k % 64)
                win.Unlock(r)
                assert seen[0] == k + 1, f"round {k}: rank {r} had not arrived"
            comm.Barrier()             # nobody marks round k+1 before all read round k
    finally:
        win.Free()
        local.Free()


@pytest.mark.mpi
def test_freeing_a_communicator_frees_its_programs_first():
    """A communicator freed while programs on it live: they are freed before it, not in GC.

    A persistent request holds its communicator, and MPICH runs the communicator's attribute
    callbacks (the node's shared windows here, which call MPI) inside the request free that
    drops its last reference -- where MPI cannot be called again (the job died).
    """
    import gc
    c = comm.Dup()
    x, y = np.ones(8), np.empty(8)
    if "shm" in mpicoll.usable_algorithms("allreduce", c):
        mpicoll.allreduce(x, y, algorithm="shm", comm=c)     # windows cached on the comm
    for _ in range(3):
        mpicoll.allreduce(x, y, algorithm="ring", comm=c)
    req = mpicoll.allreduce_init(x, y, algorithm="recursive_doubling", comm=c)
    req.Start()
    req.Wait()
    np.testing.assert_array_equal(y, N)
    req.Free()
    c.Free()
    del req, x, y
    _memo._memo.clear()           # the entries and their programs go now
    gc.collect()
    z = np.empty(3)
    mpicoll.allreduce(np.ones(3), z, algorithm="ring")
    np.testing.assert_array_equal(z, N)
