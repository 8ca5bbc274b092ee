"""The memo of repeated nonblocking calls (mpicoll.engine.memo.start): fast, but never stale.

A repeated ``i...`` call with the same buffers replays the program the last
identical call bound — as a new request, with a tag of its own and the same
Iallgather agreement — once the request last made from it completed. Each
test checks one thing such a replay must keep: new data every time, in-place
snapshots, requests in flight interleaved and waited in any order, a call
repeated while its twin is still in flight, a mismatch or a bad argument on
one rank, check modes, the environment's algorithm, the drop-in's ``I...``
methods, and device arrays on every transport (the CPU stand-in).
Results are compared with mpi4py's native collectives on the same data.
"""
import contextlib

import fakedevice as fd
import numpy as np
import pytest
from mpi4py import MPI
from refdata import on_nodes, runs_as_plan, usable
from test_memo import count_calls, fake, ipc_moved  # noqa: F401  (fake: the device fixture)

import mpicoll
from mpicoll.device import arrays as _device
from mpicoll.device import ipc as _ipc
from mpicoll.engine import memo as _memo
from mpicoll.engine.call import Call

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


def replays(fn):
    """Run ``fn`` and count the requests a memo entry made (replays that were not misses,
    nor exchanges that sent the call on along the full path).
    """
    return count_calls(_memo._RequestEntry, "start", fn,
                       lambda req: req is not _memo._MISS and type(req) is not Call)


@pytest.mark.mpi
@pytest.mark.parametrize("algo", usable("allreduce"))
def test_repeated_requests_see_new_data(algo):
    x, y = np.empty(5), np.empty(5)

    def loop():
        for k in range(6):
            x[...] = np.arange(5.0) * (RANK + 1) + k
            req = mpicoll.iallreduce(x, y, algorithm=algo)
            assert req.Wait() is y
            np.testing.assert_array_equal(y, comm.allreduce(x))
    n = replays(loop)
    # native and the shm algorithms run at the call (no program to replay); the others
    # are plans.
    assert n == (5 if runs_as_plan("allreduce", algo) else 0)


@pytest.mark.mpi
def test_every_primitive_repeats_as_requests():
    c = 3
    buf = np.empty(c)
    send = np.arange(c * N, dtype=float) + RANK
    recv, want = np.empty(c * N), np.empty(c * N)
    blk, src = np.empty(c), np.empty(c)
    counts = [k % 3 + 1 for k in range(N)]
    part = np.empty(counts[RANK])
    rs_send = np.arange(sum(counts), dtype=float) * (RANK + 1)

    def loop():
        for k in range(4):
            root = k % N
            buf[...] = k if RANK == root else -1
            mpicoll.ibcast(buf, root).Wait()
            assert buf.tolist() == [k] * c
            mpicoll.iallgather(buf, recv).Wait()
            assert recv.tolist() == [k] * (c * N)
            send[0] = k
            mpicoll.ialltoall(send, recv).Wait()
            comm.Alltoall(send, want)
            np.testing.assert_array_equal(recv, want)
            mpicoll.ireduce_scatter_block(send, blk).Wait()
            np.testing.assert_array_equal(blk, comm.allreduce(send)[RANK * c:(RANK + 1) * c])
            rs_send[-1] = k + RANK
            mpicoll.ireduce_scatter(rs_send, part, counts).Wait()
            total = comm.allreduce(rs_send)
            lo = sum(counts[:RANK])
            np.testing.assert_array_equal(part, total[lo:lo + counts[RANK]])
            src[...] = send[:c]
            out = mpicoll.ireduce(src, blk if RANK == N - 1 else None, MPI.MAX, N - 1).Wait()
            top = np.empty(c)
            comm.Allreduce(src, top, MPI.MAX)
            if RANK == N - 1:
                assert out is blk
                np.testing.assert_array_equal(blk, top)
            else:
                assert out is None
            got = mpicoll.igather(buf, recv if RANK == root else None, root).Wait()
            if RANK == root:
                assert got is recv and recv.tolist() == [k] * (c * N)
            send[...] = np.arange(c * N) + 10 * k
            mpicoll.iscatter(send, blk, root).Wait()
            np.testing.assert_array_equal(blk, np.arange(c * RANK, c * (RANK + 1)) + 10 * k)
            mpicoll.ibarrier().Wait()
    # Every call with fixed arguments replays from its second round on (the rooted ones
    # too where the root comes round again); a barrier at N = 1 moves nothing.
    assert replays(loop) >= 3 * (6 if N > 1 else 5)


@pytest.mark.mpi
def test_in_place_requests_take_a_fresh_snapshot():
    """In-place calls whose algorithms read a snapshot of the input (reduce on the root,
    reduce_scatter_block, alltoall) copy it when the call is made: a replay copies it
    again, so every round reduces or exchanges that round's data.
    """
    y = np.empty(4)
    r = np.empty(2 * N)
    a = np.empty(2 * N)

    def loop():
        for k in range(5):
            y[...] = np.arange(4.0) + RANK + k
            host = y.copy()
            mpicoll.iallreduce(MPI.IN_PLACE, y, algorithm="recursive_doubling").Wait()
            np.testing.assert_array_equal(y, comm.allreduce(host))
            y[...] = host
            mpicoll.ireduce(MPI.IN_PLACE if RANK == 0 else y, y if RANK == 0 else None,
                            root=0, algorithm="binomial").Wait()
            if RANK == 0:
                np.testing.assert_array_equal(y, comm.allreduce(host))
            else:
                comm.allreduce(host)
            r[...] = np.arange(2.0 * N) * (RANK + 1) + k
            total = comm.allreduce(r)
            mpicoll.ireduce_scatter_block(MPI.IN_PLACE, r, algorithm="pairwise").Wait()
            np.testing.assert_array_equal(r[:2], total[2 * RANK:2 * RANK + 2])
            a[...] = np.arange(2.0 * N) + 100 * RANK + k
            want = np.empty(2 * N)
            comm.Alltoall(a.copy(), want)
            mpicoll.ialltoall(MPI.IN_PLACE, a, algorithm="pairwise").Wait()
            np.testing.assert_array_equal(a, want)
    assert replays(loop) == 4 * 4


@pytest.mark.mpi
def test_requests_in_flight_keep_their_own_tags():
    """Several replayed requests in flight at once, waited in a different order on
    different ranks, with blocking calls between: each keeps its own messages.
    """
    xs = [np.empty(3) for _ in range(3)]
    ys = [np.empty(3) for _ in range(3)]
    algos = ["ring", "recursive_doubling", "ring"]

    def loop():
        for k in range(4):
            reqs = []
            for i, (x, y, a) in enumerate(zip(xs, ys, algos, strict=True)):
                x[...] = np.arange(3.0) + 10 * i + k * (RANK + 1)
                reqs.append(mpicoll.iallreduce(x, y, algorithm=a))
            z = mpicoll.allreduce(np.full(2, RANK + 1.0))        # blocking, meanwhile
            assert (z == N * (N + 1) / 2).all()
            order = reqs if RANK % 2 else reqs[::-1]
            for r in order:
                r.Wait()
            for x, y in zip(xs, ys, strict=True):
                np.testing.assert_array_equal(y, comm.allreduce(x))
    assert replays(loop) == 9


@pytest.mark.mpi
def test_a_call_repeated_while_its_twin_is_in_flight():
    """The same call made again before its first request completed (legal here: off the
    root nothing is written) takes the full path: the program is busy.
    """
    x = np.empty(4)
    for k in range(3):
        x[...] = RANK + k
        reqs = [mpicoll.ireduce(x, None, root=0, algorithm="binomial") for _ in range(3)]
        outs = mpicoll.waitall(reqs)
        want = comm.allreduce(x)
        for out in outs:
            if RANK == 0:
                np.testing.assert_array_equal(out, want)
            else:
                assert out is None


@pytest.mark.mpi(min_size=2)
def test_mismatch_after_request_memo_raises_everywhere():
    x, y = np.ones(4), np.empty(4)
    for _ in range(3):
        mpicoll.iallreduce(x, y, algorithm="recursive_doubling").Wait()
    algo = "ring" if RANK == 1 else "recursive_doubling"
    req = mpicoll.iallreduce(x, y, algorithm=algo)
    with pytest.raises(mpicoll.CollectiveMismatchError):
        req.Wait()
    # A failed program is not replayed: the next call binds anew there, and is right
    # (rank 1 failed in its "ring" call: its recursive-doubling program is fine).
    n = replays(lambda: mpicoll.iallreduce(x, y, algorithm="recursive_doubling").Wait())
    assert n == (1 if RANK == 1 else 0)
    assert (y == N).all()
    assert replays(lambda: mpicoll.iallreduce(x, y, algorithm="recursive_doubling").Wait()) == 1


@pytest.mark.mpi(min_size=2)
def test_bad_argument_on_one_rank_after_request_memo():
    x = np.ones(4)
    for _ in range(3):
        mpicoll.ibcast(x, 0).Wait()
    if RANK == 1:
        with pytest.raises(mpicoll.ArgumentError, match="root"):
            mpicoll.ibcast(x, N + 2)
    else:
        req = mpicoll.ibcast(x, 0)
        with pytest.raises(mpicoll.ArgumentError, match="rank"):
            req.Wait()
    x[...] = 7.0 if RANK == 0 else 0.0
    mpicoll.ibcast(x, 0).Wait()
    assert (x == 7.0).all()


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["checked", "local"])
def test_requests_replay_in_every_check_mode(mode):
    with on_nodes(str(N)) as c:
        mpicoll.set_check(c, mode)
        x, y = np.empty(3), np.empty(3)

        def loop():
            for k in range(4):
                x[...] = RANK * k + 1.0
                mpicoll.iallreduce(x, y, comm=c, algorithm="ring").Wait()
                np.testing.assert_array_equal(y, comm.allreduce(x))
        assert replays(loop) == 3


@pytest.mark.mpi
def test_request_memo_rereads_the_environment(monkeypatch):
    x, y = np.ones(3), np.empty(3)
    for algo in ("ring", "recursive_doubling", "ring"):
        monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", algo)
        with mpicoll.traffic() as t:
            mpicoll.iallreduce(x, y).Wait()
        assert t.calls[0].algorithm == algo and (y == N).all()
        assert replays(lambda: mpicoll.iallreduce(x, y).Wait()) == 0     # bound under algo
        assert replays(lambda: mpicoll.iallreduce(x, y).Wait()) == 1
        assert (y == N).all()


@pytest.mark.mpi
def test_p2pcomm_nonblocking_methods_repeat_correctly():
    pc = mpicoll.P2PComm(comm, allreduce="recursive_doubling", bcast="binomial")
    x, y = np.empty(6), np.empty(6)
    b = np.empty(4, np.int32)

    def loop():
        for k in range(4):
            x[...] = np.arange(6.0) * (RANK + 1) + k
            pc.Iallreduce(x, y, MPI.MAX).Wait()
            want = np.empty(6)
            comm.Allreduce(x, want, MPI.MAX)
            np.testing.assert_array_equal(y, want)
            hb = np.arange(4, dtype=np.int32) + (k if RANK == 0 else -1)
            b[...] = hb
            pc.Ibcast(b, root=0).Wait()
            comm.Bcast(hb, root=0)
            np.testing.assert_array_equal(b, hb)
    assert replays(loop) == 6


@pytest.mark.mpi
@pytest.mark.parametrize("transport", ["staged", "aware", "ipc", "ipc-mapped"])
@pytest.mark.parametrize("algo", ["ring", "recursive_doubling"])
def test_device_requests_repeat_on_their_transport(fake, transport, algo):  # noqa: F811
    """Repeated nonblocking calls on the same device arrays replay their program on its own
    transport and see new data; two in flight at once keep apart.
    """
    _device.set_transport(transport.split("-")[0])
    if transport == "ipc-mapped":
        _ipc.EAGER_MAX = 0
    with on_nodes(str(N)) as c:
        x1, y1 = fd.device_empty(5, np.float64), fd.device_empty(5, np.float64)
        x2, y2 = fd.device_empty(5, np.float64), fd.device_empty(5, np.float64)

        def loop():
            for k in range(5):
                h1 = np.arange(5.0) * (RANK + 1) + k
                h2 = np.full(5, RANK - k, dtype=float)
                x1.set(h1)
                x2.set(h2)
                r1 = mpicoll.iallreduce(x1, y1, comm=c, algorithm=algo)
                r2 = mpicoll.iallreduce(x2, y2, MPI.MIN, comm=c, algorithm=algo)
                for r in ([r2, r1] if RANK % 2 else [r1, r2]):
                    r.Wait()
                np.testing.assert_array_equal(fd.to_host(y1), comm.allreduce(h1))
                low = np.empty(5)
                comm.Allreduce(h2, low, MPI.MIN)
                np.testing.assert_array_equal(fd.to_host(y2), low)
        assert replays(loop) == 8
        if N > 1 and transport.startswith("ipc"):
            assert ipc_moved(c) > 0


@pytest.mark.mpi
def test_nonblocking_v_calls_replay_beside_ranks_on_the_full_path():
    """A call that exchanges counts before it can validate (the v-collectives) replays
    that exchange too: the ranks that send the same arrays replay while the root, which
    allocates its result every time, takes the full path -- one exchange on every rank,
    no hang, the right result.
    """
    x = np.empty(2)

    def loop():
        for k in range(3):
            x[...] = RANK + k
            got = mpicoll.igatherv(x, None, 0).Wait()
            want = np.repeat(np.arange(N, dtype=float) + k, 2)
            if RANK == 0:
                np.testing.assert_array_equal(got, want)
            out = mpicoll.iallgatherv(x, None).Wait()      # allocates: never replayed
            np.testing.assert_array_equal(out, want)
    assert replays(loop) == (0 if RANK == 0 else 2)


@pytest.mark.mpi
@pytest.mark.parametrize("face", ["blocking", "nonblocking"])
def test_counts_in_an_array_mutated_between_calls(face):
    """reduce_scatter's recvcounts as a NumPy array changed in place between two calls
    with the same objects: the memo compares counts by value, so the second call uses
    the new counts (not the remembered ones).
    """
    r = np.empty(3 * N)
    counts = np.ones(N, dtype=np.int64)
    for k in range(4):
        counts[:] = 1 + k % 2
        lo, mine = int(counts[:RANK].sum()), int(counts[RANK])
        r[...] = np.arange(3.0 * N) * (RANK + 1) + k
        want = comm.allreduce(r[:int(counts.sum())].copy())[lo:lo + mine]
        if face == "blocking":
            mpicoll.reduce_scatter(MPI.IN_PLACE, r, counts)
        else:
            mpicoll.ireduce_scatter(MPI.IN_PLACE, r, counts).Wait()
        np.testing.assert_array_equal(r[:mine], want)


@pytest.mark.mpi
@pytest.mark.parametrize("transport", ["staged", "ipc"])
def test_in_place_device_requests_on_host_copies_refresh_the_snapshot(
        fake, transport, monkeypatch):  # noqa: F811
    """A small in-place nonblocking call on device arrays (host copies): every replay takes
    the snapshot of that round's input again before copying it down.
    """
    monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "4096")
    _device.set_transport(transport)
    with on_nodes(str(N)) as c:
        a = fd.device_empty(2 * N, np.float64)

        def loop():
            for k in range(4):
                ha = np.arange(2.0 * N) + 100 * RANK + k
                a.set(ha)
                with mpicoll.traffic() if k == 0 else contextlib.nullcontext() as t:
                    mpicoll.ialltoall(MPI.IN_PLACE, a, comm=c, algorithm="pairwise").Wait()
                if k == 0:
                    assert t.calls[0].path == "host-copy"
                want = np.empty(2 * N)
                comm.Alltoall(ha, want)
                np.testing.assert_array_equal(fd.to_host(a), want)
        assert replays(loop) == 2            # round 0 traced (no memo), 1 binds, 2-3 replay
