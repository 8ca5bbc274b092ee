"""The demo's traffic table: a call per primitive and algorithm, measured, exact plan, textbook.

Rows: every registered algorithm (or the ones ``--algorithm`` picks). Per
row, three figures must agree: the counters of the real call
(:func:`mpicoll.traffic`), the exact per-rank traffic of the plan the
algorithm records for that call (:func:`mpicoll.sched.inspect.plan_of`;
equal counters show the run did what was recorded), and the textbook
formula of :mod:`.textbook` where the algorithm has one ("—" where it has
none) -- written down apart from the code, it is the check that the
algorithm sends what its textbook says.

With ``--device gpu`` the measured calls run on device arrays (``dev`` =
``cupy.asarray``); the MPI library's reference runs on host copies of the same
data and results are compared on the host.
"""
import sys
import textwrap

import numpy as np
from mpi4py import MPI

from .. import api as C
from ..bench.specs import SPECS
from ..core.blocks import split
from ..core.registry import SEED_PRIMITIVES as TABLE_BUILTIN
from ..core.registry import lookup
from ..core.topology import layout
from ..engine.call import usable_algorithms
from ..engine.context import private_comm, traffic
from ..sched.inspect import plan_of
from ..sched.plan import NotSchedulable
from .output import CheckFailed, fmt, fmt_value, on_host, same
from .textbook import TEXTBOOK, block_primitive, check_textbook, chunks_text

#: Per-rank traffic fields, in the order each rank reports them.
FIELDS = ("sent", "sent_msgs", "recv", "recv_msgs")
#: the legend's width: the table's rows take about as much at N = 4
WIDTH = 95

__all__ = ["show_traffic"]


def _table_call(comm, prim, algo, k, dtype, root, dev=on_host):
    """Run one call of ``prim`` with ``algo`` on K elements; return (traffic records, problems)."""
    rank, n = comm.Get_rank(), comm.Get_size()
    h = ((np.arange(k) * 3 + rank) % 11).astype(dtype)      # host data: the reference's input
    x = dev(h.copy())                                       # the same data where mpicoll runs
    b = k // n
    with traffic() as t:
        if prim == "bcast":
            want = h.copy() if rank == root else np.zeros(k, dtype)
            got = dev(want.copy())
            C.bcast(got, root, algorithm=algo)
            comm.Bcast(want, root)
        elif prim == "reduce":
            got = C.reduce(x, op=MPI.SUM, root=root, algorithm=algo)
            want = np.zeros_like(h) if rank == root else None
            comm.Reduce(h, want, MPI.SUM, root)
        elif prim == "allreduce":
            got = C.allreduce(x, algorithm=algo)
            want = np.zeros_like(h)
            comm.Allreduce(h, want, MPI.SUM)
        elif prim == "gather":
            got = C.gather(x[:b], root=root, algorithm=algo)
            want = np.zeros((n, b), dtype) if rank == root else None
            comm.Gather(h[:b], want, root)
        elif prim == "allgather":
            got = C.allgather(x[:b], algorithm=algo)
            want = np.zeros((n, b), dtype)
            comm.Allgather(h[:b], want)
        elif prim == "scatter":
            got = C.scatter(x if rank == root else None, dev(np.zeros(b, dtype)), root,
                            algorithm=algo)
            want = np.zeros(b, dtype)
            comm.Scatter(h if rank == root else None, want, root)
        elif prim == "reduce_scatter":
            counts = split(k, n)
            got = C.reduce_scatter(x, recvcounts=counts, algorithm=algo)
            want = np.zeros(counts[rank], dtype)
            comm.Reduce_scatter(h, want, counts, MPI.SUM)
        elif prim == "alltoall":
            got = C.alltoall(x, algorithm=algo)
            want = np.zeros_like(h)
            comm.Alltoall(h, want)
        elif prim == "barrier":
            C.barrier(algorithm=algo)
            got = want = None
        else:
            return _spec_call(comm, prim, algo, k, dtype, root, t)
    ok = ((got is None and want is None)
          or (got is not None and want is not None and same(got, want)))
    if ok:
        return t.calls, []
    shown = [None if a is None else fmt(a) for a in (got, want)]
    return t.calls, [f"{prim}/{algo} gave {shown[0]}, native MPI {shown[1]}"]


def _spec_call(comm, prim, algo, k, dtype, root, t):
    """One call of a primitive the table has no hand-written case for (a plug-in's).

    The call is on its spec's exact data (:mod:`mpicoll.calls.spec`), checked against the
    spec's expected results.
    """
    from mpi4py import MPI

    from ..bench.specs import ArrayModule, Case
    case = Case(SPECS[prim], k * dtype.itemsize, dtype=dtype, op=MPI.SUM, opname="sum",
                root=root, comm=comm, am=ArrayModule("numpy"))
    case.prepare_check()
    case.call(algo)()
    wrong = case.wrong()
    return t.calls, ([f"{prim}/{algo}: {wrong} elements differ from the spec's results"]
                     if wrong else [])


def k_per_rank(prim, k, n):
    """The call's per-rank count for the table's K: a block for block primitives."""
    return k // n if _blocked(prim) else k


def _blocked(prim):
    """True where the table's K is N blocks (gather, ...; a plug-in's spec says)."""
    return block_primitive(prim) if prim in TABLE_BUILTIN else SPECS[prim].blocked


def plan_traffic(prim, algo, n, rank, k, itemsize, root, nodes=None):
    """This rank's (sent, sent_msgs, recv, recv_msgs) in the plan of the table's call, or None.

    ``k`` as in the table (the N-block vector for block primitives); ``nodes``: the
    communicator's layout (node-aware plans depend on it); None when the algorithm
    cannot be recorded as a plan (it then runs directly).
    """
    count = k_per_rank(prim, k, n)
    counts = split(k, n) if prim == "reduce_scatter" else None
    try:
        plan = plan_of(prim, algo, n, rank, count, itemsize=itemsize, root=root, counts=counts,
                       layout=nodes)
    except NotSchedulable:
        return None
    sm, se, rm, re_ = plan.traffic()
    return se, sm, re_, rm


def _per_rank(reports):
    """[(sent, sent_msgs, recv, recv_msgs) or None per rank] -> {field: [value per rank]}."""
    return {key: [r[i] if r else 0 for r in reports] for i, key in enumerate(FIELDS)}


def show_traffic(out, comm, prims, chosen, k, dtype, root, ring_only, dev=on_host):
    """The table: one call per primitive and algorithm, checked three ways (see the module doc).

    Collective. Raises :class:`CheckFailed` on every rank if any row disagrees.
    """
    n, rank = comm.Get_size(), comm.Get_rank()
    b = -(-k // n)
    out.heading("traffic per call: elements each rank sends, measured vs exact (plan) vs textbook")
    if all(chosen.get(p) == "native" for p in prims):
        out.say("--impl native: the MPI library's own collectives move the data; mpicoll's "
                "counters see none of it (the walkthrough's calls recorded 0 messages). "
                "Run with --impl p2p for the table.")
        return
    out.say("\n".join(textwrap.wrap(
        f"K = {k} {dtype} elements per rank's vector (gather, allgather, scatter, alltoall: "
        f"N blocks of ceil(K/N) = {b}, so K = {n * b}); N = {n}; root {root}.", WIDTH) + [
        "Per algorithm: exact: the elements each rank 0..N-1 sends in the plan the algorithm",
        "records for the call (mpicoll.sched); measured: mpicoll.traffic()'s counters of the",
        "call; msgs: the messages each rank sends. Below it, the textbook formula for even",
        "chunks ('mean': exact as the mean over the ranks; p = 2^floor(log2 N); '—': none).",
        "ok: measured == exact (elements and messages, sent and received), the textbook value",
        "where it applies, and the result == native MPI. shm rows: the elements each rank reads",
        "from its peers' memory (one copy each, no message), checked against the formula",
        "registered with the algorithm."]))
    rows, failures = [], []
    nodes = layout(private_comm(comm))
    for prim in prims:
        if ring_only.get(prim):
            names = [ring_only[prim]]
        elif prim in chosen:
            names = [chosen[prim]]
        else:
            # those that can run here (not the shm ones across nodes or on a device)
            names = [a for a in usable_algorithms(prim, comm, device=dev is not on_host)
                     if a != "native"]
        kk = n * b if _blocked(prim) else 0 if prim == "barrier" else k
        for algo in names:
            calls, problems = _table_call(comm, prim, algo, kk, dtype, root, dev)
            if len(calls) > 1:
                problems.append(f"{len(calls)} calls recorded for one {prim} call")
            rec = calls[0] if calls else None
            mine = None if rec is None else (rec.sent_elements, rec.sent_msgs,
                                             rec.recv_elements, rec.recv_msgs)
            read = None if rec is None else rec.read_elements
            # Every rank records its own plan: N plans in all, not N on rank 0.
            plan = None if algo == "native" else plan_traffic(prim, algo, n, rank, kk,
                                                               dtype.itemsize, root, nodes)
            got = comm.gather((mine, plan, problems, read), 0)
            if rank != 0:
                continue
            problems = [p for g in got for p in g[2]]
            meas = _per_rank([g[0] for g in got])
            reads = getattr(lookup(prim, algo), "reads", None)
            if algo == "native":
                claim, exact = "native: inside the MPI library, counters see 0", meas
                if any(any(v) for v in meas.values()):
                    problems.append(f"{prim}/native recorded traffic {meas}")
            elif reads is not None:
                # Data read from peers' memory, not sent: the formula registered beside the
                # algorithm against the counters (reads, and no messages).
                per = k_per_rank(prim, kk, n)
                counts = split(kk, n) if prim == "reduce_scatter" else None
                count_of, text = reads.at(kk * dtype.itemsize)
                want = [count_of(n, r, per, root, counts) for r in range(n)]
                have = [g[3] for g in got]
                if have != want:
                    problems.append(f"{prim}/{algo}: read {have} elements, formula {want}")
                if any(meas["sent_msgs"]):
                    problems.append(f"{prim}/{algo}: sent messages {meas['sent_msgs']}")
                claim = f"reads {text} from peers' memory (no messages)"
                rows.append((prim, algo, f"K={kk}", claim, "read " + " ".join(map(str, want)),
                             "read " + " ".join(map(str, have)),
                             " ".join(map(str, meas["sent_msgs"])),
                             out.bad("MISMATCH") if problems else "ok"))
                failures += problems
                continue
            elif any(g[1] is None for g in got):
                # It runs directly (it does more than ctx can record): its result is still
                # checked against native MPI, there is just no plan to compare the counters with.
                claim, exact = "— (no plan: the algorithm runs unrecorded)", None
            else:
                exact = _per_rank([g[1] for g in got])
                if exact != meas:
                    problems.append(f"{prim}/{algo}: measured {meas} != exact {exact}")
                book = TEXTBOOK.get(f"{prim}/{algo}")
                claim = "—"
                if book is not None:
                    applies, agrees = check_textbook(book, exact, n, kk, root)
                    claim = _claim(book, n, kk, root, applies)
                    if agrees is False:
                        field = "sent_msgs" if book.what == "msgs" else book.what
                        problems.append(f"{prim}/{algo}: exact {exact[field]} disagrees with the "
                                        f"textbook {book.text} = {fmt_value(book.value(n, kk))}")
            status = out.bad("MISMATCH") if problems else "ok"
            rows.append((prim, algo, f"K={kk}", claim,
                         "—" if exact is None else " ".join(map(str, exact["sent"])),
                         " ".join(map(str, meas["sent"])), " ".join(map(str, meas["sent_msgs"])),
                         status))
            failures += problems
    if rank == 0:
        _print_rows(rows)
    failures = comm.bcast(failures, 0)
    if failures:
        raise CheckFailed("; ".join(failures))


def _print_rows(rows):
    """Print the rows grouped by primitive, two lines each (the numbers, then the textbook).

    About 95 columns at N = 4: the formula's words go on a line of their own.
    """
    widths = [max(len(r[i]) for r in rows) for i in range(7)] if rows else [0] * 7
    last = None
    for prim, algo, kk, claim, exact, meas, msgs, status in rows:
        if (prim, kk) != last:
            print(f"  {prim}, {kk}")
            last = (prim, kk)
        print(f"    {algo.ljust(widths[1])}  exact {exact.ljust(widths[4])} | measured "
              f"{meas.ljust(widths[5])} | msgs {msgs.ljust(widths[6])} | {status}")
        print(f"      {claim}")
    sys.stdout.flush()


def _claim(book, n, k, root, applies):
    """The textbook column: who sends (or receives) how much, and how the formula applies."""
    subject = {"each": "each rank", "root": f"root {root}", "rank0": "rank 0",
               "total": "all ranks"}[book.who]
    verb = {"sent": "sends", "recv": "receives", "msgs": "sends"}[book.what]
    if book.who == "total":
        verb = verb[:-1]
    unit = " msgs" if book.what == "msgs" else ""
    text = f"{subject} {verb} {book.text}{unit} = {fmt_value(book.value(n, k))}"
    if applies == "mean":
        return f"{text} (mean; uneven chunks: {chunks_text(k, n)})"
    if applies != "exact":
        return f"{text} (n/a: {applies})"
    return text
