"""Checked mode: the ranks compare a fingerprint of each call before running it.

Mismatched primitive, algorithm, op, dtype, count, root, recvcounts or call
number raise the same CollectiveMismatchError on every rank (never a hang,
never a truncation), naming the ranks and the values they disagree on.
Tests use a private Dup of COMM_WORLD set to checked mode, so the rest of
the suite is unaffected.
"""
import os

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import fingerprint as fpr
from mpicoll.engine.call import CollectiveMismatchError, _state, check_mode, get_check, set_check
from mpicoll.engine.context import private_comm

world = MPI.COMM_WORLD
N, RANK = world.Get_size(), world.Get_rank()

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def ccomm():
    comm = world.Dup()
    set_check(comm, "checked")
    yield comm
    comm.Free()


def outcome(fn):
    """Run fn on this rank; gather (exception type, message, error class) from every rank."""
    try:
        fn()
        mine = (None, "", None)
    except Exception as exc:
        eclass = exc.Get_error_class() if isinstance(exc, MPI.Exception) else None
        mine = (type(exc).__name__, str(exc), eclass)
    return world.allgather(mine)


def assert_mismatch(results, *fragments, eclass=None):
    """Every rank raised CollectiveMismatchError with one and the same message."""
    names = {r[0] for r in results}
    assert names == {"CollectiveMismatchError"}, results
    texts = {r[1] for r in results}
    assert len(texts) == 1, f"messages differ between ranks: {texts}"
    text = texts.pop()
    for frag in fragments:
        assert frag in text, f"{frag!r} not in {text!r}"
    if eclass is not None:
        assert {r[2] for r in results} == {eclass}, results
    return text


def still_works(comm):
    x = np.full(3, RANK + 1.0)
    assert np.array_equal(mpicoll.allreduce(x, comm=comm), np.full(3, N * (N + 1) / 2))


# -- the fingerprint itself (pure functions, no communication) ----------------

def test_fingerprint_roundtrip_and_compare():
    a = fpr.build(fpr.SETTLE, 7, "reduce_scatter", 0,
                  ("recursive_doubling", MPI.SUM, np.dtype("float64"), 2**40 + 3, None, [1, 2]))
    b = fpr.build(fpr.SETTLE, 7, "reduce_scatter", 0,
                  ("recursive_doubling", MPI.SUM, np.dtype("float64"), 2**40 + 3, None, [2, 1]))
    assert a.dtype == np.int64 and a.size == fpr.L
    every = np.stack([a, a, b])
    assert fpr.primitives(every) == ["reduce_scatter"] * 3
    assert fpr.all_agree(every, checked=False)            # agree mode: recvcounts not compared
    assert not fpr.all_agree(every, checked=True)
    diffs = fpr.differences(every, checked=True)
    assert [d[0] for d in diffs] == ["recvcounts"]
    assert sorted(diffs[0][2].values()) == [[0, 1], [2]]
    # Counts above 2^31 travel exactly (int64, no truncation).
    c = every.copy()
    c[2] = a
    c[2, fpr.C_COUNT] = 2**40 + 4
    (name, eclass, groups), = fpr.differences(c, checked=True)
    assert name == "count" and eclass == MPI.ERR_COUNT
    assert set(groups) == {f"{2**40 + 3} elements", f"{2**40 + 4} elements"}
    msg = fpr.mismatch_message(c, [(name, eclass, groups)])
    assert "ranks 0-1" in msg and "rank 2" in msg and "call #7" in msg


def test_fingerprint_call_number_and_names():
    desc = ("a_very_long_algorithm_name_beyond_24_bytes", MPI.Op.Create(lambda *a: None, False),
            np.dtype("complex128"), 5, 3, None)
    a = fpr.build(fpr.SETTLE, 1, "allreduce", fpr.FLAG_CHECKED, desc)
    b = fpr.build(fpr.SETTLE, 2, "allreduce", 0, desc)
    every = np.stack([a, b])
    (name, _, groups), *_ = fpr.differences(every, checked=fpr.any_checked(every))
    assert name == "call number" and set(groups) == {"#1", "#2"}
    long_b = fpr.build(fpr.SETTLE, 1, "allreduce", 0,
                       ("a_very_long_algorithm_name_beyond_24_bytes_but_different",) + desc[1:])
    diffs = fpr.differences(np.stack([a, long_b]), checked=True)
    assert [d[0] for d in diffs] == ["algorithm"]        # CRC tells long names apart
    assert "user op (non-commutative)" in fpr._op_display(a[fpr.C_OP])
    assert fpr.ranks_text([0, 1, 2, 4, 6, 7]) == "0-2, 4, 6-7"
    # An ArgumentError (hence ValueError and MPI.Exception) and picklable.
    import pickle
    exc = CollectiveMismatchError("m", MPI.ERR_COUNT, [("count", MPI.ERR_COUNT, {"1": [0]})])
    assert isinstance(exc, mpicoll.ArgumentError) and isinstance(exc, ValueError)
    back = pickle.loads(pickle.dumps(exc))
    assert str(back) == "m" and back.Get_error_class() == MPI.ERR_COUNT and back.differences


def test_agree_mode_compares_primitive_and_algorithm():
    desc = ("ring", MPI.SUM, np.dtype("f8"), 10, None, None)
    a = fpr.build(fpr.SETTLE, 3, "allreduce", fpr.FLAG_RECORDED, desc)
    b = fpr.build(fpr.SETTLE, 3, "allreduce", fpr.FLAG_RECORDED,
                  ("recursive_doubling",) + desc[1:])
    every = np.stack([a, a, b])
    assert not fpr.all_agree(every, checked=False)
    (name, _, groups), = fpr.differences(every, checked=False)
    assert name == "algorithm" and groups == {"ring": [0, 1], "recursive_doubling": [2]}
    c = fpr.build(fpr.SETTLE, 3, "bcast", fpr.FLAG_RECORDED,
                  ("binomial", None, np.dtype("f8"), 10, 0, None))
    assert [d[0] for d in fpr.differences(np.stack([a, c]), checked=False)] == ["primitive"]
    # Same algorithm, different count, dtype, op or root: agree mode catches them too
    # (MPI would truncate, hang or reduce garbage), naming the field.
    for field, other in [("count", desc[:3] + (11, None, None)),
                         ("dtype", desc[:2] + (np.dtype("f4"),) + desc[3:]),
                         ("op", desc[:1] + (MPI.MAX,) + desc[2:]),
                         ("root", desc[:4] + (1, None))]:
        d = fpr.build(fpr.SETTLE, 3, "allreduce", fpr.FLAG_RECORDED, other)
        assert not fpr.all_agree(np.stack([a, d]), checked=False), field
        assert [x[0] for x in fpr.differences(np.stack([a, d]), checked=False)] == [field]
    # The call number is compared in checked mode only.
    e = fpr.build(fpr.SETTLE, 4, "allreduce", fpr.FLAG_RECORDED, desc)
    assert fpr.all_agree(np.stack([a, e]), checked=False)
    assert not fpr.all_agree(np.stack([a, e]), checked=True)


@pytest.mark.mpi
def test_agree_mode_catches_per_rank_algorithms():
    """Default mode: ranks that pick different algorithms raise everywhere, never hang."""
    if N == 1:
        pytest.skip("needs two ranks to disagree")
    comm = world.Dup()
    try:
        set_check(comm, "agree")
        x = np.ones(2 * N + 1)
        algo = "ring" if RANK == 0 else "recursive_doubling"
        with pytest.raises(CollectiveMismatchError, match="algorithm") as info:
            mpicoll.allreduce(x, algorithm=algo, comm=comm)
        assert "rank 0" in str(info.value) and "ring" in str(info.value)
        # Different collectives at once: named too.
        with pytest.raises(CollectiveMismatchError, match="primitive"):
            if RANK == N - 1:
                mpicoll.bcast(x, 0, comm=comm)
            else:
                mpicoll.allreduce(x, comm=comm)
        # A count mismatch that makes 'auto' choose differently names the count as well.
        with pytest.raises(CollectiveMismatchError, match="count"):
            mpicoll.bcast(np.ones(1 if RANK == 0 else 1 << 20), 0, comm=comm,
                          algorithm="binomial" if RANK == 0 else "pipeline")
        still_works(comm)
    finally:
        comm.Free()


@pytest.mark.mpi
def test_agree_mode_catches_count_and_dtype_mismatches():
    """Default mode: a count or dtype that differs on one rank raises everywhere, naming it,
    where plain MPI truncates, hangs or returns garbage: block collectives, v-collectives and
    scans, blocking and nonblocking, first calls and repeated (memo) calls alike.
    """
    if N == 1:
        pytest.skip("needs two ranks to disagree")
    comm = world.Dup()
    try:
        set_check(comm, "agree")
        last = RANK == N - 1
        x = np.ones(3 if last else 4)
        with pytest.raises(CollectiveMismatchError, match="count") as info:
            mpicoll.allreduce(x, comm=comm, algorithm="ring")
        assert f"rank {N - 1}" in str(info.value)
        y = np.ones(4, dtype=np.float32 if last else np.float64)
        with pytest.raises(CollectiveMismatchError, match="dtype"):
            mpicoll.scan(y, comm=comm)
        with pytest.raises(CollectiveMismatchError, match="dtype"):
            mpicoll.iallreduce(y, comm=comm).Wait()
        z = np.arange(N, dtype=np.int32 if last else np.int64)
        with pytest.raises(CollectiveMismatchError, match="dtype"):
            mpicoll.allgatherv(z[:1], [np.zeros(N, z.dtype), [1] * N], comm=comm)
        # A call the memo replays: the same arrays, then one rank changes its op.
        w, out = np.ones(2), np.zeros(2)
        for _ in range(2):
            mpicoll.allreduce(w, out, comm=comm)
        with pytest.raises(CollectiveMismatchError, match="op"):
            mpicoll.allreduce(w, out, op=MPI.MAX if last else MPI.SUM, comm=comm)
        still_works(comm)
    finally:
        comm.Free()


def test_phase_mismatch_is_structural():
    a = fpr.build(fpr.SETTLE, 0, "allreduce", 0, ("ring", MPI.SUM, np.dtype("f8"), 1, None, None))
    b = fpr.build(fpr.EXCHANGE, 0, "reduce_scatter", 0)
    every = np.stack([a, b])
    assert not fpr.all_agree(every, checked=False)
    assert [d[0] for d in fpr.differences(every, checked=False)] == ["phase"]


# -- the switch ---------------------------------------------------------------

def test_modes_and_set_check():
    comm = world.Dup()
    try:
        default = check_mode()
        assert get_check(comm) == default
        assert set_check(comm, True) is None
        assert get_check(comm) == "checked"
        assert set_check(comm, "local") == "checked"
        assert get_check(comm) == "local"
        assert set_check(comm, False) == "local" and get_check(comm) == "agree"
        set_check(comm, None)
        assert get_check(comm) == default
        for junk in ("maybe", 3, "", object()):
            with pytest.raises(mpicoll.ArgumentError, match="mode: expected"):
                set_check(comm, junk)
        # A P2PComm shares its base communicator's handle, hence its setting.
        set_check(mpicoll.P2PComm(comm), "checked")
        assert get_check(comm) == "checked"
    finally:
        comm.Free()


def test_env_values(monkeypatch):
    for raw, mode in [("1", "checked"), ("on", "checked"), ("CHECKED", "checked"),
                      ("0", "local"), ("off", "local"), ("agree", "agree"), ("", "agree")]:
        monkeypatch.setenv("MPICOLL_CHECK", raw)
        assert check_mode() == mode
    monkeypatch.setenv("MPICOLL_CHECK", "sometimes")
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_CHECK"):
        check_mode()


def test_env_checked_mode_on_world(monkeypatch):
    """MPICOLL_CHECK=1 turns checked mode on for every communicator without its own setting."""
    monkeypatch.setenv("MPICOLL_CHECK", "1")
    comm = world.Dup()
    try:
        res = outcome(lambda: mpicoll.allreduce(np.zeros(2 + (RANK == N - 1)), comm=comm))
        if N > 1:
            assert_mismatch(res, "count: 2 elements on rank", f"3 elements on rank {N - 1}")
        else:
            assert res == [(None, "", None)]
        still_works(comm)
    finally:
        comm.Free()


# -- mismatches, one field at a time -------------------------------------------

@pytest.mark.mpi(min_size=2)
def test_count_mismatch_bcast(ccomm):
    """Plain MPI: truncation error on some ranks, or silently stale data. Checked: one error."""
    c = 4 + (RANK == 1)
    res = outcome(lambda: mpicoll.bcast(np.zeros(c), 0, comm=ccomm))
    others = "0" if N == 2 else ("0, 2" if N == 3 else f"0, 2-{N - 1}")
    text = assert_mismatch(res, "mpicoll.bcast",
                           f"count: 4 elements on rank{'s' if N > 2 else ''} {others}; "
                           f"5 elements on rank 1", eclass=MPI.ERR_COUNT)
    assert "checked mode" in text and "nothing was sent" in text
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_root_mismatch(ccomm):
    root = 1 if RANK == N - 1 else 0
    res = outcome(lambda: mpicoll.reduce(np.ones(3), None, MPI.SUM, root, comm=ccomm))
    assert_mismatch(res, "mpicoll.reduce", "root: 0 on rank", f"1 on rank {N - 1}",
                    eclass=MPI.ERR_ROOT)
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_op_mismatch(ccomm):
    op = MPI.MAX if RANK == 0 else MPI.SUM
    res = outcome(lambda: mpicoll.allreduce(np.ones(3), op=op, comm=ccomm))
    assert_mismatch(res, "op: MPI.MAX on rank 0", "MPI.SUM on rank", eclass=MPI.ERR_OP)
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_dtype_mismatch(ccomm):
    dt = np.float32 if RANK == 0 else np.float64
    res = outcome(lambda: mpicoll.allgather(np.ones(3, dt), comm=ccomm))
    assert_mismatch(res, "dtype: float32 on rank 0", "float64 on rank", eclass=MPI.ERR_TYPE)
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_same_bytes_different_dtype(ccomm):
    """Equal byte counts do not hide a type mismatch (MPI requires matching type signatures)."""
    x = np.zeros(8, np.uint8) if RANK == 0 else np.zeros(1, np.float64)
    res = outcome(lambda: mpicoll.bcast(x, 0, comm=ccomm))
    assert_mismatch(res, "dtype: uint8 on rank 0", "count: 8 elements on rank 0")
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_algorithm_mismatch(ccomm):
    algo = "ring" if RANK == 0 else "recursive_doubling"
    res = outcome(lambda: mpicoll.allreduce(np.ones(3), algorithm=algo, comm=ccomm))
    assert_mismatch(res, "algorithm: ring on rank 0", "recursive_doubling on rank")
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("first,other", [("bcast", "allreduce"), ("barrier", "gather"),
                                         ("alltoall", "reduce_scatter"), ("scatter", "barrier")])
def test_primitive_mismatch(ccomm, first, other):
    """Different collectives on different ranks: plain MPI deadlocks or mixes messages."""
    x = np.arange(2.0 * N)

    def call(prim):
        if prim == "bcast":
            return mpicoll.bcast(x.copy(), 0, comm=ccomm)
        if prim == "allreduce":
            return mpicoll.allreduce(x, comm=ccomm)
        if prim == "barrier":
            return mpicoll.barrier(comm=ccomm)
        if prim == "gather":
            return mpicoll.gather(x, None, 0, comm=ccomm)
        if prim == "alltoall":
            return mpicoll.alltoall(x, comm=ccomm)
        if prim == "reduce_scatter":
            return mpicoll.reduce_scatter_block(x, comm=ccomm)
        if prim == "scatter":
            return mpicoll.scatter(x if RANK == 0 else None, np.empty(2), 0, comm=ccomm)
        raise AssertionError(prim)
    res = outcome(lambda: call(first if RANK == 0 else other))
    text = assert_mismatch(res, "the ranks called different collectives",
                           f"primitive: {first} on rank 0", f"{other} on rank")
    assert "count" not in text          # consequences of the primitive mismatch are not listed
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_recvcounts_mismatch(ccomm):
    counts = [1] * N
    if RANK == N - 1:
        counts = [2] + [1] * (N - 2) + [0]
    res = outcome(lambda: mpicoll.reduce_scatter(np.ones(N), None, counts, comm=ccomm))
    assert_mismatch(res, "recvcounts: list with checksum", eclass=MPI.ERR_COUNT)
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_call_number_mismatch(ccomm):
    """Rank 0 made one more collective call than the others (here via a local-mode call
    that the others matched by hand): the next checked call reports the sequence numbers.
    """
    set_check(ccomm, "local")
    if RANK == 0:
        mpicoll.barrier(comm=ccomm, algorithm="native")
    else:
        private_comm(ccomm).Barrier()      # the matching half, outside mpicoll
    set_check(ccomm, "checked")
    res = outcome(lambda: mpicoll.allreduce(np.ones(2), comm=ccomm))
    assert_mismatch(res, "call number: #1 on rank 0", "#0 on rank")
    st = _state(private_comm(ccomm))
    st.seq = world.allreduce(st.seq, op=MPI.MAX)   # resynchronise for the check below
    still_works(ccomm)


# -- what may legitimately differ ------------------------------------------------

@pytest.mark.mpi(min_size=2)
def test_rank_specific_arguments_pass(ccomm):
    """Only what MPI needs to match is compared: root-only buffers, in-place flags may differ."""
    root = N - 1
    x = np.full(4, RANK, np.int64)
    # Non-root recvbufs are irrelevant (None, junk sizes); the root reduces in place.
    if RANK == root:
        buf = x.copy()
        got = mpicoll.reduce(MPI.IN_PLACE, buf, MPI.SUM, root, comm=ccomm)
        assert np.array_equal(got, np.full(4, N * (N - 1) // 2))
    else:
        assert mpicoll.reduce(x, np.empty(99), MPI.SUM, root, comm=ccomm) is None
    got = mpicoll.gather(x, None if RANK == root else "ignored", root, comm=ccomm)
    if RANK == root:
        assert np.array_equal(got, np.repeat(np.arange(N), 4).reshape(N, 4))
    send = np.arange(3 * N, dtype=np.int64) if RANK == root else "ignored off the root"
    out = mpicoll.scatter(send, np.empty(3, np.int64), root, comm=ccomm)
    assert np.array_equal(out, np.arange(3 * RANK, 3 * RANK + 3))
    buf = np.zeros((N, 2)) if RANK == 0 else None
    if RANK == 0:
        mpicoll.allgather(MPI.IN_PLACE, buf, comm=ccomm)   # in place on one rank only
    else:
        buf = mpicoll.allgather(np.zeros(2), comm=ccomm)
    assert buf.shape == (N, 2)
    still_works(ccomm)


def test_matching_calls_every_primitive(ccomm):
    """Checked mode changes nothing for correct programs (every primitive, every rank)."""
    x = np.arange(2 * N, dtype=np.float64) + RANK
    assert np.array_equal(mpicoll.bcast(x.copy(), 0, comm=ccomm), np.arange(2 * N, dtype=float))
    mpicoll.reduce(x, None, MPI.SUM, 0, comm=ccomm)
    mpicoll.allreduce(x, comm=ccomm)
    mpicoll.gather(x, None, 0, comm=ccomm)
    mpicoll.allgather(x, comm=ccomm)
    mpicoll.scatter(x if RANK == 0 else None, np.empty(2), 0, comm=ccomm)
    mpicoll.reduce_scatter_block(x, comm=ccomm)
    mpicoll.reduce_scatter(x, None, [2] * N, comm=ccomm)
    mpicoll.alltoall(x, comm=ccomm)
    mpicoll.barrier(comm=ccomm)
    comm = mpicoll.P2PComm(ccomm)
    r = np.empty(2)
    comm.Reduce_scatter(x, r)                      # recvcounts from recvbufs: exchange phase
    total = sum(np.arange(2 * N, dtype=float) + k for k in range(N))
    assert np.array_equal(r, total[2 * RANK:2 * RANK + 2])
    assert _state(private_comm(ccomm)).seq == 11
    still_works(ccomm)


# -- mixed modes, validation errors, and the exchange phase --------------------

@pytest.mark.mpi(min_size=2)
def test_one_rank_checked_checks_all():
    """If any rank is in checked mode every rank compares: modes need not agree."""
    comm = world.Dup()
    try:
        if RANK == N - 1:
            set_check(comm, "checked")
        assert np.array_equal(mpicoll.allreduce(np.ones(2), comm=comm), np.full(2, float(N)))
        res = outcome(lambda: mpicoll.allreduce(np.ones(2 + (RANK == 0)), comm=comm))
        assert_mismatch(res, "count: 3 elements on rank 0")
        still_works(comm)
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_validation_error_and_mismatch(ccomm):
    """A rank with bad arguments and a rank in another collective: every rank raises."""
    def call():
        if RANK == 0:
            return mpicoll.bcast(np.zeros(2), root=N + 5, comm=ccomm)   # bad root
        return mpicoll.barrier(comm=ccomm)
    res = outcome(call)
    assert all(r[0] is not None for r in res), res
    assert "root: expected a rank" in res[0][1]
    for r in res[1:]:
        assert "invalid arguments on rank(s) 0" in r[1] and "primitive: bcast on rank 0" in r[1]
    still_works(ccomm)


@pytest.mark.mpi(min_size=2)
def test_exchange_phase_against_other_collective(ccomm):
    """Reduce_scatter without recvcounts exchanges counts first; a rank in another
    collective meanwhile gets an error instead of a hang, on every rank.
    """
    comm = mpicoll.P2PComm(ccomm)

    def call():
        if RANK == 0:
            return comm.Reduce_scatter(np.ones(N), np.empty(1))
        return comm.Allreduce(np.ones(3), np.empty(3))
    res = outcome(call)
    assert_mismatch(res, "phase")
    st = _state(private_comm(ccomm))
    st.seq = world.allreduce(st.seq, op=MPI.MAX)   # rank 0 has not counted its call yet
    still_works(ccomm)


def test_agree_mode_still_default():
    """Without a setting, a rank-local argument error raises everywhere (agree mode)."""
    if os.environ.get("MPICOLL_CHECK"):
        pytest.skip("MPICOLL_CHECK set by the caller")
    res = outcome(lambda: mpicoll.bcast(np.zeros(2), root=N if RANK == 0 else 0))
    assert all(r[0] in ("ArgumentError", "ArgumentTypeError") for r in res), res
    still_works(world)


@pytest.mark.mpi(min_size=2)
def test_a_mismatch_judged_late_keeps_later_calls_in_step(ccomm, monkeypatch):
    """A nonblocking call is judged when its request first advances: on rank 1 at once,
    on rank 0 only at its Wait, after a blocking call made meanwhile. Both raise the
    mismatch, and the call numbers of every rank stay in step for the calls that follow
    (checked mode compares them): no rank's count moves back.
    """
    monkeypatch.setenv("MPICOLL_PROGRESS", "none")     # no thread judges it early
    x, y = np.ones(3), np.empty(3)
    algo = "ring" if RANK == 1 else "recursive_doubling"
    token = np.zeros(1)
    if RANK == 1:
        world.Recv(token, 0, tag=77)                   # rank 0's request is in flight
    req = mpicoll.iallreduce(x, y, comm=ccomm, algorithm=algo)
    early = None
    if RANK == 0:
        world.Send(token, 1, tag=77)
    elif RANK == 1:
        try:
            while not req.Test():                      # judged now, before the blocking call
                pass
        except CollectiveMismatchError as exc:
            early = exc
    world.Barrier()
    still_works(ccomm)                                 # blocking, before rank 0 judges
    if RANK == 1:
        assert early is not None and "algorithm" in str(early)
    else:
        with pytest.raises(CollectiveMismatchError, match="algorithm"):
            req.Wait()
    for _ in range(3):
        still_works(ccomm)
