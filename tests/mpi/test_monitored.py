"""monitored_barrier: a barrier with a timeout that names the ranks that did not arrive.

Missing ranks are made deterministic without timing assumptions: the late
rank enters only after the others have raised (ordered by a native barrier),
so whatever the machine's speed the verdict is the same.
"""
import datetime

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.monitored import BarrierTimeoutError, monitored_barrier

world = MPI.COMM_WORLD
N, RANK = world.Get_size(), world.Get_rank()
GENEROUS = 300.0          # seconds: a barrier everyone reaches never waits this long
SHORT = 1.0               # seconds: for barriers a rank deliberately misses (the others
                          # enter together, see together(), so this is ample on a loaded VM)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def comm():
    c = world.Dup()
    monitored_barrier(c, timeout=GENEROUS)      # sets up the private channel (see below)
    yield c
    c.Free()


def together(away):
    """Run the present ranks (all but ``away``) through a barrier of their own, so that
    they enter the timed barrier within moments of each other: only the ranks meant to
    be late are late, however slowly the others got here.
    """
    present = world.Split(MPI.UNDEFINED if RANK in away else 0)
    if present != MPI.COMM_NULL:
        present.Barrier()
        present.Free()


def local(fn):
    """This rank's outcome: None, or (message, missing ranks)."""
    try:
        fn()
        return None
    except BarrierTimeoutError as exc:
        return (str(exc), exc.missing)


def test_everyone_arrives(comm):
    for _ in range(5):
        monitored_barrier(comm, timeout=GENEROUS)
    monitored_barrier(comm, timeout=datetime.timedelta(seconds=GENEROUS), wait_all_ranks=False)
    monitored_barrier(timeout=GENEROUS)                 # default communicator: COMM_WORLD


def test_it_is_a_barrier(comm):
    """No rank leaves before the last one has entered (checked by message order, not time)."""
    for late in range(min(N, 3)):
        entered = np.zeros(1, np.int64)
        if RANK == late:
            # Announce entry to everyone, then enter.
            reqs = [world.Isend(np.array([1], np.int64), r, 77) for r in range(N) if r != RANK]
            monitored_barrier(comm, timeout=GENEROUS)
            MPI.Request.Waitall(reqs)
        else:
            monitored_barrier(comm, timeout=GENEROUS)
            # The late rank's announcement was sent before it entered: it must be here now.
            assert world.Iprobe(late, 77) or N == 1
            world.Recv(entered, late, 77)
        world.Barrier()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("late", ["last", "monitor"])
def test_missing_rank_is_named_everywhere(comm, late):
    late_rank = N - 1 if late == "last" else 0
    together([late_rank])
    if RANK == late_rank:
        world.Barrier()                                   # wait until the others gave up
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT))
    else:
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT))
        world.Barrier()
    res = world.allgather(mine)
    errors = [r for r in res if r is not None]
    assert len(errors) == N, f"every rank must raise: {res}"
    if late == "last":
        # One verdict from the monitor, the same message on every rank, late rank included.
        assert {e[0] for e in errors} == {errors[0][0]}, res
        assert all(e[1] == [N - 1] for e in errors)
        assert f"rank {N - 1} did not arrive within {SHORT:g} s" in errors[0][0]
        assert f"{N - 1} of {N} ranks arrived" in errors[0][0]
    else:
        # The others never heard from the monitor; the monitor found nobody acknowledging.
        for r, e in enumerate(errors):
            if r == 0:
                assert e[1] == list(range(1, N)), e
            else:
                assert e[1] == [0] and "rank 0 is the monitor" in e[0], e
    # No stale message disturbs later barriers, collectives or the caller's traffic.
    for _ in range(3):
        monitored_barrier(comm, timeout=GENEROUS)
    assert np.array_equal(mpicoll.allreduce(np.ones(2), comm=comm), np.full(2, float(N)))
    assert not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)


@pytest.mark.mpi(min_size=3)
def test_wait_all_ranks_false_names_first(comm):
    missing = list(range(1, N))[-2:]                      # two ranks stay away
    together(missing)
    if RANK in missing:
        world.Barrier()
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT, wait_all_ranks=False))
    else:
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT, wait_all_ranks=False))
        world.Barrier()
    res = world.allgather(mine)
    assert all(r == res[0] for r in res), res
    text, got_missing = res[0]
    assert got_missing == missing
    assert f"rank {missing[0]} (and 1 more) did not arrive" in text
    monitored_barrier(comm, timeout=GENEROUS)


@pytest.mark.mpi(min_size=2)
def test_missing_at_the_first_barrier():
    """Before the private channel exists the ranks cannot be named, but nothing hangs."""
    comm = world.Dup()
    late = N - 1
    if RANK == late:
        world.Barrier()
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT))
    else:
        mine = local(lambda: monitored_barrier(comm, timeout=SHORT))
        world.Barrier()
    res = world.allgather(mine)
    assert all(r is not None for r in res), res
    for r, (text, missing) in enumerate(res):
        if r == late:
            assert missing == [0], text        # it never heard from the monitor
        else:
            assert missing == [] and "missing ranks are unknown" in text, text
    for _ in range(2):
        monitored_barrier(comm, timeout=GENEROUS)
    comm.Free()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "10", None, True,
                                 datetime.timedelta(0)])
def test_bad_timeout(comm, bad):
    with pytest.raises(mpicoll.ArgumentError, match="timeout"):
        monitored_barrier(comm, timeout=bad)
    monitored_barrier(comm, timeout=GENEROUS)             # nothing was sent


def test_bad_comm():
    for bad in ("world", None.__class__, MPI.COMM_NULL):
        with pytest.raises(mpicoll.ArgumentError, match="comm"):
            monitored_barrier(bad, timeout=1)


def test_error_is_picklable():
    exc = BarrierTimeoutError("msg", [1, 2], 3.0)
    import pickle
    back = pickle.loads(pickle.dumps(exc))
    assert str(back) == "msg" and back.missing == [1, 2] and back.timeout == 3.0
    assert isinstance(back, TimeoutError)
