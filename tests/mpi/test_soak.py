"""The short soak: random calls (every primitive x algorithm x dtype x size x root,
user point-to-point traffic pending on the same communicator), each compared bitwise
with the native collective; no leaked request, no stray message, one private
communicator. The full run (10 000 calls at N = 4) is ``python -m mpicoll.testing.soak``;
its recorded result is benchmarks/soak.md.
"""

import pytest
from mpi4py import MPI
from refdata import on_nodes

import mpicoll
from mpicoll.testing.soak import clean, soak

world = MPI.COMM_WORLD
N, RANK = world.Get_size(), world.Get_rank()

pytestmark = pytest.mark.timeout(600)

CALLS = 300 if N <= 4 else 120


def check(summary):
    assert summary["calls"] == CALLS or summary["calls"] < CALLS
    assert summary["mismatches"] == 0, summary["first_errors"]
    assert summary["leaked_requests"] == 0
    assert summary["stray_messages_private"] == 0 and summary["stray_messages_user"] == 0
    assert summary["user_p2p_corrupted"] == 0
    assert summary["private_comms_used"] <= 1 and summary["private_comm_stable"]
    assert summary["comm_handle_probe_stable"]
    # Memory: a short run only shows gross leaks; the full run's figure is in benchmarks/soak.md.
    assert clean(summary, rss_limit=64 << 20), summary


def test_short_soak_world():
    s = soak(calls=CALLS, seed=11, max_count=4000)
    check(s)
    assert sum(s["calls_per_primitive"].values()) == CALLS
    assert set(s["calls_per_primitive"]) == set(mpicoll.PRIMITIVES)


def test_short_soak_checked_on_a_split_comm():
    """Checked mode, on a communicator that is not COMM_WORLD (odd ranks first)."""
    comm = world.Split(0, (N - RANK) % N)
    try:
        s = soak(comm, calls=CALLS // 2, seed=12, max_count=2000, check="checked")
        check(s)
        assert s["check"] == "checked"
        assert mpicoll.engine.call.get_check(comm) == mpicoll.engine.call.check_mode()   # restored
    finally:
        comm.Free()


def test_short_soak_shm():
    """The shm algorithms wherever a primitive has one, on a communicator on one node (its
    private duplicate made while MPICOLL_NODES is empty): nothing left in shared memory.
    """
    with on_nodes("", world) as comm:
        s = soak(comm, calls=CALLS // 2, seed=13, max_count=4000, prefer="shm")
        check(s)
        assert s["prefer"] == "shm" and s["calls_with_preferred"] > CALLS // 4, s
        assert s["shm_windows"][1] <= s["shm_windows"][0], s


def test_soak_detects_a_wrong_result(monkeypatch):
    """The soak's comparison is live: a corrupted algorithm is reported, not hidden."""
    from mpicoll.core.registry import _REGISTRY
    orig = _REGISTRY["allgather"]["ring"]

    def corrupt(ctx, sendbuf, recvbuf):
        orig(ctx, sendbuf, recvbuf)
        if ctx.rank == ctx.size - 1 and recvbuf.size:
            recvbuf[0] = recvbuf[-1] + 1 if recvbuf.dtype.kind != "b" else not recvbuf[0]
    corrupt.commutative_only = False
    monkeypatch.setitem(_REGISTRY["allgather"], "ring", corrupt)
    s = soak(calls=60, seed=3, max_count=50)
    hits = [e for e in s["first_errors"] if e["primitive"] == "allgather"]
    assert s["mismatches"] > 0 and hits, s
    assert all(e["algorithm"] == "ring" for e in hits)
    assert not clean(s)
