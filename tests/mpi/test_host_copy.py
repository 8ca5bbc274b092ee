"""Small calls on device arrays (blocking, nonblocking, persistent) run on host copies.

On the CPU stand-in (tests/support/fakedevice.py): the path each call takes, the
copies it makes (one to the host of the inputs, one back of the results),
the threshold (``MPICOLL_GPU_HOST_COPY``), the memo, and how such calls meet
ranks on other paths. test_device.py's ``fake-host-copy`` kind runs the whole
device matrix this way.
"""
import fakedevice as fd
import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, on_nodes, reduce_ref
from test_memo import hits

import mpicoll
from mpicoll.device import arrays as _device
from mpicoll.device import ipc as _ipc

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()

pytestmark = pytest.mark.mpi


@pytest.fixture(autouse=True)
def stand_in(monkeypatch):
    """The staged stand-in, host copies up to 4 KiB per rank."""
    ad = fd.install()
    _device.set_cuda_aware(False)
    monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "4096")
    ad.reset()
    yield ad
    _device.set_transport(None)
    _device.set_cuda_aware(None)
    fd.enable_ipc(False)


def test_each_primitive_copies_once_each_way(stand_in):
    """Every primitive on small device arrays: path host-copy, the inputs copied to the
    host once and the results back once -- none down for a rank that sends nothing, none
    back for a rank that receives nothing -- results as NumPy computes them.
    """
    c = 3
    every = [data(r, c * N, "float64") for r in range(N)]
    x = fd.to_device(every[RANK])
    cases = [
        ("allreduce", lambda: mpicoll.allreduce(x, fd.device_empty(c * N, np.float64)),
         reduce_ref(every, "SUM", "float64"), (1, 1)),
        ("allgather", lambda: mpicoll.allgather(x[:c], fd.device_empty(c * N, np.float64)),
         np.concatenate([e[:c] for e in every]), (1, 1)),
        ("alltoall", lambda: mpicoll.alltoall(x, fd.device_empty(c * N, np.float64)),
         np.concatenate([e[RANK * c:(RANK + 1) * c] for e in every]), (1, 1)),
        ("reduce_scatter", lambda: mpicoll.reduce_scatter_block(x, fd.device_empty(c, np.float64)),
         reduce_ref(every, "SUM", "float64")[RANK * c:(RANK + 1) * c], (1, 1)),
        ("reduce", lambda: mpicoll.reduce(x, fd.device_empty(c * N, np.float64)
                                          if RANK == 0 else None, MPI.SUM, 0),
         reduce_ref(every, "SUM", "float64") if RANK == 0 else None, (1, int(RANK == 0))),
        ("gather", lambda: mpicoll.gather(x[:c], fd.device_empty(c * N, np.float64)
                                          if RANK == N - 1 else None, N - 1),
         np.concatenate([e[:c] for e in every]) if RANK == N - 1 else None,
         (1, int(RANK == N - 1))),
        ("scatter", lambda: mpicoll.scatter(x if RANK == N - 1 else None,
                                            fd.device_empty(c, np.float64), N - 1),
         every[N - 1][RANK * c:(RANK + 1) * c], (int(RANK == N - 1), 1)),
    ]
    for name, call, want, (d2h, h2d) in cases:
        stand_in.reset()
        with mpicoll.traffic() as t:
            got = call()
        assert [k.path for k in t.calls] == ["host-copy"], name
        assert (stand_in.d2h, stand_in.h2d) == (d2h, h2d), name
        if want is not None:
            assert np.array_equal(fd.to_host(got).reshape(-1), want), name
    b = fd.to_device(every[0][:c] if RANK == 0 else np.zeros(c))
    stand_in.reset()
    mpicoll.bcast(b, 0)
    assert np.array_equal(fd.to_host(b), every[0][:c])
    # One buffer: copied down on the root, back on the others.
    assert (stand_in.d2h, stand_in.h2d) == ((1, 0) if RANK == 0 else (0, 1))


def test_in_place_reads_the_output_buffer(stand_in):
    y = fd.to_device(np.arange(5.0) * (RANK + 1))
    stand_in.reset()
    mpicoll.allreduce(MPI.IN_PLACE, y, algorithm="recursive_doubling")
    assert np.array_equal(fd.to_host(y), np.arange(5.0) * N * (N + 1) / 2)
    assert (stand_in.d2h, stand_in.h2d) == (1, 1)


def test_threshold_and_switch(stand_in, monkeypatch):
    """Above MPICOLL_GPU_HOST_COPY bytes per rank (or with it 0) the transport moves the
    messages; a junk value is an argument error on every rank, before anything is sent.
    """
    x = fd.to_device(np.ones(513))                     # 4104 bytes
    with mpicoll.traffic() as t:
        mpicoll.allreduce(x[:512])                     # 4096: host copies
        mpicoll.allreduce(x)
        monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "0")
        mpicoll.allreduce(x[:512])
    assert [k.path for k in t.calls] == ["host-copy", "staged", "staged"]
    monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "4 KiB" if RANK == 0 else "4096")
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_GPU_HOST_COPY: expected a byte "
                                                    "count >= 0; got '4 KiB'"):
        mpicoll.allreduce(x)
    monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "4096")
    assert (fd.to_host(mpicoll.allreduce(x[:8])) == N).all()


def test_repeated_calls_replay_the_copies(stand_in):
    """The memo replays a host-copy call with its copies: new data each time, two copies
    per call, and a change of the threshold rebinds.
    """
    x, y = fd.device_empty(4, np.float64), fd.device_empty(4, np.float64)

    def loop():
        for k in range(5):
            x.set(np.arange(4.0) + RANK + k)
            stand_in.reset()
            mpicoll.allreduce(x, y, algorithm="ring")
            assert (stand_in.d2h, stand_in.h2d) == (1, 1)
            want = sum(np.arange(4.0) + r + k for r in range(N))
            assert np.array_equal(fd.to_host(y), want)
    assert hits(loop) == 4


@pytest.mark.mpi(min_size=2)
def test_host_copy_ranks_meet_staged_ranks_but_not_ipc_ones(stand_in, monkeypatch):
    """A rank on host copies sends plain messages, as a staged rank does: they meet. An ipc
    rank of the same node would wait for headers: the agreement step refuses that split.
    """
    fd.enable_ipc(True)
    x = fd.to_device(np.full(4, RANK + 1.0))
    monkeypatch.setenv("MPICOLL_GPU_HOST_COPY", "4096" if RANK == 0 else "0")
    for transport in ("staged", "aware"):
        _device.set_transport(transport)
        with on_nodes(str(N)) as c:
            got = mpicoll.allreduce(x, comm=c, algorithm="ring")
        assert (fd.to_host(got) == N * (N + 1) / 2).all(), transport
    _device.set_transport("ipc")
    eager, _ipc.EAGER_MAX = _ipc.EAGER_MAX, 0
    try:
        with on_nodes(str(N)) as c:
            with pytest.raises(mpicoll.CollectiveMismatchError,
                               match=r"rank\(s\) 0 would not"):
                mpicoll.allreduce(x, comm=c, algorithm="ring")
    finally:
        _ipc.EAGER_MAX = eager


def test_native_keeps_the_transport(stand_in):
    """Native collectives do not take host copies; nonblocking and persistent calls do."""
    x = fd.to_device(np.full(4, 2.0))
    y = fd.device_empty(4, np.float64)
    with mpicoll.traffic() as t:
        a = mpicoll.iallreduce(x, algorithm="ring").Wait()
        p = mpicoll.allreduce_init(x, y, algorithm="ring")
        p.Start()
        p.Wait()
        b = mpicoll.allreduce(x, algorithm="native")
    assert [k.path for k in t.calls] == ["host-copy", "host-copy", "staged"]
    for got in (a, y, b):
        assert (fd.to_host(got) == 2 * N).all()


def test_persistent_requests_copy_at_every_start(stand_in):
    """A persistent request on host copies copies its inputs down at every Start (the
    in-place snapshot first) and its results back as each run ends.
    """
    x, y = fd.device_empty(5, np.float64), fd.device_empty(5, np.float64)
    z = fd.device_empty(5, np.float64)
    p = mpicoll.allreduce_init(x, y, MPI.MAX, algorithm="recursive_doubling")
    q = mpicoll.reduce_init(MPI.IN_PLACE if RANK == 0 else z, z if RANK == 0 else None,
                            root=0, algorithm="binomial")
    for k in range(4):
        host = np.arange(5.0) * (RANK + 1) + k
        x.set(host)
        z.set(host)
        stand_in.reset()
        p.Start()
        q.Start()
        assert stand_in.d2h == 2
        mpicoll.waitall([q, p] if RANK % 2 else [p, q])
        assert (stand_in.d2h, stand_in.h2d) == (2, 1 + (RANK == 0))
        want = np.empty(5)
        comm.Allreduce(host, want, MPI.MAX)
        assert np.array_equal(fd.to_host(y), want)
        total = comm.allreduce(host)
        if RANK == 0:
            assert np.array_equal(fd.to_host(z), total)
    p.Free()
    q.Free()


def test_nonblocking_calls_copy_once_each_way_and_replay(stand_in):
    """A small nonblocking call on device arrays: its inputs copied down when it is made,
    its results back when it completes (one copy each way), requests in flight at once
    kept apart (their mirrors are their own), and the memo replays them with the copies.
    """
    from test_memo_requests import replays
    xs = [fd.device_empty(4, np.float64) for _ in range(2)]
    ys = [fd.device_empty(4, np.float64) for _ in range(2)]

    def loop():
        for k in range(4):
            for i, x in enumerate(xs):
                x.set(np.arange(4.0) * (i + 1) + RANK + k)
            stand_in.reset()
            how = ((MPI.SUM, "ring"), (MPI.MAX, "recursive_doubling"))
            reqs = [mpicoll.iallreduce(x, y, op, algorithm=a)
                    for x, y, (op, a) in zip(xs, ys, how, strict=True)]
            assert stand_in.d2h == 2            # both inputs copied down at the call
            for r in (reqs if RANK % 2 else reqs[::-1]):
                assert r.Wait() is not None
            assert (stand_in.d2h, stand_in.h2d) == (2, 2)
            want_sum = sum(np.arange(4.0) + r + k for r in range(N))
            want_max = np.arange(4.0) * 2 + N - 1 + k
            assert np.array_equal(fd.to_host(ys[0]), want_sum)
            assert np.array_equal(fd.to_host(ys[1]), want_max)
    with mpicoll.traffic() as t:
        mpicoll.iallreduce(xs[0], ys[0], algorithm="ring").Wait()
    assert t.calls[0].path == "host-copy"
    assert replays(loop) == 2 * 3



def test_outputs_left_partly_unwritten_keep_their_contents(stand_in):
    """Exscan's rank 0 and the gaps between v-collective blocks are not written: on host
    copies too they keep what they held (the outputs are copied down before), even after
    other calls left other data in the pinned mirrors.
    """
    mpicoll.allreduce(fd.to_device(np.full(8, 7.0)), fd.device_empty(8, np.float64))
    x = fd.to_device(np.full(4, RANK + 1.0))
    out = fd.to_device(np.full(4, -1.0))
    with mpicoll.traffic() as t:
        mpicoll.exscan(x, out)
    assert t.calls[0].path == "host-copy"
    want = np.full(4, -1.0) if RANK == 0 else np.full(4, RANK * (RANK + 1) / 2)
    assert np.array_equal(fd.to_host(out), want)
    counts = [1] * N
    displs = [2 * r + 1 for r in range(N)]                 # a gap before every block
    for name in ("gatherv", "allgatherv"):
        mpicoll.allreduce(fd.to_device(np.full(8, 7.0)), fd.device_empty(8, np.float64))
        buf = fd.to_device(np.full(2 * N + 2, -1.0))
        mine = fd.to_device(np.full(1, float(RANK)))
        with mpicoll.traffic() as t:
            if name == "gatherv":
                mpicoll.gatherv(mine, [buf, (counts, displs)] if RANK == 0 else None, 0)
            else:
                mpicoll.allgatherv(mine, [buf, (counts, displs)])
        assert t.calls[0].path == "host-copy", name
        want = np.full(2 * N + 2, -1.0)
        want[displs] = np.arange(N)
        if name == "allgatherv" or RANK == 0:
            assert np.array_equal(fd.to_host(buf), want), name


@pytest.mark.parametrize("face", ["nonblocking", "persistent"])
def test_requests_packing_a_derived_datatype_send_each_starts_data(stand_in, face):
    """A drop-in request whose device send buffer is packed first (a contiguous derived
    datatype over gapped displacements): on host copies the packing comes before the
    copies down, at every Start, so each run scatters that run's data.
    """
    pc = mpicoll.P2PComm(comm)
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    full = fd.device_empty(4 * N, np.float64)            # block r at element 4r: gaps
    out = fd.device_empty(2, np.float64)
    spec = [full, ([1] * N, [2 * r for r in range(N)]), pair] if RANK == 0 else None
    try:
        with mpicoll.traffic() as t:
            p = pc.Scatterv_init(spec, [out, 1, pair], 0) if face == "persistent" else None
            for k in range(3):
                full.set(np.arange(4.0 * N) + 100 * k)
                if p is None:
                    pc.Iscatterv(spec, [out, 1, pair], 0).Wait()
                else:
                    p.Start()
                    p.Wait()
                want = np.array([4.0 * RANK, 4.0 * RANK + 1]) + 100 * k
                assert np.array_equal(fd.to_host(out), want), (k, fd.to_host(out), want)
        assert {c.path for c in t.calls} == {"host-copy"}
        if p is not None:
            p.Free()
    finally:
        pair.Free()


def test_a_failing_copy_down_leaves_a_persistent_request_startable(stand_in, monkeypatch):
    """A copy down that raises at Start raises from Start and leaves the request inactive:
    it can be started again (and freed) once the device works.
    """
    x, y = fd.to_device(np.full(3, RANK + 1.0)), fd.device_empty(3, np.float64)
    works = stand_in.to_host
    lost = [True]

    def flaky(dev, host):
        if lost[0]:
            raise RuntimeError("fake: device lost")
        works(dev, host)
    monkeypatch.setattr(stand_in, "to_host", flaky)     # bound into the request's copies
    p = mpicoll.allreduce_init(x, y, algorithm="ring")
    with pytest.raises(RuntimeError, match="device lost"):
        p.Start()
    lost[0] = False
    p.Start()
    p.Wait()
    assert (fd.to_host(y) == N * (N + 1) / 2).all()
    p.Free()
