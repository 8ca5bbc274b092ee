"""The memo of repeated calls (mpicoll.engine.memo): fast, but never stale.

A repeated call with the same buffers skips validation, choice and binding.
Each test changes one thing the memo rests on and checks the call notices:
new data, a reshaped or read-only buffer, another algorithm in the
environment, a bad argument or a different call on one rank, a traffic
recorder, a large message; for device arrays (the CPU stand-in of
tests/support/fakedevice.py), the transport the steps were bound to.
"""
import gc
import weakref

import fakedevice as fd
import numpy as np
import pytest
from mpi4py import MPI
from refdata import on_nodes, usable

import mpicoll
from mpicoll import gpu
from mpicoll.device import arrays as _device
from mpicoll.device import ipc as _ipc
from mpicoll.engine import fuse as _fuse
from mpicoll.engine import memo as _memo

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


def count_calls(cls, name, fn, counted=lambda result: True):
    """Run ``fn`` with the method ``cls.name`` watched; how many of its calls returned a
    result ``counted`` accepts.
    """
    seen = []
    orig = getattr(cls, name)

    def counting(self):
        result = orig(self)
        if counted(result):
            seen.append(1)
        return result
    setattr(cls, name, counting)
    try:
        fn()
    finally:
        setattr(cls, name, orig)
    return len(seen)


def hits(fn):
    """Run ``fn`` and count memo entries that served it (entry.execute calls)."""
    return count_calls(_memo._Entry, "execute", fn)


@pytest.mark.mpi
@pytest.mark.parametrize("algo", usable("allreduce"))
def test_repeated_calls_see_new_data(algo):
    x, y = np.empty(5), np.empty(5)

    def loop():
        for k in range(6):
            x[...] = np.arange(5.0) * (RANK + 1) + k
            mpicoll.allreduce(x, y, algorithm=algo)
            np.testing.assert_array_equal(y, comm.allreduce(x))
    assert hits(loop) >= 5


@pytest.mark.mpi
def test_every_primitive_repeats_correctly():
    c = 3
    buf = np.empty(c)
    send = np.arange(c * N, dtype=float) + RANK
    recv = np.empty(c * N)
    blk = np.empty(c)
    for k in range(3):
        buf[...] = k if RANK == 0 else -1
        mpicoll.bcast(buf, 0)
        assert buf.tolist() == [k] * c
        mpicoll.allgather(buf, recv)
        assert recv.tolist() == [k] * (c * N)
        mpicoll.alltoall(send, recv)
        want = np.empty_like(recv)
        comm.Alltoall(send, want)
        np.testing.assert_array_equal(recv, want)
        mpicoll.reduce_scatter_block(send, blk)
        np.testing.assert_array_equal(blk, comm.allreduce(send)[RANK * c:(RANK + 1) * c])
        out = mpicoll.reduce(send[:c], blk if RANK == N - 1 else None, MPI.MAX, N - 1)
        if RANK == N - 1:
            assert out is blk and blk.tolist() == (np.arange(c) + N - 1).tolist()
        else:
            assert out is None
        mpicoll.barrier()


@pytest.mark.mpi
def test_reshaped_buffer_is_revalidated():
    x, y = np.ones(6), np.empty(6)
    mpicoll.allreduce(x, y)
    mpicoll.allreduce(x, y)
    y.shape = (2, 3)                      # same memory, new shape: still valid
    out = mpicoll.allreduce(x, y)
    assert out is y and out.shape == (2, 3) and (out == N).all()
    z = np.empty(3)
    with pytest.raises(mpicoll.ArgumentError, match="recvbuf"):
        mpicoll.allreduce(x, z)


@pytest.mark.mpi
def test_read_only_output_is_refused_after_memo():
    x, y = np.ones(4), np.empty(4)
    mpicoll.allreduce(x, y)
    mpicoll.allreduce(x, y)
    if RANK == 0:
        y.flags.writeable = False
    with pytest.raises(mpicoll.ArgumentError):
        mpicoll.allreduce(x, y)
    y.flags.writeable = True


@pytest.mark.mpi
def test_environment_choice_is_reread(monkeypatch):
    x, y = np.ones(3), np.empty(3)
    from mpicoll.engine import context as _context
    for algo in ("ring", "recursive_doubling", "ring"):
        monkeypatch.setenv("MPICOLL_ALLREDUCE_ALGORITHM", algo)
        with mpicoll.traffic() as t:
            mpicoll.allreduce(x, y)
        assert t.calls[0].algorithm == algo and (y == N).all()
        mpicoll.allreduce(x, y)          # memoized under this choice
    assert not _context._recorders


@pytest.mark.mpi(min_size=2)
def test_mismatch_after_memo_raises_everywhere():
    x, y = np.ones(4), np.empty(4)
    for _ in range(3):
        mpicoll.allreduce(x, y, algorithm="recursive_doubling")
    algo = "ring" if RANK == 1 else "recursive_doubling"
    with pytest.raises(mpicoll.CollectiveMismatchError):
        mpicoll.allreduce(x, y, algorithm=algo)
    mpicoll.allreduce(x, y, algorithm="recursive_doubling")
    assert (y == N).all()


@pytest.mark.mpi(min_size=2)
def test_bad_argument_on_one_rank_after_memo():
    x = np.ones(4)
    for _ in range(3):
        mpicoll.bcast(x, 0)
    with pytest.raises(mpicoll.ArgumentError):
        mpicoll.bcast(x, N + 2 if RANK == 1 else 0)
    x[...] = RANK
    mpicoll.bcast(x, 0)
    assert (x == 0).all()


@pytest.mark.mpi
def test_traffic_is_counted_on_repeated_calls():
    x, y = np.ones(8), np.empty(8)
    for _ in range(3):
        mpicoll.allreduce(x, y, algorithm="ring")
    with mpicoll.traffic() as t:
        for _ in range(3):
            mpicoll.allreduce(x, y, algorithm="ring")
    assert len(t.calls) == 3
    assert all(c.sent_msgs == 2 * (N - 1) for c in t.calls)


@pytest.mark.mpi
def test_large_calls_are_not_memoized():
    x = np.ones(_memo.LIMIT // 8 + 1)
    y = np.empty_like(x)
    assert hits(lambda: [mpicoll.allreduce(x, y) for _ in range(3)]) == 0
    assert (y == N).all()


@pytest.mark.mpi
def test_views_of_large_arrays_are_not_remembered():
    """A small view of a large array takes the full path every time: a memo entry would
    keep the whole array alive. A view of a small one is remembered as usual.
    """
    big, y = np.ones(_memo.LIMIT // 8 + 1), np.empty(4)
    x = big[:4]
    assert hits(lambda x=x: [mpicoll.allreduce(x, y) for _ in range(3)]) == 0
    assert (y == N).all()
    alive = weakref.ref(big)
    del big, x
    gc.collect()
    assert alive() is None
    small = np.ones(8)
    xs = small[:4]
    assert hits(lambda: [mpicoll.allreduce(xs, y) for _ in range(3)]) == 2


# -- P2PComm's blocking methods on bare NumPy arrays go through the memo too -----------------

@pytest.mark.mpi
def test_p2pcomm_methods_repeat_correctly_against_native():
    """Every memoized P2PComm method, called repeatedly with new data in the same arrays
    (positional and keyword forms, in place), gives what the native method gives.
    """
    pc = mpicoll.P2PComm(comm)
    plain = comm.Dup()
    c = 3
    send = np.empty((N, c))
    recv, want = np.empty((N, c)), np.empty((N, c))
    blk, wblk = np.empty(c), np.empty(c)
    row = send[RANK]                       # one view object: the memo keys on identities

    def both(method, *args, **kwargs):
        """Run on P2PComm with (send, recv/blk), on native with (send, want/wblk)."""
        swap = {id(recv): want, id(blk): wblk}
        getattr(pc, method)(*args, **kwargs)
        getattr(plain, method)(*[swap.get(id(a), a) for a in args],
                               **{k: swap.get(id(v), v) for k, v in kwargs.items()})

    def loop():
        for k in range(4):
            send[...] = np.arange(N * c).reshape(N, c) * (RANK + 1) + k
            root = k % N
            both("Allreduce", send, recv, MPI.SUM)
            both("Allreduce", sendbuf=send, recvbuf=recv, op=MPI.MAX)
            both("Reduce", send, recv, MPI.SUM, root)
            both("Reduce", send, recv, root=root)
            both("Gather", row, recv, root)
            both("Allgather", row, recv)
            both("Scatter", send, blk, root=root)
            both("Reduce_scatter_block", send, blk, MPI.PROD)
            both("Scan", send, recv, MPI.PROD)
            np.testing.assert_array_equal(recv, want)
            both("Exscan", send, recv)
            if RANK > 0:                          # rank 0's exscan result is undefined
                np.testing.assert_array_equal(recv, want)
            both("Alltoall", send, recv)
            np.testing.assert_array_equal(recv, want)
            blk[...] = send[0] if RANK == root else -1
            wblk[...] = blk
            both("Bcast", blk, root)
            pc.Barrier()
            np.testing.assert_array_equal(blk, wblk)
            if RANK == root:
                np.testing.assert_array_equal(recv, want)
            recv[...] = send
            want[...] = send
            pc.Allreduce(MPI.IN_PLACE, recv)
            plain.Allreduce(MPI.IN_PLACE, want)
            np.testing.assert_array_equal(recv, want)
    # 3 repeats of the 9 calls whose arguments do not change with the root (the others
    # repeat too once the root comes round again)
    assert hits(loop) >= 3 * 9
    plain.Free()


@pytest.mark.mpi
def test_p2pcomm_call_forms_share_one_entry(monkeypatch):
    """Positional, keyword and default arguments of one call key alike (the drop-in's quick
    form and its general form): after the first call, every form is served by one entry;
    another op is another entry.
    """
    monkeypatch.setattr(_memo, "_memo", {})          # (the memo may be full: it evicts then)
    pc = mpicoll.P2PComm(comm, allreduce="ring", bcast="binomial")
    x, y = np.arange(4.0) + RANK, np.empty(4)
    pc.Allreduce(x, y)
    pc.Bcast(x, 0)
    before = len(_memo._memo)

    def forms():
        pc.Allreduce(x, y)
        pc.Allreduce(x, y, MPI.SUM)
        pc.Allreduce(x, recvbuf=y)
        pc.Allreduce(sendbuf=x, recvbuf=y, op=MPI.SUM)
        pc.Bcast(x, 0)
        pc.Bcast(x, root=0)
        pc.Bcast(buf=x)
    assert hits(forms) == 7 and len(_memo._memo) == before
    np.testing.assert_array_equal(y, N * np.arange(4.0))    # x: rank 0's since the first Bcast
    pc.Allreduce(x, y, MPI.MAX)
    assert len(_memo._memo) == before + 1


@pytest.mark.mpi(min_size=2)
def test_p2pcomm_memo_mismatch_and_bad_argument_raise_everywhere():
    pc = mpicoll.P2PComm(comm, allreduce="recursive_doubling")
    x, y = np.ones(4), np.empty(4)
    for _ in range(3):
        pc.Allreduce(x, y)
        pc.Bcast(x, 0)
    with pytest.raises(mpicoll.ArgumentError):
        pc.Bcast(x, N + 2 if RANK == 1 else 0)
    with pytest.raises(mpicoll.CollectiveMismatchError):   # both memo hits, different calls
        if RANK == 1:
            pc.Bcast(x, 0)
        else:
            pc.Allreduce(x, y)
    x[...] = 1
    pc.Allreduce(x, y)
    assert (y == N).all()
    with pytest.raises(mpicoll.ArgumentError):        # not a memo hit: a list spec, bad count
        pc.Allreduce([x, 5 if RANK == 0 else 4, MPI.DOUBLE], [y, 4, MPI.DOUBLE])


@pytest.mark.mpi
def test_functional_scans_repeat_correctly():
    x, y = np.empty(4), np.empty(4)

    def loop():
        for k in range(4):
            x[...] = np.arange(4.0) + RANK + k
            mpicoll.scan(x, y)
            np.testing.assert_array_equal(y, comm.scan(x))
            mpicoll.exscan(x, y, MPI.MAX)
            if RANK > 0:                          # max over ranks 0..RANK-1
                np.testing.assert_array_equal(y, np.arange(4.0) + RANK - 1 + k)
    assert hits(loop) >= 6


# -- device arrays: replayed on the transport their steps were bound to ----------------------

@pytest.fixture
def fake():
    """The stand-in device with IPC; each test chooses the transport."""
    ad = fd.install()
    fd.enable_ipc(True)
    _device.set_cuda_aware(False)
    eager = _ipc.EAGER_MAX
    yield ad
    _ipc.EAGER_MAX = eager
    _fuse.FUSE = True
    _device.set_transport(None)
    _device.set_cuda_aware(None)
    fd.enable_ipc(False)


def ipc_moved(c):
    """Messages this rank sent through the ipc transport on ``c`` (mapped or eager)."""
    st = gpu.ipc_stats(c).get(("fake", 0), {})
    return st.get("sent_ipc", 0) + st.get("sent_eager", 0)


@pytest.mark.mpi
@pytest.mark.parametrize("transport", ["staged", "aware", "ipc", "ipc-mapped"])
@pytest.mark.parametrize("algo", ["ring", "recursive_doubling", "native"])
def test_device_calls_repeat_on_their_transport(fake, transport, algo):
    """Repeated calls on the same device arrays are memo hits and see new data, on every
    transport (ipc-mapped: no eager messages, the payload through mapped allocations).
    """
    _device.set_transport(transport.split("-")[0])
    if transport == "ipc-mapped":
        _ipc.EAGER_MAX = 0
    with on_nodes(str(N)) as c:
        x, y = fd.device_empty(5, np.float64), fd.device_empty(5, np.float64)

        def loop():
            for k in range(6):
                host = np.arange(5.0) * (RANK + 1) + k
                x.set(host)
                assert mpicoll.allreduce(x, y, comm=c, algorithm=algo) is y
                np.testing.assert_array_equal(fd.to_host(y), comm.allreduce(host))
        assert hits(loop) >= 5
        if N > 1 and transport.startswith("ipc") and algo != "native":
            assert ipc_moved(c) > 0


@pytest.mark.mpi
def test_device_memo_rebinds_when_the_transport_changes(fake):
    """A new transport choice (or the ipc fusion switch) makes the next call take the full
    path and bind anew: the messages then move the new way.
    """
    with on_nodes(str(N)) as c:
        x, y = fd.to_device(np.full(4, RANK + 1.0)), fd.device_empty(4, np.float64)
        for choice, fuse in [("ipc", True), ("staged", True), ("ipc", True), ("ipc", False),
                             ("aware", False)]:
            _device.set_transport(choice)
            _fuse.FUSE = fuse
            before = ipc_moved(c)
            n = hits(lambda: [mpicoll.allreduce(x, y, comm=c, algorithm="ring")
                              for _ in range(3)])
            assert n == 2, (choice, fuse)              # the first call binds, two replay
            assert (fd.to_host(y) == N * (N + 1) / 2).all()
            if N > 1:
                assert (ipc_moved(c) > before) == (choice == "ipc"), (choice, fuse)


@pytest.mark.mpi(min_size=2)
def test_a_failed_device_replay_is_forgotten(fake, monkeypatch):
    """A replay that raises (here every rank, at its first copy off the device, before any
    message) drops its entry: the next call builds a fresh transport and binds again.
    """
    _device.set_transport("staged")
    with on_nodes(str(N)) as c:
        x, y = fd.to_device(np.ones(4)), fd.device_empty(4, np.float64)
        assert hits(lambda: [mpicoll.allreduce(x, y, comm=c, algorithm="ring")
                             for _ in range(2)]) == 1

        def lost(dev, host):
            raise RuntimeError("fake: device lost")
        monkeypatch.setattr(fake, "to_host", lost)
        with pytest.raises(RuntimeError, match="device lost"):
            mpicoll.allreduce(x, y, comm=c, algorithm="ring")
        monkeypatch.undo()
        assert hits(lambda: mpicoll.allreduce(x, y, comm=c, algorithm="ring")) == 0
        assert hits(lambda: mpicoll.allreduce(x, y, comm=c, algorithm="ring")) == 1
        assert (fd.to_host(y) == N).all()


@pytest.mark.mpi
@pytest.mark.parametrize("transport", ["staged", "ipc"])
def test_p2pcomm_methods_on_device_arrays_repeat_correctly(fake, transport):
    """The drop-in's blocking methods on device arrays are memo hits too, and give what
    the native methods give on the same data in host arrays.
    """
    _device.set_transport(transport)
    with on_nodes(str(N)) as c:
        pc = mpicoll.P2PComm(c, allreduce="recursive_doubling")
        x, y = fd.device_empty(6, np.float64), fd.device_empty(6, np.float64)
        b = fd.device_empty(4, np.int32)

        def loop():
            for k in range(4):
                host = np.arange(6.0) * (RANK + 1) + k
                x.set(host)
                pc.Allreduce(x, y, MPI.MAX)
                want = np.empty(6)
                comm.Allreduce(host, want, MPI.MAX)
                np.testing.assert_array_equal(fd.to_host(y), want)
                hb = np.arange(4, dtype=np.int32) + (k if RANK == k % N else -1)
                b.set(hb)
                pc.Bcast(b, root=k % N)
                comm.Bcast(hb, root=k % N)
                np.testing.assert_array_equal(fd.to_host(b), hb)
        assert hits(loop) >= 3 + (4 - N if N < 4 else 0)


@pytest.mark.mpi
def test_release_staging_forgets_device_entries(fake):
    """gpu.release_staging() drops the pinned arenas: the memo's device entries, which
    hold them through their transports, go too; the next call binds anew.
    """
    _device.set_transport("staged")
    with on_nodes(str(N)) as c:
        x, y = fd.to_device(np.ones(4)), fd.device_empty(4, np.float64)
        h = np.ones(4)
        assert hits(lambda: [mpicoll.allreduce(x, y, comm=c) for _ in range(2)]) == 1
        mpicoll.allreduce(h, h.copy(), comm=c)                  # a host entry stays
        gpu.release_staging()
        assert all(e.dev is None for e in _memo._memo.values()) and _memo._memo
        assert hits(lambda: mpicoll.allreduce(x, y, comm=c)) == 0
        assert (fd.to_host(y) == N).all()


@pytest.mark.mpi
def test_device_entries_are_capped(fake):
    """At most _MAX_DEVICE entries on device arrays (each keeps GPU memory alive): a loop
    over more distinct arrays keeps the newest, and its calls stay correct.
    """
    _device.set_transport("staged")
    with on_nodes(str(N)) as c:
        xs = [fd.to_device(np.full(2, k + 1.0)) for k in range(_memo._MAX_DEVICE + 8)]
        y = fd.device_empty(2, np.float64)
        for k, x in enumerate(xs):
            mpicoll.allreduce(x, y, comm=c)
            assert (fd.to_host(y) == N * (k + 1)).all()
        on_device = [e for e in _memo._memo.values() if e.dev is not None]
        assert len(on_device) == _memo._MAX_DEVICE
        assert hits(lambda: mpicoll.allreduce(xs[-1], y, comm=c)) == 1
        assert hits(lambda: mpicoll.allreduce(xs[0], y, comm=c)) == 0
