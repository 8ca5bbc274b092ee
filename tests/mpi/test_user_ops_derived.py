"""User-defined ops over derived datatypes on P2PComm, against MPI's own collectives, bit for bit.

MPI calls a user op's function with memory laid out as the datatype the
caller gave, a count of its entries and that datatype (MPI-4.0 section
6.9.5). Two references: the definition, computed with NumPy on each rank (the
fold of every rank's records in rank order, written field by field into
a sentinel-filled buffer), and the MPI library itself — the same call on a
plain duplicate of COMM_WORLD, whose collectives call the same op on the
same derived datatype — for Allreduce, Reduce, Scan and Exscan. Not for
Reduce_scatter(_block): MPICH 5.0.2's own Reduce_scatter_block with this
non-commutative user op on this datatype gives a wrong result at N=2 and
crashes (SIGSEGV) at N=4 (seen 2026-12-01; P2PComm matches the definition
there). The op is written for one record type only —
it reads fields at their byte offsets in the extent and asserts it was
given that datatype — so a call that handed it packed data, a partial
entry or another datatype fails.

The record: an int32 ``c`` at byte 0, a hole, int64 ``a`` and ``b`` at 8
and 16, resized to an extent of 32 (a trailing hole). The op composes
affine maps ``x -> a x + b`` in rank order (associative, not commutative;
exact in wrapping integer arithmetic, so every association the algorithms
pick gives the same bits) and sums ``c``. Receive buffers start filled
with a sentinel: holes must keep it, as MPI leaves them.
"""
import numpy as np
import pytest
from mpi4py import MPI
from refdata import keeps_rank_order, usable

import mpicoll

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
PLAIN = WORLD.Dup()
SENT = 0x5A
EXTENT = 32

pytestmark = pytest.mark.timeout(120)

RECORD = MPI.Datatype.Create_struct([1, 1, 1], [0, 8, 16], [MPI.INT32_T, MPI.INT64_T, MPI.INT64_T])
RECORD = RECORD.Create_resized(0, EXTENT).Commit()
FIELDS = np.dtype({"names": ["c", "a", "b"], "formats": ["<i4", "<i8", "<i8"],
                   "offsets": [0, 8, 16], "itemsize": EXTENT})
calls = []


def _compose(inbuf, inoutbuf, datatype):
    # Written for RECORD only, as a user's op is: MPI hands it whole entries of RECORD.
    assert datatype == RECORD, datatype
    x = np.frombuffer(inbuf, FIELDS)
    y = np.frombuffer(inoutbuf, FIELDS)
    calls.append(len(y))
    c = x["c"] + y["c"]
    with np.errstate(over="ignore"):
        a, b = x["a"] * y["a"], x["b"] * y["a"] + y["b"]
    y["c"], y["a"], y["b"] = c, a, b


COMPOSE = MPI.Op.Create(_compose, commute=False)
VEC = MPI.INT.Create_vector(3, 1, 2).Commit()                   # ints 0, 2, 4 of an extent of 5


def _vec_add(inbuf, inoutbuf, datatype):
    assert datatype == VEC, datatype
    n = len(inoutbuf) // 4
    x, y = np.frombuffer(inbuf, "i4", n), np.frombuffer(inoutbuf, "i4", n)
    for k in range(len(y) // 5 + 1):        # only the elements of the type map
        for j in (0, 2, 4):
            if 5 * k + j < len(y):
                y[5 * k + j] = y[5 * k + j] + x[5 * k + j]


VEC_ADD = MPI.Op.Create(_vec_add, commute=True)


def records(rank, count):
    """``count`` records of ``rank`` (distinct per rank and entry), holes set to 0xEE."""
    raw = np.full(count * EXTENT, 0xEE, np.uint8)
    rec = raw.view(FIELDS)
    i = np.arange(count)
    rec["c"] = rank * 100 + i
    rec["a"] = 3 + 2 * (rank + i)                 # odd: the products keep information
    rec["b"] = 7 * rank - i
    return raw


def fold(ranks, count):
    """The definition: ``count`` records composed over ``ranks`` in rank order (None if none)."""
    acc = None
    for r in ranks:
        y = records(r, count).view(FIELDS)
        if acc is not None:
            with np.errstate(over="ignore"):
                y["c"], y["a"], y["b"] = (acc["c"] + y["c"], acc["a"] * y["a"],
                                          acc["b"] * y["a"] + y["b"])
        acc = y
    return acc


def expected(recs):
    """``recs`` (records) in a sentinel-filled buffer: fields set, holes keep the sentinel."""
    out = blank(len(recs))
    view = out.view(FIELDS)[:len(recs)]
    for f in ("c", "a", "b"):
        view[f] = recs[f]
    return out


def blank(count):
    return np.full(max(count, 1) * EXTENT, SENT, np.uint8)


def same(a, b, what):
    assert np.array_equal(a, b), (what, a.view(np.uint8), b.view(np.uint8))


def algorithms_for(primitive, commutative):
    return [a for a in usable(primitive)
            if a != "native" and not a.startswith("hierarchical")
            and (commutative or keeps_rank_order(mpicoll.algorithm_info(primitive, a)))]


COUNTS = sorted({0, 1, N - 1 if N > 1 else 2, N + 2})


@pytest.mark.mpi
@pytest.mark.parametrize("count", COUNTS)
def test_allreduce_reduce_every_algorithm(count):
    for algo in algorithms_for("allreduce", False):
        pc = mpicoll.P2PComm(WORLD, allreduce=algo)
        got, want = blank(count), blank(count)
        pc.Allreduce([records(RANK, count), count, RECORD], [got, count, RECORD], COMPOSE)
        PLAIN.Allreduce([records(RANK, count), count, RECORD], [want, count, RECORD], COMPOSE)
        same(got, want, f"allreduce {algo} count={count}")
        same(got, expected(fold(range(N), count)), f"allreduce {algo} count={count} (definition)")
    for algo in algorithms_for("reduce", False):
        pc = mpicoll.P2PComm(WORLD, reduce=algo)
        for root in range(N):
            got, want = blank(count), blank(count)
            pc.Reduce([records(RANK, count), count, RECORD], [got, count, RECORD], COMPOSE, root)
            PLAIN.Reduce([records(RANK, count), count, RECORD], [want, count, RECORD], COMPOSE,
                         root)
            same(got, want, f"reduce {algo} root={root} count={count}")
            if RANK == root:
                same(got, expected(fold(range(N), count)),
                     f"reduce {algo} root={root} (definition)")


@pytest.mark.mpi
def test_in_place_and_auto():
    count = N + 1
    got, want = records(RANK, count), records(RANK, count)
    mpicoll.P2PComm(WORLD).Allreduce(MPI.IN_PLACE, [got, count, RECORD], COMPOSE)
    PLAIN.Allreduce(MPI.IN_PLACE, [want, count, RECORD], COMPOSE)
    same(got, want, "allreduce in place, auto")
    for root in range(N):
        got, want = records(RANK, count), records(RANK, count)
        send_g = MPI.IN_PLACE if RANK == root else [got, count, RECORD]
        send_w = MPI.IN_PLACE if RANK == root else [want, count, RECORD]
        mpicoll.P2PComm(WORLD).Reduce(send_g, [got, count, RECORD], COMPOSE, root)
        PLAIN.Reduce(send_w, [want, count, RECORD], COMPOSE, root)
        same(got, want, f"reduce in place root={root}")


@pytest.mark.mpi
def test_reduce_scatter_and_scans():
    counts = [(r * 2 + 1) % 3 for r in range(N)]            # zeros on some ranks
    total, first = sum(counts), sum(counts[:RANK])
    whole = fold(range(N), total)
    blocks = fold(range(N), 2 * N)
    for algo in algorithms_for("reduce_scatter", False):
        pc = mpicoll.P2PComm(WORLD, reduce_scatter=algo)
        got = blank(counts[RANK])
        pc.Reduce_scatter([records(RANK, total), total, RECORD], [got, counts[RANK], RECORD],
                          counts, COMPOSE)
        same(got, expected(whole[first:first + counts[RANK]]), f"reduce_scatter {algo}")
        got = blank(2)
        pc.Reduce_scatter_block([records(RANK, 2 * N), 2, RECORD], [got, 2, RECORD], COMPOSE)
        same(got, expected(blocks[2 * RANK:2 * RANK + 2]), f"reduce_scatter_block {algo}")
    for prim, method in (("scan", "Scan"), ("exscan", "Exscan")):
        for algo in algorithms_for(prim, False):
            pc = mpicoll.P2PComm(WORLD, **{prim: algo})
            got, want = blank(3), blank(3)
            getattr(pc, method)([records(RANK, 3), 3, RECORD], [got, 3, RECORD], COMPOSE)
            getattr(PLAIN, method)([records(RANK, 3), 3, RECORD], [want, 3, RECORD], COMPOSE)
            upto = RANK + 1 if prim == "scan" else RANK
            if upto:                                 # exscan: rank 0's result is undefined
                same(got, want, f"{prim} {algo}")
                same(got, expected(fold(range(upto), 3)), f"{prim} {algo} (definition)")


@pytest.mark.mpi
def test_commutative_op_on_a_strided_type_every_algorithm():
    """A commutative user op over a vector type: every algorithm, results only where the
    type map reaches (the op adds those ints; the gaps keep what the receive buffer had).
    """
    count = N + 1
    x = (np.arange(5 * count) + 10 * RANK).astype("i4")
    for algo in algorithms_for("allreduce", True):
        got, want = np.full(5 * count, -1, "i4"), np.full(5 * count, -1, "i4")
        mpicoll.P2PComm(WORLD, allreduce=algo).Allreduce([x, count, VEC], [got, count, VEC],
                                                         VEC_ADD)
        PLAIN.Allreduce([x, count, VEC], [want, count, VEC], VEC_ADD)
        same(got, want, f"allreduce {algo}")


@pytest.mark.mpi
def test_the_op_sees_whole_entries_of_the_datatype():
    """Each call of the user function gets whole RECORD entries (never part of one)."""
    calls.clear()
    got = blank(N + 2)
    with mpicoll.traffic() as t:
        mpicoll.P2PComm(WORLD, allreduce="ring").Allreduce(
            [records(RANK, N + 2), N + 2, RECORD], [got, N + 2, RECORD], MPI.Op.Create(
                _compose, commute=True))
    if N > 1:
        assert calls and all(k >= 1 for k in calls), calls
        assert t.calls[-1].algorithm == "ring"


@pytest.mark.mpi
def test_nonblocking_and_persistent():
    count = 3
    want = blank(count)
    PLAIN.Allreduce([records(RANK, count), count, RECORD], [want, count, RECORD], COMPOSE)
    pc = mpicoll.P2PComm(WORLD)
    got = blank(count)
    pc.Iallreduce([records(RANK, count), count, RECORD], [got, count, RECORD], COMPOSE).Wait()
    same(got, want, "Iallreduce")
    src = records(RANK, count)
    got = blank(count)
    req = pc.Allreduce_init([src, count, RECORD], [got, count, RECORD], COMPOSE)
    for _ in range(2):
        got[:] = SENT
        req.Start()
        req.Wait()
        same(got, want, "Allreduce_init")
    req.Free()


@pytest.mark.mpi
def test_native_cannot_call_the_op_on_packed_data():
    """Named 'native' refuses on every rank, before any message; 'auto' never picks it here."""
    got = blank(2)
    with pytest.raises(mpicoll.ArgumentError, match="'native' runs the MPI library's allreduce"):
        mpicoll.P2PComm(WORLD, allreduce="native").Allreduce(
            [records(RANK, 2), 2, RECORD], [got, 2, RECORD], COMPOSE)
    assert np.all(got == SENT)
