"""The memo of repeated v-collective calls (mpicoll.engine.memo.run_specs / start_specs).

A v-collective exchanges counts before it can validate. A repeated call on the
same arrays and the same counts (given in any of mpi4py's spec forms, compared
by value) replays that exchange and then its bound steps; where some rank sent
something else in the exchange, the replaying rank goes on along the full path
with what it gathered. Every result is checked against mpi4py's native call on
the same data.
"""
import gc
import weakref

import numpy as np
import pytest
from mpi4py import MPI
from test_memo import hits
from test_memo_requests import replays

import mpicoll
from mpicoll.engine import memo as _memo
from mpicoll.engine.call import Call

comm = MPI.COMM_WORLD
N, RANK = comm.Get_size(), comm.Get_rank()


def full_path_after_exchange(fn):
    """Run ``fn`` and count the replayed exchanges that sent their call on along the full
    path (some rank sent something else).
    """
    seen, orig = [], _memo._Entry.exchange

    def counting(self, *args):
        result = orig(self, *args)
        seen.extend([1] if type(result) is Call else [])
        return result
    _memo._Entry.exchange = counting
    try:
        fn()
    finally:
        _memo._Entry.exchange = orig
    return len(seen)


def counts_of(k=1):
    """Per-rank counts with zeros (from N = 3), a total not divisible by N."""
    return [(r + k) % 3 for r in range(N)]


def spaced(counts):
    """Displacements with a gap of one element after each block, in reverse rank order."""
    displs, at = [0] * N, 0
    for r in reversed(range(N)):
        displs[r] = at
        at += counts[r] + 1
    return displs, at


def recv_spec(form, y, counts, displs):
    """One receive v-spec form of mpi4py."""
    return {"counts": [y, counts],
            "counts_displs_tuple": [y, (counts, displs)],
            "counts_displs": [y, np.array(counts), tuple(displs)],
            "datatype": [y, counts, displs, MPI.DOUBLE]}[form]


@pytest.mark.mpi
@pytest.mark.parametrize("form", ["counts", "counts_displs_tuple", "counts_displs", "datatype"])
def test_repeated_allgatherv_replays_and_matches_mpi4py(form):
    counts = counts_of(0 if N > 1 else 1)
    displs, total = spaced(counts)
    if form == "counts":
        displs, total = list(np.cumsum([0] + counts[:-1])), sum(counts)
    x = np.empty(counts[RANK])
    y, ref = np.full(total, -1.0), np.full(total, -1.0)

    def loop():
        for k in range(6):
            x[...] = 10.0 * RANK + k + np.arange(x.size)
            # a new list every call, as user code makes them: compared by value
            mpicoll.allgatherv(x, recv_spec(form, y, list(counts), list(displs)))
            comm.Allgatherv(x, [ref, counts, displs, MPI.DOUBLE])
            np.testing.assert_array_equal(y, ref)
    assert hits(loop) == 5


@pytest.mark.mpi
def test_gatherv_scatterv_alltoallv_replay_at_every_root():
    counts = counts_of(1)
    displs, total = spaced(counts)
    x, s = np.empty(counts[RANK]), np.empty(counts[RANK])
    y, ref, t = np.full(total, -1.0), np.full(total, -1.0), np.empty(total)
    # alltoallv: rank r sends (r + j) % 2 + 1 elements to rank j
    sc = [(RANK + j) % 2 + 1 for j in range(N)]
    rc = [(i + RANK) % 2 + 1 for i in range(N)]
    a, b, bref = np.empty(sum(sc)), np.empty(sum(rc)), np.empty(sum(rc))

    def loop():
        for k in range(3):
            for root in range(N):
                x[...] = 100.0 * RANK + k + np.arange(x.size)
                mine = y if RANK == root else None
                mpicoll.gatherv(x, [mine, counts, displs] if RANK == root else None, root)
                comm.Gatherv(x, [ref, counts, displs, MPI.DOUBLE] if RANK == root else None,
                             root)
                if RANK == root:
                    np.testing.assert_array_equal(y, ref)
                t[...] = np.arange(total) * (root + 1.0) + k
                mpicoll.scatterv([t, (counts, displs)] if RANK == root else None, s, root)
                np.testing.assert_array_equal(
                    s, t[displs[RANK]:displs[RANK] + counts[RANK]])
            a[...] = RANK * 10.0 + k + np.arange(a.size)
            mpicoll.alltoallv([a, sc], [b, rc])
            comm.Alltoallv([a, sc], [bref, rc])
            np.testing.assert_array_equal(b, bref)
    n = hits(loop)
    # the first call of each (gatherv and scatterv per root, alltoallv) takes the full path
    assert n == 3 * (2 * N + 1) - (2 * N + 1)


@pytest.mark.mpi(min_size=3)
def test_a_peer_that_changes_its_count_sends_replays_down_the_full_path():
    """The last rank sends 1, 2, 1, 2... elements (a new array each time); the root's
    counts follow. The ranks in between repeat the same call: their replayed exchange
    sees the last rank's new count and they go on along the full path, with the right
    result at the root.
    """
    x = np.full(2, float(RANK))
    y = np.empty(2 * N) if RANK == 0 else None

    def loop():
        for k in range(6):
            c = [2] * (N - 1) + [1 + k % 2]
            mine = np.full(c[-1], -5.0 - k) if RANK == N - 1 else x
            mpicoll.gatherv(mine, [y, c] if RANK == 0 else None, 0)
            if RANK == 0:
                want = np.concatenate([np.full(2, float(r)) for r in range(N - 1)]
                                      + [np.full(c[-1], -5.0 - k)])
                np.testing.assert_array_equal(y[:sum(c)], want)
    n = full_path_after_exchange(loop)
    assert n == (5 if 0 < RANK < N - 1 else 0)
    # ... and once nobody changes any more, the replays hold again
    c = [2] * N
    assert hits(lambda: [mpicoll.gatherv(x, [y, c] if RANK == 0 else None, 0)
                         for _ in range(3)]) >= 2
    if RANK == 0:
        np.testing.assert_array_equal(y, np.repeat(np.arange(N, dtype=float), 2))


@pytest.mark.mpi(min_size=2)
def test_another_call_on_one_rank_while_the_others_replay_raises_everywhere():
    counts = counts_of()
    x, y = np.ones(counts[RANK]), np.empty(sum(counts))
    z = np.empty(1)
    for _ in range(3):
        mpicoll.allgatherv(x, [y, counts])
    with pytest.raises(mpicoll.CollectiveMismatchError):
        if RANK == 1:
            mpicoll.allreduce(np.ones(1), z)
        else:
            mpicoll.allgatherv(x, [y, counts])
    x[...] = RANK
    mpicoll.allgatherv(x, [y, counts])
    np.testing.assert_array_equal(y, np.repeat(np.arange(N, dtype=float), counts))


@pytest.mark.mpi(min_size=2)
def test_bad_counts_on_the_root_after_replays_raise_everywhere():
    x = np.full(2, float(RANK))
    y = np.empty(2 * N + 1)             # room for the bad counts: they fail the count check
    for _ in range(3):
        mpicoll.gatherv(x, [y, [2] * N] if RANK == 0 else None, 0)
    bad = [2] * (N - 1) + [3]
    with pytest.raises(mpicoll.ArgumentError, match=rf"recvbuf counts.*rank {N - 1} sends 2"):
        mpicoll.gatherv(x, [y, bad] if RANK == 0 else None, 0)
    mpicoll.gatherv(x, [y, [2] * N] if RANK == 0 else None, 0)
    if RANK == 0:
        np.testing.assert_array_equal(y[:2 * N], np.repeat(np.arange(N, dtype=float), 2))


@pytest.mark.mpi
def test_counts_in_an_array_changed_in_place_are_read_anew():
    counts = np.array(counts_of(), dtype=np.int64)
    y = np.full(2 * N + 1, -1.0)
    for k in range(4):
        counts[:] = [(r + k) % 3 for r in range(N)]
        x = np.full(int(counts[RANK]), RANK + k, dtype=float)
        out = mpicoll.allgatherv(x, [y, counts])
        want = np.concatenate([np.full(int(counts[r]), r + k, dtype=float) for r in range(N)])
        np.testing.assert_array_equal(out[:int(counts.sum())], want)


@pytest.mark.mpi
def test_a_check_mode_changed_between_calls_takes_the_full_path():
    counts = counts_of()
    x, y = np.empty(counts[RANK]), np.empty(sum(counts))
    # The setting itself (None: MPICOLL_CHECK's), not the mode in force: restoring
    # "agree" would leave later tests' MPICOLL_CHECK unread on COMM_WORLD.
    before = mpicoll.set_check(comm, None)
    mpicoll.set_check(comm, before)
    try:
        for k, mode in enumerate(["agree", "agree", "checked", "checked", "local", "agree"]):
            mpicoll.set_check(comm, mode)
            x[...] = RANK + k
            mpicoll.allgatherv(x, [y, counts])
            np.testing.assert_array_equal(
                y, np.repeat(np.arange(N, dtype=float) + k, counts))
    finally:
        mpicoll.set_check(comm, before)


@pytest.mark.mpi
def test_p2pcomm_v_methods_replay_like_mpi4py():
    pc = mpicoll.P2PComm(comm)
    counts = counts_of(2)
    displs, total = spaced(counts)
    x = np.empty(counts[RANK])
    y, ref = np.full(total, -1.0), np.full(total, -1.0)
    s, sref = np.empty(3 * N), np.empty(3)
    r, rref = np.empty(3), np.empty(3)

    def loop():
        for k in range(4):
            x[...] = RANK * 7.0 + k + np.arange(x.size)
            pc.Allgatherv([x, MPI.DOUBLE], [y, (counts, displs), MPI.DOUBLE])
            comm.Allgatherv([x, MPI.DOUBLE], [ref, (counts, displs), MPI.DOUBLE])
            np.testing.assert_array_equal(y, ref)
            pc.Gatherv(x, [y, counts, displs, MPI.DOUBLE] if RANK == N - 1 else None,
                       root=N - 1)
            if RANK == N - 1:
                np.testing.assert_array_equal(y, ref)
            s[...] = np.arange(3.0 * N) * (RANK + 1) + k
            pc.Reduce_scatter(s, r)                       # counts from each recvbuf
            comm.Reduce_scatter(s, rref, [3] * N)
            np.testing.assert_array_equal(r, rref)
            pc.Reduce_scatter(s, r, [3] * N, MPI.MAX)     # counts given, a new list each time
            comm.Reduce_scatter(s, rref, [3] * N, MPI.MAX)
            np.testing.assert_array_equal(r, rref)
            sref[...] = 0
    assert hits(loop) == 4 * 3


@pytest.mark.mpi
def test_derived_datatype_specs_are_not_remembered():
    pc = mpicoll.P2PComm(comm)
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    try:
        x = np.full(2, float(RANK))
        y, ref = np.empty(2 * N), np.empty(2 * N)

        def loop():
            for _ in range(3):
                pc.Allgatherv([x, 1, pair], [y, [1] * N, pair])
                comm.Allgatherv([x, 1, pair], [ref, [1] * N, pair])
                np.testing.assert_array_equal(y, ref)
        assert hits(loop) == 0
    finally:
        pair.Free()


@pytest.mark.mpi
def test_nonblocking_v_calls_with_specs_replay():
    counts = counts_of(1)
    displs, total = spaced(counts)
    x = np.empty(counts[RANK])
    y, ref = np.full(total, -1.0), np.full(total, -1.0)

    def loop():
        for k in range(5):
            x[...] = RANK + k * 0.5
            reqs = [mpicoll.iallgatherv(x, [y, counts, displs])]
            comm.Allgatherv(x, [ref, counts, displs, MPI.DOUBLE])
            mpicoll.waitall(reqs)
            np.testing.assert_array_equal(y, ref)
    assert replays(loop) == 4


@pytest.mark.mpi
def test_spec_parts_compare_by_value_and_refuse_what_they_cannot_compare():
    a, b = np.ones(4), np.ones(4)
    one = _memo.spec_parts([[a, [1, 3], np.array([0, 1]), MPI.DOUBLE], b, None])
    two = _memo.spec_parts([[a, [1, 3], np.array([0, 1], np.int32), MPI.DOUBLE], b, None])
    assert one[0][0] is a and one[0][1] is b and one[0][2] is None
    assert one[1] == two[1] and hash(one[1]) == hash(two[1])    # new objects, same values
    assert one[1][1:] == (None, None)
    differ = [[a, [1, 3], np.array([0, 2]), MPI.DOUBLE],        # another displacement
              [a, [1, 3], np.array([0, 1]), MPI.FLOAT],         # another datatype
              [a, (1, 3), np.array([0, 1]), MPI.DOUBLE],        # a tuple, not a list
              [a, [1, 3], np.array([0, 1])]]                     # no datatype
    for spec in differ:
        assert _memo.spec_parts([spec, b, None])[1] != one[1], spec
    pair = MPI.DOUBLE.Create_contiguous(2)
    try:
        assert _memo.spec_parts([[a, 2, pair]]) is None          # derived: full path
    finally:
        pair.Free()
    assert _memo.spec_parts([[a, [True, 1]]]) is None            # bools are not counts
    assert _memo.spec_parts([[a, np.array([1.0, 2.0])]]) is None
    assert _memo.spec_parts([[]]) is None


# -- found in review: each failed (a hang, a TypeError, a missed error) before its fix --

@pytest.mark.mpi(min_size=2)
def test_an_error_on_one_rank_while_the_others_replay_a_request():
    """Rank 1's argument error is judged by the replaying ranks as a nonblocking call
    judges it (from the flags, no message exchange), so nobody waits for a message
    exchange the failing rank never makes.
    """
    x, y = np.full(2, RANK + 1.0), np.zeros(2 * N)
    for _ in range(2):
        mpicoll.iallgatherv(x, [y, 2]).Wait()
    bad = np.zeros(2 * N, np.float32)
    with pytest.raises(mpicoll.ArgumentError, match="rank"):
        mpicoll.iallgatherv(x, [bad if RANK == 1 else y, 2]).Wait()
    z, out = np.full(4, 1.0 + RANK), np.empty(4)
    mpicoll.iallreduce(z, out, algorithm="ring").Wait()
    np.testing.assert_array_equal(out, np.full(4, N * (N + 1) / 2))


@pytest.mark.mpi(min_size=2)
def test_a_replayed_request_that_meets_another_call_keeps_the_tags_in_step():
    """The replay takes its request tag when the call is made, as the full path does,
    also when its exchange then raises: the next nonblocking calls still pair up.
    """
    x, y = np.full(2, RANK + 1.0), np.zeros(2 * N)
    for _ in range(2):
        mpicoll.iallgatherv(x, [y, 2]).Wait()
    with pytest.raises(mpicoll.CollectiveMismatchError):
        if RANK == 1:
            mpicoll.igatherv(x, None, 0).Wait()
        else:
            mpicoll.iallgatherv(x, [y, 2]).Wait()
    z, out = np.full(4, 1.0 + RANK), np.empty(4)
    mpicoll.iallreduce(z, out, algorithm="ring").Wait()
    np.testing.assert_array_equal(out, np.full(4, N * (N + 1) / 2))


@pytest.mark.mpi
@pytest.mark.parametrize("where", ["every rank", "one rank"])
def test_unhashable_counts_are_reported_not_hashed(where):
    """A caller's tuple of counts is keyed by identity, never hashed (a list inside it
    would raise TypeError on that rank alone, before the call is agreed).
    """
    good = (1,) * N
    bad = (1,) * (N - 1) + ([1],)
    rc = bad if where == "every rank" or RANK == N - 1 else good
    with pytest.raises(mpicoll.ArgumentError, match="recvcounts"):
        mpicoll.reduce_scatter(np.ones(N), None, recvcounts=rc)
    mpicoll.barrier()


@pytest.mark.mpi(min_size=2)
def test_a_tuple_and_a_list_of_the_same_numbers_are_different_specs():
    """``[y, (c, d)]`` is counts and displacements, ``[y, [c, d]]`` two counts: the
    second call must not replay the first one's layout.
    """
    x, y = np.full(1, RANK + 1.0), np.zeros(2 * N)
    cd = (1, 2)                                  # one element each, every 2 elements
    mpicoll.allgatherv(x, [y, cd])
    want = np.zeros(2 * N)
    want[::2] = np.arange(1.0, N + 1)
    np.testing.assert_array_equal(y, want)
    with pytest.raises(mpicoll.ArgumentError, match="recvbuf counts"):
        mpicoll.allgatherv(x, [y, [1, 2] + [1] * (N - 2)])


@pytest.mark.mpi
@pytest.mark.parametrize("face", ["blocking", "nonblocking"])
def test_a_root_given_as_a_numpy_value(face):
    """Roots as 0-d arrays and as np.int64 (a new object at each call): accepted as MPI
    accepts them, and the np.int64 ones still replay (keyed by value).
    """
    x = np.full(2, float(RANK))
    y = np.full(2 * N, -1.0)
    call = mpicoll.gatherv if face == "blocking" else \
        (lambda *a: mpicoll.igatherv(*a).Wait())
    want = np.repeat(np.arange(N, dtype=float), 2)
    for root in (np.array(0), np.array(0)):
        call(x, [y, [2] * N] if RANK == 0 else None, root)
    roots = np.zeros(5, dtype=np.int64 if face == "blocking" else np.uint32)
    n = hits(lambda: [call(x, [y, [2] * N] if RANK == 0 else None, roots[i]) for i in range(5)])
    if RANK == 0:
        np.testing.assert_array_equal(y, want)
    if face == "blocking":
        assert n >= 4


@pytest.mark.mpi
def test_a_small_count_in_a_spec_does_not_keep_a_large_buffer_alive():
    """``[x, 8, MPI.DOUBLE]`` moves 64 bytes of an 8 MiB ``x``: the memo must not keep
    ``x`` (its steps would hold it) -- as it keeps no view of a large base.
    """
    pc = mpicoll.P2PComm(comm)
    alive = []
    for _ in range(4):
        x = np.full(1 << 20, 1.0)
        pc.Bcast([x, 8, MPI.DOUBLE], root=0)
        assert (x[:8] == 1.0).all()
        alive.append(weakref.ref(x))
        del x
    y = np.empty(1 << 20)
    mpicoll.allgatherv(np.ones(2), [y, [2] * N])
    np.testing.assert_array_equal(y[:2 * N], np.ones(2 * N))
    alive.append(weakref.ref(y))
    del y
    gc.collect()
    assert [r() is None for r in alive] == [True] * 5


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("warm", [False, True], ids=["full path", "replayed"])
def test_a_nonblocking_v_call_meeting_another_nonblocking_call_raises_everywhere(warm):
    """The count exchange of a nonblocking v-call is a nonblocking collective, as the
    agreement of the other nonblocking calls is: where one rank makes another nonblocking
    call, the two meet and every rank raises (a blocking exchange waited forever).
    """
    x, y = np.full(2, 1.0), np.empty(2 * N)

    def igatherv():
        mpicoll.igatherv(x, [y, [2] * N] if RANK == 0 else None, 0).Wait()
    for _ in range(2 if warm else 0):
        igatherv()
    with pytest.raises(mpicoll.CollectiveMismatchError):
        if RANK == N - 1:
            mpicoll.iallreduce(np.ones(1), np.empty(1)).Wait()
        else:
            igatherv()
    z, out = np.full(4, 1.0 + RANK), np.empty(4)
    mpicoll.iallreduce(z, out, algorithm="ring").Wait()
    np.testing.assert_array_equal(out, np.full(4, N * (N + 1) / 2))
    igatherv()
    if RANK == 0:
        np.testing.assert_array_equal(y, np.ones(2 * N))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("warm", [False, True], ids=["full path", "replayed"])
def test_a_nonblocking_v_call_made_while_an_earlier_request_needs_this_rank(warm):
    """MPI allows rank 0 to start two nonblocking calls before waiting for either while
    the others wait for the first before starting the second: rank 0's second call
    (its count exchange waits) must keep the first one's rounds going meanwhile.
    """
    a, b = np.arange(2.0 * N) + 10 * RANK, np.empty(2 * N)
    x, y = np.full(2, float(RANK)), np.empty(2 * N)
    spec = [y, [2] * N] if RANK == 0 else None
    for _ in range(3 if warm else 1):
        if RANK == 0:
            r1 = mpicoll.ialltoall(a, b)
            r2 = mpicoll.igatherv(x, spec, 0)
            r1.Wait()
            r2.Wait()
        else:
            r1 = mpicoll.ialltoall(a, b)
            r1.Wait()
            r2 = mpicoll.igatherv(x, spec, 0)
            r2.Wait()
        np.testing.assert_array_equal(b, np.concatenate(comm.alltoall(list(a.reshape(N, 2)))))
        if RANK == 0:
            np.testing.assert_array_equal(y, np.repeat(np.arange(N, dtype=float), 2))
