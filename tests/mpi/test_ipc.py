"""The ``ipc`` transport (mpicoll.device.ipc) on the CPU stand-in of CUDA IPC.

tests/support/fakedevice.py with IPC on keeps fake device memory in ``/dev/shm``
allocations; an exported handle names one, and a peer maps it, as CUDA IPC
maps a peer's ``cudaMalloc`` block. Each test makes its own communicator,
its ranks on the nodes it chooses (``MPICOLL_NODES``, read when the private
duplicate is made), so the layout the suite was launched with does not matter.
The device matrix on this transport is in test_device.py (kind ``fake-ipc``).
"""
import gc
import threading
import time

import fakedevice as fd
import numpy as np
import pytest
from mpi4py import MPI
from refdata import OPS, data, on_nodes, reduce_ref

import mpicoll
from mpicoll import gpu
from mpicoll.device import arrays as _device
from mpicoll.device import cuda_driver as _cuda_driver
from mpicoll.device import ipc as _ipc
from mpicoll.engine import fuse as _fuse
from mpicoll.engine.context import Ctx, private_comm

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()
RIGHT, LEFT = (RANK + 1) % N, (RANK - 1) % N

pytestmark = pytest.mark.mpi


@pytest.fixture(autouse=True)
def ipc_on():
    """The stand-in with IPC, the ipc transport forced, staged for other peers; no eager
    messages (the tests that want them set ``_ipc.EAGER_MAX``).
    """
    ad = fd.install()
    fd.enable_ipc(True)
    _device.set_cuda_aware(False)
    _device.set_transport("ipc")
    ad.reset()
    ad.ipc_refuse = False
    eager, _ipc.EAGER_MAX = _ipc.EAGER_MAX, 0     # the mapping protocol, even for small arrays
    yield ad
    _ipc.EAGER_MAX = eager
    ad.ipc_refuse = False
    _fuse.FUSE = True
    _device.set_transport(None)
    _device.set_cuda_aware(None)
    fd.enable_ipc(False)


def nodes(spec=None):
    """A fresh communicator whose ranks are on the nodes ``spec`` says (default: one node)."""
    return on_nodes(spec or str(N), comm)


def ctx_of(c):
    """A point-to-point Ctx on ``c``'s private communicator for fake device arrays."""
    return Ctx(private_comm(c), "p2p", "test", adapter=fd.ADAPTER, device=0)


def stats(c):
    return gpu.ipc_stats(c).get(("fake", 0), {})


def test_export_names_the_base_allocation_and_the_offset(ipc_on):
    """Small arrays are carved out of one allocation: same handle, base and generation,
    different offsets; a slice is its array's offset plus its own.
    """
    fd.POOL.new_segment()
    a = fd.to_device(np.arange(10.0))
    b = fd.to_device(np.arange(20.0))
    ea, eb = ipc_on.ipc_export(a), ipc_on.ipc_export(b)
    assert ea[:3] == eb[:3] and ea[4] == eb[4]           # base, generation, handle, size
    assert eb[3] > ea[3] >= 0 and eb[3] % 256 == 0
    es = ipc_on.ipc_export(b[5:15])
    assert es[:3] == eb[:3] and es[3] == eb[3] + 5 * 8
    big = fd.to_device(np.zeros(20_000))                 # 160 kB: an allocation of its own
    assert ipc_on.ipc_export(big)[3] == 0 and ipc_on.ipc_export(big)[0] != ea[0]
    with pytest.raises(ValueError, match="not in a shared-memory allocation"):
        ipc_on.ipc_export(fd.FakeDeviceArray(np.zeros(3)))   # private memory: not exportable


@pytest.mark.mpi(min_size=2)
def test_slices_at_offsets_arrive_and_the_mapping_is_reused(ipc_on):
    with nodes() as c:
        ctx = ctx_of(c)
        fd.POOL.new_segment()
        x = fd.to_device(np.arange(300.0) + 1000 * RANK)   # one small allocation
        got = fd.device_empty(100, np.float64)
        for k in range(3):                                  # three offsets, one mapping
            part = x[50 * k + 1:50 * k + 101]
            ctx.sendrecv(part, RIGHT, got, LEFT)
            want = np.arange(50 * k + 1, 50 * k + 101) + 1000.0 * LEFT
            assert np.array_equal(fd.to_host(got), want)
        st = stats(c)
        assert st["opens"] == 1 and st["hits"] == 2 and st["recv_ipc"] == 3
        assert ipc_on.ipc_exports == 3 and ipc_on.ipc_opens == 1


@pytest.mark.mpi(min_size=2)
def test_a_freed_and_reallocated_block_is_mapped_anew(ipc_on):
    """Same base address, new generation: the receiver closes its stale mapping."""
    with nodes() as c:
        ctx = ctx_of(c)
        got = fd.device_empty(10_000, np.float64)          # own allocations (80 kB)
        x = fd.to_device(np.full(10_000, 1.0 + RANK))
        for _ in range(2):
            ctx.sendrecv(x, RIGHT, got, LEFT)
        assert np.all(fd.to_host(got) == 1.0 + LEFT)
        base, gen = ipc_on.ipc_export(x)[:2]
        del x
        gc.collect()                                        # the allocation is freed ...
        y = fd.to_device(np.full(10_000, 7.0 + RANK))       # ... and its address reused
        assert ipc_on.ipc_export(y)[0] == base and ipc_on.ipc_export(y)[1] != gen
        ctx.sendrecv(y, RIGHT, got, LEFT)
        assert np.all(fd.to_host(got) == 7.0 + LEFT)
        st = stats(c)
        assert st["opens"] == 2 and st["hits"] == 1 and st["invalidated"] == 1
        assert st["closes"] == 1 and st["mappings"] == 1
        closes = ipc_on.ipc_closes
    # Freeing the communicator closes what it still maps.
    assert ipc_on.ipc_closes == closes + 1


@pytest.mark.mpi(min_size=2)
def test_send_completes_only_after_the_receiver_copied(ipc_on):
    """The sender overwrites its buffer as soon as send returns; the receiver, late on
    purpose, still gets the old data (it reads the sender's memory directly).
    """
    with nodes() as c:
        ctx = ctx_of(c)
        x = fd.to_device(np.arange(5000.0) + RANK)
        got = fd.device_empty(5000, np.float64)

        def send():
            ctx.send(x, RIGHT)
            x[...] = -1.0                                   # reuse at once
            x[...] = fd.to_device(np.arange(5000.0) + RANK)

        def recv():
            time.sleep(0.05)
            ctx.recv(got, LEFT)
            assert np.array_equal(fd.to_host(got), np.arange(5000.0) + LEFT)

        for step in ((send, recv) if RANK % 2 == 0 else (recv, send)):
            step()
        assert stats(c)["sent_ipc"] == 1


@pytest.mark.mpi(min_size=2)
def test_many_outstanding_messages(ipc_on):
    """Every rank posts 24 messages to and from every peer before one waitall (some ranks
    sends first, some receives first), then waits for them in reverse order.
    """
    K = 24
    with nodes() as c:
        ctx = ctx_of(c)
        peers = [p for p in range(N) if p != RANK]
        big = fd.to_device(np.arange(K * 64.0) + 1e4 * RANK)         # slices of one block
        small = [fd.to_device(np.full(9, 100.0 * RANK + k)) for k in range(K)]
        inbox = {p: [fd.device_empty(64 if k % 2 else 9, np.float64) for k in range(K)]
                 for p in peers}

        def sends():
            return [ctx.isend(big[k * 64:(k + 1) * 64] if k % 2 else small[k], p)
                    for p in peers for k in range(K)]

        def recvs():
            return [ctx.irecv(inbox[p][k], p) for p in peers for k in range(K)]

        reqs = sends() + recvs() if RANK % 2 else recvs() + sends()
        ctx.waitall(reqs[::-1])
        for p in peers:
            for k in range(K):
                want = (np.arange(k * 64, (k + 1) * 64) + 1e4 * p if k % 2
                        else np.full(9, 100.0 * p + k))
                assert np.array_equal(fd.to_host(inbox[p][k]), want), (p, k)
        st = stats(c)
        assert st["recv_ipc"] == st["sent_ipc"] == K * len(peers)
        # One mapping per (peer, allocation): the big block and the shared small ones.
        assert st["opens"] <= 3 * len(peers)


FUSED_CASES = [("allreduce", "ring"), ("allreduce", "recursive_doubling"),
               ("allreduce", "rabenseifner"), ("allreduce", "reduce_bcast"),
               ("reduce_scatter_block", "ring"), ("reduce_scatter_block", "recursive_halving"),
               ("reduce", "binomial"), ("reduce", "rabenseifner")]


def _call(c, primitive, algo, x, op):
    if primitive == "allreduce":
        return mpicoll.allreduce(x, None, op, comm=c, algorithm=algo)
    if primitive == "reduce":
        return mpicoll.reduce(x, None, op, 0, comm=c, algorithm=algo)
    return mpicoll.reduce_scatter_block(x, None, op, comm=c, algorithm=algo)


def fused_cases():
    """Every reducing algorithm that can fuse on float64 SUM; the ring ones on other ops."""
    for primitive, algo in FUSED_CASES:
        yield "float64", "SUM", primitive, algo
    for dt, opname in [("float32", "PROD"), ("int32", "BXOR"), ("float64", "MIN")]:
        for primitive in ("allreduce", "reduce_scatter_block"):
            yield dt, opname, primitive, "ring"


@pytest.mark.mpi(min_size=2)
def test_fused_reductions_match_copy_then_reduce_and_numpy(ipc_on):
    """Reducing straight from the peer's memory gives, bit for bit, what copying then
    reducing gives (ipc without fusion, and the staged transport), and NumPy's result.
    """
    with nodes() as c:
        for dt, opname, primitive, algo in fused_cases():
            every = [data(r, 7 * N, dt, opname) for r in range(N)]
            ref = reduce_ref(every, opname, dt)
            out = {}
            for how in ("fused", "copy", "staged"):
                _fuse.FUSE = how == "fused"
                _device.set_transport("staged" if how == "staged" else "ipc")
                before = stats(c).get("fused", 0)
                got = _call(c, primitive, algo, fd.to_device(every[RANK]), OPS[opname])
                out[how] = None if got is None else fd.to_host(got)
                if how == "copy":
                    assert stats(c).get("fused", 0) == before
                if how == "fused" and algo == "ring":
                    assert stats(c)["fused"] > before       # the ring reduced from the peer
            want = {"allreduce": ref, "reduce": ref if RANK == 0 else None,
                    "reduce_scatter_block": ref[7 * RANK:7 * RANK + 7]}[primitive]
            for how, got in out.items():
                what = f"{primitive}/{algo} {dt} {opname} {how} rank {RANK}"
                if want is None:
                    assert got is None, what
                else:
                    assert got.dtype == want.dtype and np.array_equal(got, want), what


def _request(c, primitive, algo, x, op, face):
    """The nonblocking (``i<name>``) or persistent (``<name>_init``, started) request."""
    args = {"allreduce": (x, None, op), "reduce": (x, None, op, 0),
            "reduce_scatter_block": (x, None, op)}[primitive]
    if face == "nonblocking":
        return getattr(mpicoll, "i" + primitive)(*args, comm=c, algorithm=algo)
    req = getattr(mpicoll, primitive + "_init")(*args, comm=c, algorithm=algo)
    req.Start()
    return req


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("face", ["nonblocking", "persistent"])
def test_requests_fuse_like_blocking_calls(ipc_on, face):
    """Nonblocking and persistent requests reduce straight from the peer's memory too
    (the reduction runs in the engine when the header arrives): bit for bit what the
    blocking call gives, and NumPy's result; a persistent request fuses at every Start.
    """
    with nodes() as c:
        for primitive, algo in FUSED_CASES:
            every = [data(r, 7 * N, "float64", "SUM") for r in range(N)]
            x = fd.to_device(every[RANK])
            blocking = _call(c, primitive, algo, x, OPS["SUM"])
            before = stats(c).get("fused", 0)
            req = _request(c, primitive, algo, x, OPS["SUM"], face)
            starts = 2 if face == "persistent" else 1
            for k in range(starts):
                if k:
                    req.Start()
                got = req.Wait()
                what = f"{face} {primitive}/{algo} start {k} rank {RANK}"
                if blocking is None:
                    assert got is None, what
                else:
                    assert np.array_equal(fd.to_host(got), fd.to_host(blocking)), what
            if face == "persistent":
                req.Free()
            if algo == "ring":
                # Every receive of the ring's reduce-scatter phase is fused, each Start.
                assert stats(c)["fused"] - before == starts * (N - 1), (primitive, algo)
        want = reduce_ref([data(r, 7 * N, "float64", "SUM") for r in range(N)], "SUM", "float64")
        got = _request(c, "allreduce", "ring", fd.to_device(data(RANK, 7 * N, "float64", "SUM")),
                       OPS["SUM"], face).Wait()
        assert np.array_equal(fd.to_host(got), want)


@pytest.mark.mpi(min_size=3)
def test_ipc_inside_nodes_staged_across(ipc_on):
    """Two nodes (MPICOLL_NODES=2): same-node messages through IPC, the others staged;
    the traffic record says which moved what.
    """
    with nodes("2") as c:
        x = fd.to_device(data(RANK, 1003, "float64"))
        want = reduce_ref([data(r, 1003, "float64") for r in range(N)], "SUM", "float64")
        for algo in ("ring", "recursive_doubling", "hierarchical"):
            with mpicoll.traffic() as t:
                got = mpicoll.allreduce(x, comm=c, algorithm=algo)
            assert np.array_equal(fd.to_host(got), want), algo
            (call,) = t.calls
            paths = call.paths
            alone = RANK == N - 1 and N % 2 == 1           # the last node holds one rank
            assert call.path == ("staged" if alone else "ipc")
            ipc = paths.get("ipc", [0, 0, 0, 0])
            staged = paths.get("staged", [0, 0, 0, 0])
            # Inside a node: IPC; across nodes: staged (mpicoll.core.topology's split).
            assert ipc == [call.intra_sent_msgs, call.intra_sent_bytes,
                           call.intra_recv_msgs, call.intra_recv_bytes], (algo, paths)
            assert staged == [call.inter_sent_msgs, call.inter_sent_bytes,
                              call.inter_recv_msgs, call.inter_recv_bytes], (algo, paths)
            assert call.as_dict()["paths"] == {k: list(v) for k, v in paths.items()}
        opened = stats(c).get("mappings", 0)
        closes = ipc_on.ipc_closes
    assert ipc_on.ipc_closes == closes + opened             # freed with the communicator


@pytest.mark.mpi(min_size=3)
def test_requests_ipc_inside_nodes_staged_across(ipc_on):
    """Nonblocking and persistent calls in the progress engine, outstanding together on two
    nodes: the same split as blocking calls, each request counting its own messages.
    """
    with nodes("2") as c:
        x = fd.to_device(data(RANK, 1003, "float64"))
        y = fd.device_empty(1003, np.float64)
        every = [data(r, 1003, "float64") for r in range(N)]
        for algo in ("ring", "recursive_doubling", "hierarchical"):
            with mpicoll.traffic() as t:
                r = mpicoll.iallreduce(x, None, MPI.SUM, comm=c, algorithm=algo)
                p = mpicoll.allreduce_init(x, y, MPI.MAX, comm=c, algorithm=algo)
                p.Start()
                mpicoll.waitall([p, r] if RANK % 2 else [r, p])
                p.Free()
            assert np.array_equal(fd.to_host(r.result), reduce_ref(every, "SUM", "float64"))
            assert np.array_equal(fd.to_host(y), reduce_ref(every, "MAX", "float64"))
            alone = RANK == N - 1 and N % 2 == 1
            for call in t.calls:
                assert call.path == ("staged" if alone else "ipc"), algo
                ipc = call.paths.get("ipc", [0, 0, 0, 0])
                staged = call.paths.get("staged", [0, 0, 0, 0])
                assert ipc == [call.intra_sent_msgs, call.intra_sent_bytes,
                               call.intra_recv_msgs, call.intra_recv_bytes], (algo, call.paths)
                assert staged == [call.inter_sent_msgs, call.inter_sent_bytes,
                                  call.inter_recv_msgs, call.inter_recv_bytes], (algo, call.paths)
            assert len(t.calls) == 2


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("face", ["blocking", "memo", "nonblocking"])
def test_a_node_split_between_ipc_and_not_raises_everywhere(ipc_on, face):
    """One rank of a node with host buffers (or another transport) while its node peers
    send device buffers through ipc: their headers would never be matched. Every rank
    raises, naming both sides, before anything is sent; the next call works.
    """
    with nodes() as c:
        x = fd.to_device(np.full(3, RANK + 1.0))
        y = fd.device_empty(3, np.float64)
        if face == "memo":                       # replays first, then rank 0 changes transport
            for _ in range(2):
                mpicoll.allreduce(x, y, comm=c)
            if RANK == 0:
                _device.set_transport("staged")
            arg = x
        else:
            arg = np.full(3, 1.0) if RANK == 0 else x        # host memory on rank 0
        ipc_on.reset()
        def moved():
            return {k: v for k, v in stats(c).items() if k.startswith(("sent", "recv"))}
        before = moved()
        with pytest.raises(mpicoll.CollectiveMismatchError) as info:
            if face == "nonblocking":
                mpicoll.iallreduce(arg, comm=c).Wait()
            else:
                mpicoll.allreduce(arg, y if arg is x else None, comm=c)
        text = str(info.value)
        assert "rank(s) 0 would not" in text and f"rank(s) 1{'-' if N > 2 else ''}" in text
        assert "MPICOLL_GPU_TRANSPORT=staged" in text
        assert ipc_on.d2d == ipc_on.d2h == ipc_on.ipc_exports == 0 and moved() == before
        _device.set_transport("ipc")
        got = fd.to_host(mpicoll.allreduce(x, comm=c))
        assert (got == N * (N + 1) / 2).all()


@pytest.mark.mpi(min_size=2)
def test_different_eager_limits_on_a_node_raise_everywhere(ipc_on):
    """MPICOLL_IPC_EAGER must be alike on a node's ranks (a receiver sizes its header by
    its own): a difference raises on every rank, naming each limit and its ranks.
    """
    with nodes() as c:
        x = fd.to_device(np.full(3, RANK + 1.0))
        _ipc.EAGER_MAX = 256 if RANK == 0 else 0
        with pytest.raises(mpicoll.CollectiveMismatchError,
                           match=r"different eager limits \(MPICOLL_IPC_EAGER: 256 bytes on "
                                 r"rank\(s\) 0; 0 bytes on rank\(s\) 1"):
            mpicoll.allreduce(x, comm=c, algorithm="ring")
        _ipc.EAGER_MAX = 256
        got = fd.to_host(mpicoll.allreduce(x, comm=c, algorithm="ring"))
        assert (got == N * (N + 1) / 2).all()


@pytest.mark.mpi(min_size=3)
def test_host_and_device_ranks_on_different_nodes_or_staged_work(ipc_on):
    """A split only matters inside a node: rank 0 alone on its node with host buffers, the
    others with device buffers through ipc, is fine; so is any mix with staged, and with
    native (the ipc transport hands native collectives to its fallback).
    """
    host = RANK == 0
    for spec, transport, algo in [(f"1,{N - 1}", "ipc", "ring"), (str(N), "staged", "ring"),
                                  (str(N), "ipc", "native")]:
        _device.set_transport(transport)
        with nodes(spec) as c:
            x = np.full(4, RANK + 1.0) if host else fd.to_device(np.full(4, RANK + 1.0))
            got = mpicoll.allreduce(x, comm=c, algorithm=algo)
            got = got if host else fd.to_host(got)
            assert (got == N * (N + 1) / 2).all(), (spec, transport)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("aware", [False, True])
def test_traffic_names_what_moved_native_and_hand_written_calls(ipc_on, aware, monkeypatch):
    """mpicoll.traffic() on the ipc transport: a hand-written call's messages under ipc; a
    native call under the fallback's path for the library's collectives (staged: a library
    CUDA-aware in point-to-point only gets its collectives staged), with no messages of ours.
    """
    monkeypatch.delenv("MPICOLL_CUDA_AWARE_COLLECTIVES", raising=False)
    _device.set_cuda_aware(aware)
    x = fd.to_device(np.full(4096, RANK + 1.0))      # 32 KiB: above the host-copy limit
    with nodes() as c, mpicoll.traffic() as t:       # one node, whatever MPICOLL_NODES says
        mpicoll.allreduce(x, comm=c, algorithm="native")
        mpicoll.allreduce(x, comm=c, algorithm="ring")
    native, ring = t.calls
    assert (native.path, native.paths) == ("staged", {"staged": [0, 0, 0, 0]})
    assert ring.path == "ipc" and set(ring.paths) == {"ipc"}
    assert ring.paths["ipc"] == [ring.sent_msgs, ring.sent_bytes, ring.recv_msgs, ring.recv_bytes]
    assert ring.sent_msgs > 0


@pytest.mark.mpi(min_size=2)
def test_small_messages_travel_eagerly_in_their_header(ipc_on):
    """Up to EAGER_MAX bytes: one header message carries the payload (copied to the host and
    back), no mapping, no acknowledgement; a byte more takes the mapping protocol. Eager and
    mapped messages in flight together, to and from every peer, arrive in posting order.
    """
    _ipc.EAGER_MAX = 256
    with nodes() as c:
        ctx = ctx_of(c)
        peers = [p for p in range(N) if p != RANK]
        sizes = [1, 32, 33, 7, 32, 40, 0]                      # doubles: 32 = 256 bytes
        mine = {p: [fd.to_device(np.arange(k, dtype=np.float64) + 1e3 * RANK + 10 * p)
                    for k in sizes] for p in peers}
        inbox = {p: [fd.device_empty(k, np.float64) for k in sizes] for p in peers}
        ipc_on.reset()
        reqs = [ctx.irecv(inbox[p][i], p) for p in peers for i in range(len(sizes))]
        reqs += [ctx.isend(mine[p][i], p) for p in peers for i in range(len(sizes))]
        ctx.waitall(reqs[::-1])
        for p in peers:
            for i, k in enumerate(sizes):
                want = np.arange(k, dtype=np.float64) + 1e3 * p + 10 * RANK
                assert np.array_equal(fd.to_host(inbox[p][i]), want), (p, k)
        st = stats(c)
        eager = sum(k <= 32 for k in sizes) * len(peers)     # the empty one too
        mapped = sum(k > 32 for k in sizes) * len(peers)
        assert st["sent_eager"] == st["recv_eager"] == eager
        assert st["sent_ipc"] == st["recv_ipc"] == mapped
        # Eager: one D2H per send, one H2D per receive, none for the empty message.
        assert ipc_on.d2h == ipc_on.h2d == sum(0 < k <= 32 for k in sizes) * len(peers)


@pytest.mark.mpi(min_size=2)
def test_blocking_eager_messages_are_one_mpi_call(ipc_on, monkeypatch):
    """With nothing in flight, a blocking eager send, receive or sendrecv posts no request
    (one blocking MPI call on the header); the data and the eager counts are right, and a
    receive of another size raises naming both sizes.
    """
    _ipc.EAGER_MAX = 256
    with nodes() as c:
        ctx = ctx_of(c)
        posted = []
        for name in ("Isend", "Irecv"):
            orig = getattr(_ipc.IpcTransport, name)
            monkeypatch.setattr(_ipc.IpcTransport, name,
                                lambda self, *a, _o=orig, **k:
                                   posted.append(1) or _o(self, *a, **k))
        x = fd.to_device(np.arange(4.0) + RANK)
        got = fd.device_empty(4, np.float64)
        ctx.sendrecv(x, RIGHT, got, LEFT)
        assert np.array_equal(fd.to_host(got), np.arange(4.0) + LEFT)
        if RANK == 0:
            ctx.send(x, 1)
        elif RANK == 1:
            ctx.recv(got, 0)
            assert np.array_equal(fd.to_host(got), np.arange(4.0))
        assert posted == []
        st = stats(c)
        assert st["sent_eager"] == 1 + (RANK == 0) and st["recv_eager"] == 1 + (RANK == 1)
        assert st.get("sent_ipc", 0) == st.get("recv_ipc", 0) == 0
        if RANK == 0:
            ctx.send(x, 1)
        elif RANK == 1:
            with pytest.raises(RuntimeError, match="message of 32 bytes from rank 0 for a "
                                                   "receive of 40 bytes"):
                ctx.recv(fd.device_empty(5, np.float64), 0)


@pytest.mark.mpi(min_size=2)
def test_eager_messages_fuse_and_match_the_mapped_protocol(ipc_on):
    """Small reductions through eager messages give, bit for bit, what the mapped protocol
    and NumPy give (every reducing algorithm that fuses, and a non-commutative user op).
    """
    with nodes() as c:
        for dt, opname, primitive, algo in fused_cases():
            x = fd.to_device(data(RANK, 3 * N, dt, opname))     # blocks of 3: all eager
            got = {}
            for eager in (0, 4096):
                _ipc.EAGER_MAX = eager
                got[eager] = fd.to_host(_call(c, primitive, algo, x, OPS[opname]))
            assert np.array_equal(got[0], got[4096]), (dt, opname, primitive, algo)
        assert stats(c).get("sent_eager", 0) > 0
        every = [data(r, 5, "complex128", "AFFINE") for r in range(N)]
        y = fd.to_device(every[RANK])
        got = fd.to_host(mpicoll.allreduce(y, None, OPS["AFFINE"], comm=c,
                                           algorithm="recursive_doubling"))
        assert np.array_equal(got, reduce_ref(every, "AFFINE", "complex128"))


@pytest.mark.mpi(min_size=2)
def test_a_peer_that_cannot_map_gets_the_payload_inline(ipc_on):
    """Rank 1 cannot open handles: it answers NACK once per sender, the payload comes
    through the fallback, and from then on that sender sends to it inline.
    """
    ipc_on.ipc_refuse = RANK == 1
    with nodes() as c:
        x = fd.to_device(data(RANK, 2 * N + 1, "float64"))
        want = reduce_ref([data(r, 2 * N + 1, "float64") for r in range(N)], "SUM", "float64")
        for _ in range(3):
            got = mpicoll.allreduce(x, comm=c, algorithm="ring")
            assert np.array_equal(fd.to_host(got), want)
        st = stats(c)
        if RANK == 0:                                     # rank 0 sends to rank 1 in the ring
            assert st["nacks"] == 1 and st.get("sent_staged", 0) >= 2
        if RANK == 1:
            assert st["open_failed"] == 1 and st.get("opens", 0) == 0
            assert st.get("recv_ipc", 0) == 0
            assert st["why_open_failed"].startswith("RuntimeError: fake: this rank cannot map")


@pytest.mark.mpi(min_size=2)
def test_a_mapping_that_is_not_the_allocation_is_refused(ipc_on):
    """Rank 1's mappings are not the allocations its peers exported (as where CUDA shares a
    block holding several small allocations): it closes them unread and answers NACK for
    that allocation; the payload comes through the fallback and the result is right. The
    sender sends that allocation inline from then on, but maps its others as before.
    """
    ipc_on.ipc_mismatch = RANK == 1
    try:
        with nodes() as c:
            want = reduce_ref([data(r, 2 * N + 1, "float64") for r in range(N)], "SUM",
                              "float64")
            fd.POOL.new_segment()
            x = fd.to_device(data(RANK, 2 * N + 1, "float64"))
            for _ in range(2):             # the second time: inline at once, no NACK
                got = mpicoll.allreduce(x, comm=c, algorithm="ring")
                assert np.array_equal(fd.to_host(got), want)
                st = stats(c)
                if RANK == 1:
                    assert st["open_failed"] == 1 and st.get("opens", 0) == 0
                    assert st["mappings"] == 0 and ipc_on.ipc_closes == 1   # closed at once
                    assert "not the exported allocation" in st["why_open_failed"]
                if RANK == 0:
                    assert st["nacks"] == 1 and st.get("sent_ipc", 0) == 0
            ipc_on.ipc_mismatch = False
            fd.POOL.new_segment()          # another allocation: mapped
            y = fd.to_device(data(RANK, 2 * N + 1, "float64"))
            got = mpicoll.allreduce(y, comm=c, algorithm="ring")
            assert np.array_equal(fd.to_host(got), want)
            st = stats(c)
            if RANK == 0:
                assert st["nacks"] == 1 and st["sent_ipc"] > 0
            assert st.get("unverified", 0) == 0
    finally:
        ipc_on.ipc_mismatch = False


@pytest.mark.mpi(min_size=2)
def test_unexportable_buffers_and_empty_messages_go_inline(ipc_on):
    with nodes() as c:
        ctx = ctx_of(c)
        private = fd.FakeDeviceArray(np.arange(6.0) + RANK)     # not in shared memory
        got = fd.device_empty(6, np.float64)
        ctx.sendrecv(private, RIGHT, got, LEFT)
        assert np.array_equal(fd.to_host(got), np.arange(6.0) + LEFT)
        e = fd.device_empty(0, np.float64)
        ctx.sendrecv(e, RIGHT, fd.device_empty(0, np.float64), LEFT)
        st = stats(c)
        assert st["not_exportable"] == 1 and st["sent_staged"] == 2 and st["recv_staged"] == 2
        assert st.get("sent_ipc", 0) == 0
        assert st["why_not_exportable"] == "ValueError: not in a shared-memory allocation " \
            "(a private fake array)"


def test_transport_choice(ipc_on, monkeypatch):
    """set_transport beats MPICOLL_GPU_TRANSPORT beats auto; a bad name is refused."""
    buf = fd.to_device(np.ones(2))
    _device.set_transport(None)
    monkeypatch.delenv("MPICOLL_GPU_TRANSPORT", raising=False)
    assert _device.transport_choice() == ("auto", "default")
    path = gpu.device_path(buf)
    assert (path["transport"], path["path"], path["transport_choice"]) == ("ipc", "staged", "auto")
    fd.enable_ipc(False)                           # auto without IPC support: staged
    path = gpu.device_path(buf)
    assert path["transport"] == "staged" and not path["ipc_supported"]
    assert "enable_ipc" in path["ipc_reason"]
    monkeypatch.setenv("MPICOLL_GPU_TRANSPORT", "ipc")   # forced: headers, payloads inline
    path = gpu.device_path(buf)
    assert path["transport"] == "ipc" and path["transport_source"] == "MPICOLL_GPU_TRANSPORT"
    assert "inline" in path["ipc_reason"]
    monkeypatch.setenv("MPICOLL_GPU_TRANSPORT", "Aware ")
    assert gpu.device_path(buf)["transport"] == gpu.device_path(buf)["path"] == "cuda-aware"
    gpu.set_transport("staged")
    assert gpu.device_path(buf)["transport_choice"] == "staged"
    assert gpu.device_path(buf)["transport_source"] == "mpicoll.gpu.set_transport"
    with pytest.raises(mpicoll.ArgumentError, match="transport: expected one of auto, ipc"):
        gpu.set_transport("nvlink")
    gpu.set_transport(None)
    monkeypatch.setenv("MPICOLL_GPU_TRANSPORT", "nvlink")
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_GPU_TRANSPORT: expected one of"):
        _device.transport_choice()


@pytest.mark.mpi(min_size=2)
def test_each_transport_when_chosen(ipc_on):
    """Auto picks ipc where IPC works; staged and aware when chosen; ipc without IPC
    support still works (every payload inline); nonblocking calls complete.
    """
    with nodes() as c:
        # 3N elements: no ring chunk is empty (empty messages go inline on the fallback path).
        x = fd.to_device(np.full(3 * N, RANK + 1.0))
        want = np.full(3 * N, N * (N + 1) / 2)
        for choice, ipc, path in [("auto", True, "ipc"), ("auto", False, "staged"),
                                  ("staged", True, "staged"), ("aware", True, "cuda-aware"),
                                  ("ipc", False, "ipc")]:
            _device.set_transport(choice)
            fd.enable_ipc(ipc)
            with mpicoll.traffic() as t:
                got = mpicoll.allreduce(fd.to_device(fd.to_host(x)), comm=c, algorithm="ring")
                req = mpicoll.iallreduce(fd.to_device(fd.to_host(x)), comm=c, algorithm="ring")
                got2 = req.Wait()
            assert np.array_equal(fd.to_host(got), want) and np.array_equal(fd.to_host(got2), want)
            assert [k.path for k in t.calls] == [path, path], choice
            moved = set(t.calls[0].paths)
            assert moved == ({"ipc"} if path == "ipc" and ipc else
                             {"staged"} if path == "ipc" else {path}), (choice, ipc, moved)


# -- MPS: ranks sharing a GPU (probes faked: no GPU needed) ---------------------

def _proc(tmp_path, names):
    """A fake /proc holding processes named ``names`` (as /proc/PID/comm shows them)."""
    proc = tmp_path / f"proc{RANK}"
    proc.mkdir()
    for pid, name in enumerate(names, start=100):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "comm").write_text(name + "\n")
    (proc / "self").mkdir()
    return str(proc)


def test_mps_server_status_reads_the_pipe_and_the_daemon(tmp_path, monkeypatch):
    from mpicoll.device import mps as _mps
    pipe = tmp_path / f"mps{RANK}"
    pipe.mkdir()
    idle = _proc(tmp_path, ["python3", "bash"])
    st = _mps.server_status(str(pipe), idle)
    assert not st["running"] and "no MPS control daemon" in st["how"]
    (pipe / "control").write_text("")
    st = _mps.server_status(str(pipe), idle)
    assert not st["running"] and "stale" in st["how"]
    (tmp_path / "p2").mkdir()
    daemon = _proc(tmp_path / "p2", ["bash", "nvidia-cuda-mps"])     # comm keeps 15 chars
    st = _mps.server_status(str(pipe), daemon)
    assert st["running"] and "pid 101" in st["how"]
    assert _mps.server_status(str(pipe), str(tmp_path / "no-proc"))["running"]
    st = _mps.server_status(str(tmp_path / "elsewhere"), daemon)
    assert not st["running"] and "CUDA_MPS_PIPE_DIRECTORY" in st["how"]
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(pipe))
    assert _mps.pipe_dir() == str(pipe)
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY")
    assert _mps.pipe_dir() == "/tmp/nvidia-mps"


@pytest.fixture
def mps_forget():
    from mpicoll.device import mps as _mps
    yield
    _mps._last = None              # the faked answers must not reach later tests


def test_mps_status_finds_ranks_sharing_a_gpu(mps_forget):
    """Every rank on one fake GPU: shared (N > 1) and, without a server, the advice names
    the command that starts one; device_path reports it; one GPU per rank: not shared.
    """
    from mpicoll.device import mps as _mps
    off = {"running": False, "how": "no MPS control daemon (faked)"}
    st = _mps.mps_status(comm, key="0000:01:00.0", server=off)
    assert st["ranks_on_gpu"] == N and st["shared"] == (N > 1) and not st["mps"]
    if N > 1:
        assert f"{N} ranks share GPU 0000:01:00.0" in st["advice"]
        assert "nvidia-cuda-mps-control -d" in st["advice"]
        mps = gpu.device_path(fd.to_device(np.ones(1)))["mps"]
        assert mps["shared"] and "nvidia-cuda-mps-control -d" in mps["advice"]
    else:
        assert st["advice"] is None
    on = {"running": True, "how": "faked"}
    st = _mps.mps_status(comm, key="0000:01:00.0", server=on)
    assert st["mps"] and st["advice"] is None
    st = _mps.mps_status(comm, key=f"0000:{RANK + 1:02x}:00.0", server=off)
    assert st["ranks_on_gpu"] == 1 and not st["shared"] and st["advice"] is None
    assert gpu.device_path()["mps"]["start"] == "nvidia-cuda-mps-control -d"


# -- the CuPy adapter's IPC calls, on stand-ins of cupy and the CUDA driver ------

def test_a_mapping_in_use_is_closed_only_when_released(ipc_on, monkeypatch):
    """A mapping evicted (or found stale) while a message still reads it -- another thread
    sharing the endpoint opened more -- stays open until that message releases it.
    """
    monkeypatch.setattr(_ipc, "MAX_MAPPINGS", 2)
    arrays = [fd.to_device(np.zeros(20_000)) for _ in range(4)]   # an allocation each
    exports = [ipc_on.ipc_export(a) for a in arrays]
    ep = _ipc.Endpoint(ipc_on, 0, RANK)

    def open_(i, gen=None):
        base, g, handle, _, size = exports[i]
        return ep.mapping(1, base, g if gen is None else gen, handle, size)
    held = open_(0)
    for i in (1, 2):                                  # evicts mapping 0 (least recently used)
        ep.release(open_(i))
    assert ep.stats["evicted"] == 1 and held in ep.held_dropped
    assert ipc_on.ipc_closes == 0                     # still read: not closed
    ep.release(held)
    assert ipc_on.ipc_closes == 1
    stale = open_(2)                                   # reallocated at the same base meanwhile
    fresh = open_(2, gen=exports[2][1] + 1000)
    assert ep.stats["invalidated"] == 1 and ipc_on.ipc_closes == 1 and fresh is not stale
    ep.release(stale)
    ep.release(fresh)
    assert ipc_on.ipc_closes == 2 and len(ep.maps) == 2
    held = open_(3)                                    # held, then evicted by two more
    ep.release(open_(0))
    ep.release(open_(1))
    closes = ipc_on.ipc_closes
    assert held in ep.held_dropped and len(ep.maps) == 2
    ep.close_all()                                     # the two mapped and the held one
    assert ipc_on.ipc_closes == closes + 3
    ep.release(held)                                   # a late release closes nothing
    assert ipc_on.ipc_closes == closes + 3


def test_cupy_adapter_exports_each_allocation_once_per_generation(monkeypatch):
    """The handle is of the base allocation (cuMemGetAddressRange) with the offset beside
    it; it is cached until the allocation's buffer id (its generation) changes.
    """
    import sys
    import types
    exported = []

    class Driver:
        gen = 1

        def address_range(self, ptr):
            return 0x10000, 1 << 20

        def buffer_id(self, ptr):
            return self.gen

        def ipc_capable(self, ptr):
            return self.gen < 3

    drv = Driver()
    frees = []
    runtime = types.SimpleNamespace(
        is_hip=False, ipcGetMemHandle=lambda p: exported.append(p) or bytes([len(exported)]) * 64,
        free=lambda p: frees.append((p, threading.get_ident())), getDevice=lambda: 0)
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_cuda_driver, "cuda_driver", lambda: drv)
    ad = _device.CupyAdapter()
    assert ad.ipc_supported() == (True, "CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle)")
    arr = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x10000 + 4608))
    assert ad.ipc_export(arr) == (0x10000, 1, bytes([1]) * 64, 4608, 1 << 20)
    assert ad.ipc_export(arr)[2] == bytes([1]) * 64 and exported == [0x10000]   # cached
    drv.gen = 2                                     # freed, reallocated at the same address
    assert ad.ipc_export(arr)[1:3] == (2, bytes([2]) * 64) and len(exported) == 2
    drv.gen = 3                                     # stream-ordered memory: no legacy IPC
    with pytest.raises(ValueError, match="not from cudaMalloc"):
        ad.ipc_export(arr)
    # A CUDA context made current (cudaFree(0)) once per thread before the driver's calls:
    # here, and on another thread (the progress thread's first export).
    def other_thread():
        with pytest.raises(ValueError, match="not from cudaMalloc"):
            ad.ipc_export(arr)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert [p for p, _ in frees] == [0, 0] and frees[0][1] != frees[1][1], frees
    # A mapping is accepted only where it is exactly the exported allocation.
    assert ad.ipc_check(0x10000, 1 << 20) == (True, "")
    ok, why = ad.ipc_check(0x10000 + 512, 512)      # inside a larger range: refused
    assert ok is False and "not the exported allocation" in why and "0x10200" in why

    def failing_range(ptr):
        raise RuntimeError("cuMemGetAddressRange failed (CUresult 1)")
    drv.address_range = failing_range
    assert ad.ipc_check(0x10000, 1 << 20) == (None, "cuMemGetAddressRange failed (CUresult 1)")

    def no_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")
    monkeypatch.setattr(_cuda_driver, "cuda_driver", no_driver)
    ok, why = _device.CupyAdapter().ipc_supported()
    assert not ok and "CUDA driver library cannot be loaded" in why
