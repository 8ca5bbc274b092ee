"""The device path: every primitive x algorithm on device arrays, and how bytes reach MPI.

Array kinds (``MPICOLL_TEST_XP``):

- ``fake-staged`` / ``fake-aware`` (default, CPU): tests/support/fakedevice.py's
  stand-in for CuPy, with mpicoll forced onto the staged path (pinned host
  copies; the stand-in counts any device pointer MPI sees) or the CUDA-aware
  path (MPI follows ``__cuda_array_interface__``, here host memory);
- ``fake-host-copy`` (default, CPU): the stand-in, every blocking call on
  host copies of its arrays (``MPICOLL_GPU_HOST_COPY`` above every case's
  size; the suite otherwise sets it to 0, see conftest.py);
- ``fake-ipc`` (default, CPU): the stand-in with its IPC on (device memory in
  ``/dev/shm``, handles mapped by the peers) and the ``ipc`` transport forced:
  same-node peers read each other's memory, other nodes' are staged. It runs
  fewer counts, dtypes and roots than the other kinds (the transport does not
  depend on them; tests/mpi/test_ipc.py tests the protocol itself);
- ``cupy``: real CuPy arrays on this rank's GPU (``select_device``), on the
  path the MPI library supports; ``cupy-ipc``: the same through the ``ipc``
  transport (CUDA IPC between ranks of a node); ``cupy-host-copy`` (only when
  requested): every blocking case on host copies. Without a GPU these cases are
  skipped with the reason; ``MPICOLL_TEST_XP=cupy`` (or ``cupy-ipc``) makes a
  missing GPU a failure.

Results are compared with NumPy computed on the rank and, bitwise, with the
native collective on the same device arrays (itself staged where MPI is not
CUDA-aware).
"""
import os

import fakedevice as fd
import numpy as np
import pytest
from mpi4py import MPI
from refdata import OPS, data, keeps_rank_order, reduce_ref, usable
from test_matrix import assert_same, run_case

import mpicoll
from mpicoll import gpu
from mpicoll.core.registry import EXTENDED_PRIMITIVES
from mpicoll.core.topology import layout
from mpicoll.device import arrays as _device
from mpicoll.engine.context import private_comm

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()

_REQUESTED = os.environ.get("MPICOLL_TEST_XP", "").strip()
KINDS = _REQUESTED.split(",") if _REQUESTED else ["fake-staged", "fake-aware", "fake-ipc",
                                                   "fake-host-copy", "cupy", "cupy-ipc"]
if N > 5 and not _REQUESTED:
    # The CPU stand-ins move bytes the way N = 1..5 already showed (the transports do not
    # depend on N; the plans they carry are checked at every N by python -m mpicoll.verify):
    # past N = 5, on CI's 2 cores, only the real device kinds run (skipped without a GPU).
    KINDS = [k for k in KINDS if k.startswith("cupy")]

_cupy_ready = None


def _cupy_kind():
    """(dev, host) for CuPy on this rank's GPU, or pytest.skip with the reason."""
    global _cupy_ready
    ok, why = gpu.cupy_status()
    if not ok:
        if _REQUESTED.startswith("cupy"):
            pytest.fail(f"MPICOLL_TEST_XP={_REQUESTED} but {why}")
        pytest.skip(f"CuPy matrix needs a GPU: {why}")
    import cupy
    if _cupy_ready is None:
        _cupy_ready = gpu.select_device(comm)     # collective: every rank gets here
    return cupy.asarray, cupy.asnumpy


@pytest.fixture(params=KINDS)
def kind(request):
    """(name, dev, host): the array kind under test, its mpicoll path forced or detected."""
    name = request.param
    if name.startswith("cupy"):
        dev, host = _cupy_kind()          # (imports CuPy: its stand-in turns fake IPC on)
    was_ipc = fd.ADAPTER.ipc_enabled      # on under the CuPy stand-in (tests/support/fake_cupy)
    if name.startswith("cupy"):
        _device.set_cuda_aware(None)
        # The transport the run asks for (MPICOLL_GPU_TRANSPORT: gpu_proof.sh runs each).
        _device.set_transport("ipc" if name.endswith("-ipc") else None)
    else:
        fd.install()
        _device.set_cuda_aware(name == "fake-aware")
        fd.enable_ipc(name == "fake-ipc")
        dev, host = fd.to_device, fd.to_host
        # The stand-in's path is the kind's, whatever MPICOLL_GPU_TRANSPORT says.
        _device.set_transport("ipc" if name == "fake-ipc" else "auto")
    saved = os.environ.get("MPICOLL_GPU_HOST_COPY")
    if name.endswith("host-copy"):         # every case (and request) on host copies
        os.environ["MPICOLL_GPU_HOST_COPY"] = str(1 << 20)
    yield name, dev, host
    if saved is None:
        os.environ.pop("MPICOLL_GPU_HOST_COPY", None)
    else:
        os.environ["MPICOLL_GPU_HOST_COPY"] = saved
    _device.set_transport(None)
    fd.enable_ipc(was_ipc)
    _device.set_cuda_aware(None)


def fake(aware):
    """Switch to the CPU stand-in on one path (CUDA-aware or staged, no IPC, whatever
    MPICOLL_GPU_TRANSPORT says); return its adapter, counters zeroed.
    """
    ad = fd.install()
    _device.set_cuda_aware(aware)
    _device.set_transport("auto")
    fd.enable_ipc(False)
    ad.reset()
    fd.FakeDeviceArray.exports = 0
    return ad


@pytest.fixture
def restore_path():
    was_ipc = fd.ADAPTER.ipc_enabled
    yield
    _device.set_cuda_aware(None)
    _device.set_transport(None)
    fd.enable_ipc(was_ipc)


# -- the matrix on device arrays ---------------------------------------------

REDUCE_CASES = [("float64", "SUM"), ("int32", "BXOR"), ("float32", "MIN"),
                ("bool", "LOR"), ("complex128", "AFFINE")]   # AFFINE: a non-commutative user op
MOVE_DTYPES = ["float64", "int16"]


def device_cases(primitive, fn, light=False):
    """(dtype, op, count) cases; ``light``: counts 1 and 1003 of the first op and dtype, one
    odd count of an integer op and of the user op, nothing else.
    """
    counts = [1] if light else sorted({0, 1, max(N - 1, 0), 2 * N + 1})
    if primitive in ("reduce", "allreduce", "reduce_scatter"):
        for k, (dt, opname) in enumerate(REDUCE_CASES):
            if not OPS[opname].is_commutative and not keeps_rank_order(fn):
                continue
            if light and k and opname not in ("BXOR", "AFFINE"):
                continue
            for c in (counts + [1003] if k == 0 else [2 * N + 1] if light else [1, 2 * N + 1]):
                yield dt, opname, c
    else:
        for k, dt in enumerate(MOVE_DTYPES):
            for c in (counts + [1003] if k == 0 else [2 * N + 1]):
                yield dt, None, c


def device_algorithms():
    # The vector collectives and the scans are not in the device matrix yet (run_case
    # knows the seed's primitives); test_vmatrix.py checks them on host arrays.
    return [(p, a) for p in mpicoll.PRIMITIVES if p not in EXTENDED_PRIMITIVES
            for a in usable(p, device=True) if p != "barrier" and a != "native"]


@pytest.mark.mpi
@pytest.mark.parametrize("primitive,algo", device_algorithms())
def test_device_matrix(kind, primitive, algo):
    name, dev, host = kind
    fn = mpicoll.algorithm_info(primitive, algo)
    rooted = primitive in ("bcast", "reduce", "gather", "scatter")
    light = name == "fake-ipc"
    roots = (list(range(N)) if N <= (3 if light else 5) else [0, N - 1]) if rooted else \
        [0, 1] if primitive == "reduce_scatter" else [0]
    moved = _ipc_messages() if name.endswith("-ipc") else None
    if name.endswith("host-copy"):
        with mpicoll.traffic() as t:
            assert check_cases(kind, primitive, algo, device_cases(primitive, fn), roots) > 0
        assert "host-copy" in {c.path for c in t.calls}     # the hand-written calls took it
        return
    assert check_cases(kind, primitive, algo, device_cases(primitive, fn, light), roots) > 0
    lay = layout(private_comm(comm))
    if moved is not None and N > 1 and lay.n_nodes == 1:
        assert _ipc_messages() > moved        # same-node peers did read each other's memory


@pytest.mark.mpi(min_size=2)
def test_ipc_kinds_map_every_message_they_can(kind):
    """On the ipc kinds, every same-node message above the eager limit is mapped: nothing
    is refused for export or mapping (the first reasons are in the failure message), for
    arrays of several sizes -- a few KiB (small allocations of the pool, which CUDA may carve
    out of one block) to 1 MiB -- at offsets inside their allocations.
    """
    name, dev, host = kind
    if not name.endswith("-ipc"):
        pytest.skip("ipc kinds only")
    if layout(private_comm(comm)).n_nodes > 1:
        pytest.skip("ranks on several nodes (MPICOLL_NODES)")

    def stats():
        out = {}
        for st in gpu.ipc_stats().values():
            for k, v in st.items():
                out[k] = out[k] + v if isinstance(v, int) and k in out else v
        return out
    before = stats().get("sent_ipc", 0)
    keep = [dev(np.zeros(7))]                 # allocations first: the next ones sit at offsets
    for count in (600, 1000, 3001, 1 << 17):
        every = [data(r, count, "float64") for r in range(N)]
        keep.append(dev(np.zeros(3)))
        got = mpicoll.allreduce(dev(every[RANK]), algorithm="recursive_doubling")
        assert_same(host(got), reduce_ref(every, "SUM", "float64"),
                    f"{name} recursive_doubling count={count} rank={RANK}")
    st = stats()
    failed = {k: st.get(k, 0) for k in ("not_exportable", "open_failed", "nacks")}
    assert failed == dict.fromkeys(failed, 0), {**failed, **{k: v for k, v in st.items()
                                                             if k.startswith("why_")}}
    assert st.get("sent_ipc", 0) - before >= 4, st      # every rank sent each vector mapped


def check_cases(kind, primitive, algo, cases, roots, face="blocking"):
    """Run ``cases`` (dtype, op, count) at each root, in place and not, through ``face``;
    check each result against NumPy and, bitwise, against native. The number of calls.
    """
    name, dev, host = kind
    calls = 0
    for dt, opname, c in cases:
        for root in roots:
            if root >= N:
                continue
            for in_place in (False, True):
                if primitive == "bcast" and in_place:
                    continue
                what = (f"{name} {face} {primitive}/{algo} N={N} dtype={dt} op={opname} "
                        f"count={c} root={root} in_place={in_place} rank={RANK}")
                got, native, ref = run_case(primitive, algo, dt, opname, c, root, in_place,
                                            dev=dev, host=host, face=face)
                assert_same(got, ref, what + " vs NumPy")
                assert_same(got, native, what + " vs native")
                calls += 1
    return calls


def _ipc_messages():
    # Mapped or eager (small messages inside their header): the ipc transport moved them.
    return sum(st.get(k, 0) for st in gpu.ipc_stats().values()
               for k in ("sent_ipc", "recv_ipc", "sent_eager", "recv_eager"))


# -- how the bytes reach MPI -------------------------------------------------

def _every_primitive(dev, c=5):
    """One call of each primitive on device arrays (default algorithms)."""
    x = dev(data(RANK, c * N, "float64"))
    mpicoll.bcast(dev(data(0, c, "float64")), 0)
    mpicoll.reduce(x, None, MPI.SUM, 0)
    mpicoll.allreduce(x)
    mpicoll.gather(x, None, N - 1)
    mpicoll.allgather(x)
    mpicoll.scatter(x if RANK == 0 else None, dev(np.empty(c * N // N)), 0)
    mpicoll.reduce_scatter_block(x)
    mpicoll.alltoall(x)


@pytest.mark.mpi
def test_staged_path_never_hands_mpi_a_device_pointer(restore_path):
    ad = fake(aware=False)
    with mpicoll.traffic() as t:
        for algo in usable("allreduce", device=True):
            mpicoll.allreduce(fd.to_device(np.ones(2 * N + 1)), algorithm=algo)
        _every_primitive(fd.to_device)
    assert fd.FakeDeviceArray.exports == 0
    assert {c.path for c in t.calls} == {"staged"}
    if N > 1:
        assert ad.d2h > 0 and ad.h2d > 0
    assert gpu.device_path(fd.to_device(np.ones(1)))["path"] == "staged"
    assert gpu.device_path(np.ones(1))["path"] == "host"


@pytest.mark.mpi
@pytest.mark.parametrize("algo", ["ring", "recursive_doubling", "rabenseifner"])
def test_staged_copies_exactly_the_messages(algo, restore_path):
    """Builtin-op reductions stay on the device: the only host copies are the messages."""
    ad = fake(aware=False)
    with mpicoll.traffic() as t:
        y = mpicoll.allreduce(fd.to_device(data(RANK, 1003, "float64")), algorithm=algo)
    (call,) = t.calls
    assert call.path == "staged"
    assert ad.d2h == call.sent_msgs          # one device->host copy per message sent
    assert ad.h2d == call.recv_msgs          # one host->device copy per message received
    want = reduce_ref([data(r, 1003, "float64") for r in range(N)], "SUM", "float64")
    assert np.array_equal(fd.to_host(y), want)


@pytest.mark.mpi
def test_aware_path_passes_device_arrays_after_a_sync(restore_path):
    ad = fake(aware=True)
    with mpicoll.traffic() as t:
        y = mpicoll.allreduce(fd.to_device(np.full(7, RANK + 1.0)), algorithm="ring")
    (call,) = t.calls
    assert call.path == "cuda-aware"
    assert ad.d2h == ad.h2d == 0              # no staging copies at all
    if N > 1:
        # MPI followed the device pointers, and the stream was synchronised
        # before every point-to-point call.
        assert fd.FakeDeviceArray.exports >= call.sent_msgs + call.recv_msgs
        assert ad.syncs >= call.sent_msgs
    assert np.array_equal(fd.to_host(y), np.full(7, N * (N + 1) / 2))


@pytest.mark.mpi
def test_aware_native_with_a_user_op_is_staged(restore_path, monkeypatch):
    """A user op's Python function reads host memory: never give it device pointers, even
    where the library's collectives are trusted with them; the call's record says so.
    """
    monkeypatch.setenv("MPICOLL_CUDA_AWARE_COLLECTIVES", "1")
    ad = fake(aware=True)
    x = data(RANK, 11, "complex128", "AFFINE")
    with mpicoll.traffic() as t:
        got = mpicoll.allreduce(fd.to_device(x), op=OPS["AFFINE"], algorithm="native")
        staged = ad.d2h
        mpicoll.allreduce(fd.to_device(np.ones(3)), algorithm="native")     # MPI.SUM
    want = reduce_ref([data(r, 11, "complex128", "AFFINE") for r in range(N)], "AFFINE",
                      "complex128")
    assert np.array_equal(fd.to_host(got), want)
    assert staged >= 1 and ad.d2h == staged           # the second call was handed over
    assert [c.path for c in t.calls] == ["staged", "cuda-aware"]


@pytest.mark.mpi
def test_pinned_staging_buffers_are_reused_across_calls(restore_path):
    ad = fake(aware=False)
    _device.release_staging()
    x = fd.to_device(np.ones(4096))
    for _ in range(3):
        mpicoll.allreduce(x, algorithm="ring")
    first = ad.pinned_blocks
    for _ in range(20):
        mpicoll.allreduce(x, algorithm="ring")
        mpicoll.bcast(x, 0, algorithm="pipeline")
    assert ad.pinned_blocks == first          # no allocation after warm-up
    stats = _device.staging_stats()[("fake", 0)]
    assert stats["live"] == 0 and stats["allocations"] == first
    if N > 1:
        assert first >= 1 and stats["slots"] > 20
        big = fd.to_device(np.ones(200_000))   # 1.6 MB > the block: it grows ...
        mpicoll.allreduce(big, algorithm="ring")
        grown = ad.pinned_blocks
        assert grown > first
        mpicoll.allreduce(big, algorithm="ring")
        assert ad.pinned_blocks == grown       # ... and is reused from then on


def test_arena_reuses_its_block_when_a_step_starts_with_an_empty_slot():
    """A staged Sendrecv with nothing to send still starts from the block's start."""
    ad = fd.FakeAdapter()
    arena = _device.PinnedArena(ad)
    for _ in range(1000):
        empty_send = arena.take(np.float64, 0)
        recv = arena.take(np.float64, 100)
        assert empty_send.size == 0 and recv.size == 100
        arena.give(2)
    assert ad.pinned_blocks == 1 and arena.live == 0
    # Live slots are never overwritten: a second slot starts past the first.
    a = arena.take(np.uint8, 10)
    b = arena.take(np.uint8, 10)
    assert _device.data_ptr(b) >= _device.data_ptr(a) + 10
    arena.give(2)


@pytest.mark.mpi
def test_mixed_host_and_device_buffers_fail_on_every_rank(restore_path):
    fake(aware=False)
    x = fd.to_device(np.ones(6))
    # Only the last rank passes a host recvbuf; every rank must raise, before any message.
    recv = np.empty(6) if RANK == N - 1 else fd.to_device(np.empty(6))
    with pytest.raises(mpicoll.ArgumentError, match="recvbuf: expected a fake array on device 0 "
                       "like sendbuf .*got a NumPy \\(host\\) array") as info:
        mpicoll.allreduce(x, recv)
    if RANK != N - 1:
        assert f"rank(s) {N - 1}" in str(info.value)
    with pytest.raises(mpicoll.ArgumentError, match="sendbuf: expected a NumPy \\(host\\) array"):
        root_send = fd.to_device(np.ones(N)) if RANK == 0 else None
        mpicoll.scatter(root_send, np.empty(1), 0)
    assert fd.to_host(mpicoll.allreduce(x))[0] == N      # still usable afterwards


@pytest.mark.mpi
def test_p2pcomm_and_distributed_take_device_arrays(restore_path):
    import mpicoll.distributed as dist
    fake(aware=False)
    pc = mpicoll.P2PComm(comm, allreduce="ring", allgather="bruck")
    x = fd.to_device(np.arange(6.0) + RANK)
    y = fd.to_device(np.zeros(6))
    pc.Allreduce(x, y)
    assert np.array_equal(fd.to_host(y), N * np.arange(6.0) + N * (N - 1) / 2)
    y2 = fd.to_device(np.zeros(6))
    pc.Allreduce([x, 4, MPI.DOUBLE], [y2, 4, MPI.DOUBLE])   # mpi4py's [buf, count, type]
    assert np.array_equal(fd.to_host(y2)[:4], fd.to_host(y)[:4])
    assert np.array_equal(fd.to_host(y2)[4:], [0, 0])
    g = fd.to_device(np.zeros((N, 6)))
    pc.Allgather(x, g)
    assert np.array_equal(fd.to_host(g), np.arange(6.0) + np.arange(N)[:, None])

    dist.init_process_group(backend="p2p")
    try:
        t = fd.to_device(np.full(3, RANK + 1.0, dtype=np.float32))
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        assert np.array_equal(fd.to_host(t), np.full(3, N * (N + 1) / 2, np.float32))
        parts = [fd.to_device(np.zeros(3, np.float32)) for _ in range(N)]
        dist.all_gather(parts, fd.to_device(np.full(3, RANK, np.float32)))
        assert [float(fd.to_host(p)[0]) for p in parts] == list(range(N))
        with pytest.raises(mpicoll.ArgumentError, match=r"tensor_list\[0\]: expected a fake "
                           "array on device 0 like tensor"):
            dist.all_gather([np.zeros(3, np.float32)] * N, fd.to_device(np.zeros(3, np.float32)))
    finally:
        dist.destroy_process_group()


@pytest.mark.mpi
@pytest.mark.parametrize("trust", [None, "0", "1"])
def test_native_collectives_staged_unless_the_library_is_trusted(restore_path, monkeypatch, trust):
    """CUDA-aware point-to-point (MPICOLL_CUDA_AWARE=1, e.g. MPICH over UCX) does not make the
    library's own collectives safe on device pointers: they are staged unless
    MPICOLL_CUDA_AWARE_COLLECTIVES=1 (or the library itself reports CUDA support).
    """
    if trust is None:
        monkeypatch.delenv("MPICOLL_CUDA_AWARE_COLLECTIVES", raising=False)
    else:
        monkeypatch.setenv("MPICOLL_CUDA_AWARE_COLLECTIVES", trust)
    ad = fake(aware=True)
    aware, source = _device.collectives_aware()
    assert aware is (trust == "1")
    assert source.startswith("MPICOLL_CUDA_AWARE_COLLECTIVES") is (trust is not None)
    x = np.full(9, RANK + 1.0)
    before = fd.FakeDeviceArray.exports
    with mpicoll.traffic() as t:
        got = mpicoll.allreduce(fd.to_device(x), algorithm="native")
    assert np.array_equal(fd.to_host(got), np.full(9, N * (N + 1) / 2))
    # The record says how the library's collective got the arrays (its messages are its own).
    want = "cuda-aware" if trust == "1" else "staged"
    assert (t.calls[0].path, t.calls[0].paths) == (want, {want: [0, 0, 0, 0]})
    if trust == "1":
        assert ad.d2h == 0                       # handed to MPI as they are
    else:
        assert ad.d2h >= 1 and ad.h2d >= 1       # through pinned host memory
        assert fd.FakeDeviceArray.exports == before   # MPI never saw a device pointer
    # The hand-written algorithms keep the CUDA-aware point-to-point path either way.
    with mpicoll.traffic() as t:
        mpicoll.allreduce(fd.to_device(x), algorithm="ring")
    assert t.calls[0].path == "cuda-aware"
