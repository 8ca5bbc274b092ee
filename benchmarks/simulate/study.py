"""Markdown tables of a simulated study: per primitive and size, who wins, and what auto picks.

    python benchmarks/simulate/study.py RESULTS.jsonl... > tables.md

For every (primitive, N, size): the fastest hand-written algorithm, the fastest of MPICH's
(native[mpich]) and Open MPI's (native[ompi]) as SMPI runs them, the algorithm
``algorithm="auto"`` would run (the row's ``auto``) and its time over the best hand-written
one's, then every algorithm's simulated time (µs).
"""
import sys

from mpicoll.bench.results import load
from mpicoll.bench.units import fmt_size


def main(paths):
    """Print the tables of the result files ``paths``."""
    _, results, _ = load(paths)
    cells = {}
    for r in results:
        cells.setdefault((r["primitive"], r["nranks"]), {}).setdefault(r["bytes"], {})[
            r["algorithm"]] = r
    for (prim, n), by_size in sorted(cells.items()):
        algs = sorted({a for c in by_size.values() for a in c})
        print(f"\n### {prim}, N = {n}\n")
        print("| size | best mpicoll | best native | auto picks | auto / best | "
              + " | ".join(algs) + " |")
        print("|---" * (5 + len(algs)) + "|")
        for nb, cell in sorted(by_size.items()):
            hand = {a: r["time_us"]["avg"] for a, r in cell.items() if not a.startswith("native")}
            nat = {a: r["time_us"]["avg"] for a, r in cell.items() if a.startswith("native")}
            bh = min(hand, key=hand.get) if hand else None
            bn = min(nat, key=nat.get) if nat else None
            auto = next(iter(cell.values()))["auto"]
            ratio = f"{hand[auto] / hand[bh]:.2f}" if auto in hand and bh else "not simulated"
            row = [fmt_size(nb), f"{bh} {hand[bh]:.1f}" if bh else "-",
                   f"{bn} {nat[bn]:.1f}" if bn else "-", auto, ratio]
            row += [f"{cell[a]['time_us']['avg']:.1f}" if a in cell else "-" for a in algs]
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
