"""Nonblocking and persistent collectives on device buffers: every transport in the engine.

The same array kinds as test_device.py (``fake-staged``, ``fake-aware``,
``fake-ipc`` on the CPU stand-in; ``cupy``/``cupy-ipc`` on a GPU). Each
request runs its plan step by step in mpicoll's progress engine on a
transport of its own — not at the call — so it must wait for its peers
like any MPI request, stage into buffers of its own, and (``ipc``) answer
its peers' headers while it waits.
"""
import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, reduce_ref, usable
from test_device import check_cases, device_algorithms, device_cases, kind  # noqa: F401
from test_matrix import assert_same

import mpicoll
from mpicoll import gpu
from mpicoll.core.topology import layout
from mpicoll.device import arrays as _device
from mpicoll.engine import nonblocking as nb
from mpicoll.engine.context import private_comm


@pytest.fixture(autouse=True)
def _not_host_copy(request):
    """Requests run on host copies in the ``*-host-copy`` kinds (every case is small
    enough there): no message moves through ipc then.
    """
    spec = getattr(request.node, "callspec", None)
    if spec is not None and str(spec.params.get("kind", "")).endswith("host-copy") and \
            "through_ipc" in request.node.name:
        pytest.skip("calls on host copies send no ipc message")

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


@pytest.mark.mpi
@pytest.mark.parametrize("face", ["nonblocking", "persistent"])
@pytest.mark.parametrize("primitive,algo", device_algorithms())
def test_device_requests_matrix(kind, face, primitive, algo):  # noqa: F811
    """Every algorithm through ``i<name>(...).Wait()`` and ``<name>_init`` + Start/Wait, on
    device arrays: checked against NumPy and, bitwise, against native on the same arrays.
    """
    if N > 5:
        # CI's slowest launch (8 ranks on 2 cores): the engine and the transports do not
        # depend on N beyond the plans, which the blocking device matrix and the host
        # matrix's request faces check at N = 8; this matrix runs at N = 1..5.
        pytest.skip("device request matrix: run at N <= 5")
    fn = mpicoll.algorithm_info(primitive, algo)
    rooted = primitive in ("bcast", "reduce", "gather", "scatter")
    roots = sorted({0, N - 1}) if rooted else [0, 1] if primitive == "reduce_scatter" else [0]
    cases = device_cases(primitive, fn, light=True)
    if kind[0].endswith("host-copy"):
        with mpicoll.traffic() as t:
            assert check_cases(kind, primitive, algo, cases, roots, face) > 0
        assert "host-copy" in {c.path for c in t.calls}     # the hand-written calls took it
    else:
        assert check_cases(kind, primitive, algo, cases, roots, face) > 0
    assert nb.active_count() == 0


@pytest.mark.mpi(min_size=2)
def test_a_device_request_waits_for_its_peers_not_at_the_call(kind):  # noqa: F811
    """Rank 1 starts the call only after rank 0's request has returned and been tested:
    a request that ran at the call (blocking) would never return on rank 0.
    """
    name, dev, host = kind
    x = dev(data(RANK, 2 * N + 1, "float64"))
    want = reduce_ref([data(r, 2 * N + 1, "float64") for r in range(N)], "SUM", "float64")
    token = np.zeros(1)
    if RANK == 1:
        comm.Recv(token, 0, tag=71)
    req = mpicoll.iallreduce(x, None, MPI.SUM, algorithm="ring")
    if RANK == 0:
        assert not req.Test(), name          # rank 1 has not even started it
        comm.Send(token, 1, tag=71)
    assert_same(host(req.Wait()), want, f"{name} rank={RANK}")


@pytest.mark.mpi
def test_device_requests_outstanding_with_blocking_calls_between(kind):  # noqa: F811
    """Three requests per rank (two algorithms, one persistent restarted with new data),
    a blocking call and user traffic between their start and their waits, waited in
    another order on odd ranks; the blocking call's staging arena is untouched.
    """
    name, dev, host = kind
    c = 3 * N + 2
    every = [data(r, c, "float64") for r in range(N)]
    x = dev(every[RANK])
    total = reduce_ref(every, "SUM", "float64")
    top = reduce_ref(every, "MAX", "float64")
    y = dev(np.zeros(c))
    p = mpicoll.allreduce_init(x, y, MPI.MAX, algorithm="recursive_doubling")
    for step in range(3):
        x.set(every[RANK] + step)                       # CuPy's host-to-device copy
        r1 = mpicoll.iallreduce(x, None, MPI.SUM, algorithm="ring")
        p.Start()
        r2 = mpicoll.iallgather(x, None, algorithm="ring")
        arenas = _device.staging_stats()
        blocking = mpicoll.allreduce(x, None, MPI.SUM, algorithm="rabenseifner")
        assert all(a["live"] == 0 for a in _device.staging_stats().values()), arenas
        got = comm.sendrecv(RANK, (RANK + 1) % N, source=(RANK - 1) % N)
        assert got == (RANK - 1) % N
        order = [r2, p, r1] if RANK % 2 else [r1, r2, p]
        mpicoll.waitall(order)
        what = f"{name} step={step} rank={RANK}"
        assert_same(host(r1.result), total + N * step, what + " iallreduce")
        assert_same(host(blocking), total + N * step, what + " blocking")
        assert_same(host(y), top + step, what + " persistent")
        assert_same(host(r2.result).reshape(N, c), np.array(every) + step, what + " iallgather")
    p.Free()
    assert nb.active_count() == 0


@pytest.mark.mpi
def test_progress_thread_drives_device_requests(kind):  # noqa: F811
    """MPICOLL_PROGRESS=thread: device requests complete with no mpicoll call from the
    caller (the thread runs their steps with the data's device current).
    """
    import time

    from mpicoll.engine import progress
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI initialised without MPI_THREAD_MULTIPLE")
    name, dev, host = kind
    every = [data(r, 1003, "float64") for r in range(N)]
    want = reduce_ref(every, "SUM", "float64")
    progress.start()
    try:
        x = dev(every[RANK])
        reqs = [mpicoll.iallreduce(x, None, MPI.SUM, algorithm=a)
                for a in usable("allreduce", device=True)]
        deadline = time.monotonic() + 60
        while not all(r._done for r in reqs):          # no Test/Wait: only the thread advances
            assert time.monotonic() < deadline, f"{name}: the thread did not complete them"
            time.sleep(0.001)
        for r, a in zip(reqs, usable("allreduce", device=True), strict=True):
            assert_same(host(r.Wait()), want, f"{name} {a} rank={RANK}")
    finally:
        progress.stop()
    assert not progress.enabled()


@pytest.mark.mpi(min_size=2)
def test_ipc_requests_move_through_ipc(kind):  # noqa: F811
    """On ipc, a nonblocking call's messages between ranks of one node take the ipc
    protocols: mapped (the ring's 8 KiB chunks) and eager (one double per rank).
    """
    name, dev, host = kind
    if not name.endswith("-ipc"):
        pytest.skip("ipc kinds only")
    if layout(private_comm(comm)).n_nodes > 1:
        pytest.skip("ranks on several nodes (MPICOLL_NODES)")

    def sent(path):
        return sum(st.get("sent_" + path, 0) for st in gpu.ipc_stats().values())
    before = sent("ipc"), sent("eager")
    mpicoll.iallreduce(dev(data(RANK, 1024 * N, "float64")), None, MPI.SUM,
                       algorithm="ring").Wait()
    mpicoll.iallgather(dev(data(RANK, 1, "float64")), None, algorithm="ring").Wait()
    assert sent("ipc") - before[0] == 2 * (N - 1)
    assert sent("eager") - before[1] == N - 1


@pytest.mark.mpi(min_size=2)
def test_blocking_device_call_before_the_wait_while_peers_wait_first(kind):  # noqa: F811
    """Rank 0 makes a blocking call on device arrays before waiting for its requests; the
    others wait first (valid MPI): rank 0's requests advance meanwhile (on ipc: its peers'
    headers are answered) through the progress thread started for them.
    """
    from mpicoll.engine import progress
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI initialised without MPI_THREAD_MULTIPLE")
    name, dev, host = kind
    every = [data(r, 1003, "float64") for r in range(N)]
    x = dev(every[RANK])
    mpicoll.barrier()           # (the private communicator exists before the token below)
    if RANK:
        comm.Recv(np.empty(0), 0, tag=73)            # rank 0's requests have started
    reqs = [mpicoll.iallreduce(x, None, MPI.SUM, algorithm=a) for a in ("ring", "rabenseifner")]
    reqs.append(mpicoll.iallgather(x, None, algorithm="ring"))
    if RANK == 0:
        for r in range(1, N):                        # nothing of them could move yet
            comm.Send(np.empty(0), r, tag=73)
        b = mpicoll.allreduce(x, None, MPI.MAX, algorithm="recursive_doubling")
        mpicoll.waitall(reqs)
    else:
        mpicoll.waitall(reqs[::-1])
        b = mpicoll.allreduce(x, None, MPI.MAX, algorithm="recursive_doubling")
    what = f"{name} rank={RANK}"
    for r in reqs[:2]:
        assert_same(host(r.result), reduce_ref(every, "SUM", "float64"), what)
    assert_same(host(reqs[2].result).reshape(N, -1), np.array(every), what)
    assert_same(host(b), reduce_ref(every, "MAX", "float64"), what)
    assert not progress.auto_started()       # stopped with the requests
