"""The vector collectives' and scans' plans, recorded for every rank without MPI.

Every hand-written algorithm must record as a plan (it talks only through
ctx), and the plans of all ranks must fit together: the messages rank i
sends rank j are, in order, the sizes rank j receives from rank i, and no
message is empty (both ends skip a zero-count block). Checked for N = 1..9,
every root, counts with zeros, gaps and out-of-order displacements — far
more layouts than the MPI matrix can afford. Serial pytest.
"""
import itertools

import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.sched.inspect import Len as A
from mpicoll.sched.inspect import call_arrays_v
from mpicoll.sched.plan import COPY, IRECV, RECV, REDUCE, SENDRECV
from mpicoll.sched.record import record

V = ("gatherv", "scatterv", "allgatherv", "alltoallv")
USER_OP = MPI.Op.Create(lambda a, b, t: None, commute=False)   # plans only: never called


def layouts(n):
    """(name, counts, displs) on n ranks."""
    uneven = [(5 * i + 3) % 7 for i in range(n)]
    some_zero = [0 if i % 2 else i + 1 for i in range(n)]
    out = []
    for name, c in (("zero", [0] * n), ("one", [1] * n), ("uneven", uneven),
                    ("some_zero", some_zero)):
        packed = [sum(c[:i]) for i in range(n)]
        gaps = [sum(c[:i]) + 2 * i + 1 for i in range(n)]
        rev = [sum(c[i + 1:]) + (n - i) for i in range(n)]
        out += [(name + "/packed", c, packed), (name + "/gaps", c, gaps),
                (name + "/reversed", c, rev)]
    return out


def args_of(prim, n, rank, counts, displs, root, in_place):
    end = max([d + c for c, d in zip(counts, displs, strict=True)] + [0])
    if prim == "gatherv":
        is_root = rank == root
        send = None if in_place and is_root else A(counts[rank])
        return (send, A(end) if is_root else None, counts, displs if is_root else None, root)
    if prim == "scatterv":
        is_root = rank == root
        recv = None if in_place and is_root else A(counts[rank])
        return (A(end) if is_root else None, recv, counts, displs if is_root else None, root)
    if prim == "allgatherv":
        return (None if in_place else A(counts[rank]), A(end), counts, displs)
    # alltoallv: rank i sends counts[(i + j) % n] to j (symmetric), at displs rotated.
    sc = [counts[(rank + j) % n] for j in range(n)]
    sd = [displs[(rank + j) % n] for j in range(n)]
    return (A(end), A(end), sc, sd, sc, sd)


def check_plans(plans, what):
    sent, got = {}, {}
    for i, plan in enumerate(plans):
        for kind, peer, size in plan.messages():
            assert size > 0, f"{what}: rank {i} has an empty {kind} with {peer}"
            key = (i, peer) if kind == "send" else (peer, i)
            (sent if kind == "send" else got).setdefault(key, []).append(size)
    assert sent == got, f"{what}: sends {sent} != receives {got}"


def algorithms(prim):
    return [a for a in mpicoll.algorithms(prim) if a != "native"]


@pytest.mark.parametrize("prim", V)
def test_v_plans_fit_together(prim):
    for n in range(1, 10):
        for (name, counts, displs), in_place in itertools.product(layouts(n), (False, True)):
            for root in (range(n) if prim in ("gatherv", "scatterv") else [0]):
                for algo in algorithms(prim):
                    fn = mpicoll.algorithm_info(prim, algo)
                    plans = [record(fn, r, n, args_of(prim, n, r, counts, displs, root, in_place),
                                    8, None) for r in range(n)]
                    check_plans(plans, f"{prim}/{algo} N={n} {name} root={root} "
                                       f"in_place={in_place}")


@pytest.mark.parametrize("prim", ["scan", "exscan"])
def test_scan_plans_fit_together(prim):
    for n in range(1, 18):
        for op in (MPI.SUM, USER_OP):
            for in_place in (False, True):
                for algo in algorithms(prim):
                    fn = mpicoll.algorithm_info(prim, algo)
                    plans = [record(fn, r, n, (None if in_place else A(5), A(5), op), 8, op)
                             for r in range(n)]
                    check_plans(plans, f"{prim}/{algo} N={n} in_place={in_place}")
                    if prim == "exscan":    # rank 0's recvbuf is left as it was
                        recvbuf = 0 if in_place else 1
                        assert recvbuf not in written(plans[0]), (algo, n, in_place)


def written(plan):
    """Buffer numbers a plan writes into."""
    out = set()
    for o in plan.ops:
        if o[0] in (RECV, IRECV, COPY):
            out.add(o[1].buf)
        elif o[0] == SENDRECV:
            out.add(o[3].buf)
        elif o[0] == REDUCE:
            out.update((o[2].buf, o[3].buf))
    return out


def test_binomial_scan_sends_fewer_messages_than_recursive_doubling():
    n = 16
    msgs = {}
    for algo in ("binomial", "recursive_doubling", "linear"):
        fn = mpicoll.algorithm_info("scan", algo)
        msgs[algo] = sum(record(fn, r, n, (A(4), A(4), MPI.SUM), 8, MPI.SUM).traffic()[0]
                         for r in range(n))
    assert msgs["linear"] == n - 1
    assert msgs["binomial"] < 2 * n <= msgs["recursive_doubling"] == n * 4


def test_call_arrays_v_records_every_algorithm():
    """The arguments plan_of will build for these primitives record on every rank."""
    for prim in V + ("scan", "exscan"):
        for n in (1, 3, 4, 7):
            for algo in algorithms(prim):
                fn = mpicoll.algorithm_info(prim, algo)
                plans = [record(fn, r, n, call_arrays_v(prim, n, r, 3, root=n - 1), 8, None)
                         for r in range(n)]
                check_plans(plans, f"{prim}/{algo} N={n}")
