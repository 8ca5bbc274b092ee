"""The plans the built-in algorithms record send what their structure says, rank by rank.

:mod:`plans_by_hand` lists each built-in algorithm's messages as derived by
hand from its code; the recorded plans (:func:`mpicoll.sched.inspect.plan_of`,
what the executors run and the demo's "exact" column shows) must give the
same elements and messages, sent and received, on every rank, at every N
from 1 to 9, for even and uneven counts and every root. Serial and fast.
"""
import pytest
from plans_by_hand import HAND, per_rank

from mpicoll.core.blocks import split
from mpicoll.sched.inspect import plans_of

BLOCKS = ("gather", "allgather", "scatter", "alltoall")


def plan_counts(prim, algo, n, k, root, itemsize):
    """Per-rank traffic of the recorded plans, in :func:`plans_by_hand.per_rank`'s form."""
    count = k // n if prim in BLOCKS else k
    counts = split(k, n) if prim == "reduce_scatter" else None
    out = {key: [] for key in ("sent", "recv", "sent_msgs", "recv_msgs")}
    for plan in plans_of(prim, algo, n, count, itemsize=itemsize, root=root, counts=counts):
        sm, se, rm, re_ = plan.traffic()
        for key, v in zip(("sent_msgs", "sent", "recv_msgs", "recv"), (sm, se, rm, re_),
                          strict=True):
            out[key].append(v)
    return out


@pytest.mark.parametrize("key", sorted(HAND))
def test_plan_equals_the_schedule_by_hand(key):
    prim, algo = key.split("/")
    for n in range(1, 10):
        for k in (0, 5, 12, 8 * n + 3) if prim != "barrier" else (0,):
            kk = n * -(-k // n) if prim in BLOCKS else k        # whole blocks, as the demo
            for root in sorted({0, n - 1, n // 2}):
                for itemsize in (4, 8):
                    want = per_rank(HAND[key](n, kk, root, itemsize), n)
                    got = plan_counts(prim, algo, n, kk, root, itemsize)
                    assert got == want, (key, n, kk, root, itemsize)


def test_pipeline_segments_by_bytes():
    # 64 KiB segments: the segment count depends on the item size.
    n, k = 3, (1 << 16) // 4 * 3 + 1
    for itemsize in (4, 8):
        want = per_rank(HAND["bcast/pipeline"](n, k, 0, itemsize), n)
        assert plan_counts("bcast", "pipeline", n, k, 0, itemsize) == want
