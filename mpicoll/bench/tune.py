"""``tune -o table.json``: measure, then write the table ``algorithm="auto"`` reads.

Run under MPI at each world size of interest (``--merge`` adds this size to
an existing table). For each primitive, the measured-best algorithm of every
size (SUM on float32 by default, #wrong > 0 excluded; hand-written algorithms
only unless ``--include-native``: ``auto`` is what P2PComm and the p2p backend
run, and they promise mpicoll's own algorithms; the reference columns ``raw``
(the plain mpi4py call) and ``nccl`` are neither measured nor picked: no
``algorithm=`` value runs them) becomes a range of
``nbytes`` (the size auto sees: the vector, or one rank's block for
gather/allgather/scatter/alltoall); range bounds sit at the geometric mean
of neighbouring measured sizes. Point ``MPICOLL_TUNING`` at the file, or
ship it as ``mpicoll/core/tuning/default.json``::

    {"format": "mpicoll-tuning/1", "label": "...",
     "rules": {"allreduce": {"2": [{"max_nbytes": 2896, "algorithm": "recursive_doubling"},
                                   {"max_nbytes": null, "algorithm": "ring"}]}},
     "measurements": {...}, "provenance": {"2": {...}}}
"""
import datetime
import json
import math
import os

from mpicoll.core.defaults import TABLE_FORMAT

__all__ = ["add_parser", "build_rules", "tune", "NOT_SELECTABLE"]

#: The bench's reference columns: no ``algorithm=`` value runs them, so auto never may.
NOT_SELECTABLE = ("raw", "nccl")


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def add_parser(sub, sweep_options):
    """Add the ``tune`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("tune", help="measure and write the table algorithm='auto' reads")
    sweep_options(p, b="8", e="16M", f=4.0, n=10, w=2, op=False)
    p.add_argument("-o", "--output", required=True, metavar="table.json")
    p.add_argument("--primitive", type=_csv, default=["all"],
                   help="comma list of primitives, or all (default)")
    p.add_argument("--merge", action="store_true",
                   help="keep the other world sizes already in the output file")
    p.add_argument("--include-native", action="store_true",
                   help="let auto pick native too (default: hand-written algorithms only, so "
                        "that P2PComm and the p2p backend keep running mpicoll's algorithms); "
                        "raw and nccl are neither measured nor picked (no algorithm= runs them)")
    p.add_argument("--label", default=None, help="a line saying where the table was measured")
    p.add_argument("--stat", choices=("median", "avg"), default="median",
                   help="time compared: the ranks' average of per-rank median (default; "
                        "robust on a shared machine) or of per-rank mean")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="keep the previous size's algorithm while within this fraction of "
                        "the fastest (default 0.05): noise does not split ranges")
    p.add_argument("-J", "--results", metavar="FILE", help="the measurements as JSON lines")
    p.set_defaults(func=tune, opname="sum")


def build_rules(records, *, include_native=False, stat="median", tolerance=0.05):
    """{primitive: [{"max_nbytes", "algorithm"}]} and the evidence, from result records.

    Sizes are visited in increasing order; the algorithm of the current range
    keeps the next size while it is within ``tolerance`` of that size's best,
    so measurement noise between near-equal algorithms does not split ranges.
    """
    from mpicoll import algorithms

    def t(r):
        return r["time_us"].get(stat, r["time_us"]["avg"])
    times = {}                            # (primitive, nbytes) -> {algorithm: best time}
    for r in records:
        alg = r["algorithm"]
        if r.get("wrong") or alg in NOT_SELECTABLE or alg not in algorithms(r["primitive"]):
            continue                      # wrong results, auto, native[...], raw, nccl never win
        if alg == "native" and not include_native:
            continue
        cell = times.setdefault((r["primitive"], r["call_nbytes"]), {})
        cell[alg] = min(t(r), cell.get(alg, float("inf")))
    rules, evidence = {}, {}
    for prim in sorted({k[0] for k in times}):
        pts = sorted((nb, cell) for (p, nb), cell in times.items() if p == prim)
        ranges, ev = [], []
        for i, (nb, cell) in enumerate(pts):
            best = min(cell, key=cell.get)
            cur = ranges[-1]["algorithm"] if ranges else None
            win = cur if cur in cell and cell[cur] <= cell[best] * (1 + tolerance) else best
            nxt = pts[i + 1][0] if i + 1 < len(pts) else None
            bound = None if nxt is None else int(math.sqrt(max(nb, 1) * nxt))
            if ranges and cur == win:
                ranges[-1]["max_nbytes"] = bound
            else:
                ranges.append({"max_nbytes": bound, "algorithm": win})
            ev.append({"nbytes": nb, "algorithm": win, "fastest": best,
                       stat + "_us": {a: round(x, 3) for a, x in sorted(cell.items())}})
        rules[prim], evidence[prim] = ranges, ev
    return rules, evidence


def tune(args):
    """The ``tune`` command: measure, write the table ``auto`` reads; 1 when some row was wrong."""
    from .harness import Sweep
    from .provenance import hosts_text
    from .results import Sink
    from .run import start

    prims, comm, prov = start(args)
    rank, n = comm.Get_rank(), comm.Get_size()
    sink = Sink(rank, args.results)
    sink.write(prov)
    args.algorithms, args.progress, args.memcpy = ["all"], "auto", False
    echo = (lambda s: print(s, flush=True)) if rank == 0 else (lambda s: None)
    os.environ["MPICOLL_TUNING"] = "none"     # the "auto" column must not read a stale table
    sweep = Sweep(args, comm, sink, echo=echo, raw=False)     # raw: not an algorithm= value
    wrong = sweep.run(prims)
    sink.close()
    if rank == 0:
        rules, evidence = build_rules(sweep.records, include_native=args.include_native,
                                      stat=args.stat, tolerance=args.tolerance)
        table = {"format": TABLE_FORMAT, "rules": {}, "measurements": {}, "provenance": {}}
        if args.merge and os.path.exists(args.output):
            with open(args.output) as f:
                table.update(json.load(f))
        host = hosts_text(prov)
        table["label"] = args.label or table.get("label") or (
            f"measured by mpicoll.bench tune on {host} ({prov['cpu_count']} cores, "
            f"{prov['cpu_model']}); re-tune on your own machine")
        now = datetime.datetime.now(datetime.timezone.utc)
        table["created"] = now.isoformat(timespec="seconds")
        for prim, ranges in rules.items():
            table["rules"].setdefault(prim, {})[str(n)] = ranges
            table["measurements"].setdefault(prim, {})[str(n)] = evidence[prim]
        table["provenance"][str(n)] = {k: prov[k] for k in (
            "date", "command", "hosts", "mpi_library", "mpi4py", "numpy", "cpu_model",
            "cpu_count", "loadavg_at_start", "mpi_env", "dtype", "op", "timing")}
        table["provenance"][str(n)].update(stat=args.stat, tolerance=args.tolerance,
                                           include_native=args.include_native)
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(table, f, indent=1)
        for prim, ranges in rules.items():
            text = ", ".join(f"<= {r['max_nbytes']} B: {r['algorithm']}" if r["max_nbytes"]
                             is not None else f"above: {r['algorithm']}" for r in ranges)
            echo(f"# {prim} N={n}: {text}")
        echo(f"# table written to {args.output}")
    comm.Free()
    return 1 if wrong else 0
