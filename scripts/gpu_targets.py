"""The GPU targets against the bench records of one ``scripts/gpu_proof.sh`` run.

    python scripts/gpu_targets.py OUT        # markdown table on stdout

Reads ``OUT/bench-allreduce-<transport>-mps_<on|off>-n<N>.jsonl`` (the proof
script's names) and, per transport, MPS state and N, takes the best
*hand-written* algorithm (not ``native``/``nccl``/``gloo``/``torch-mpicoll``/``raw``;
only checked rows with no wrong element) at each target size, with the paths that moved its
messages (the record's ``moved_by``: ipc, staged, cuda-aware, host-copy...):

- busbw >= 300 GB/s at 256 MiB and >= 100 GB/s at 16 MiB (N = 2 and 4);
- an 8-byte allreduce in <= 100 us at N = 4 with MPS on (the median time).

Then, from ``OUT/latency-<transport>-mps_<on|off>-n<N>.jsonl`` (``python -m
mpicoll.bench latency --xp cupy``), the 8-byte allreduce per face (raw,
agree, p2pcomm, local, persistent, raw_nb, nonblocking), the same goal applied to
the ``agree`` face (what a plain ``mpicoll.allreduce`` call costs).

A size the run did not reach says so; nothing is estimated.
"""
import json
import os
import re
import sys

# The faces as the bench names them; records written before a face existed show '-' there.
from mpicoll.bench.latency import FACES as _FACES

__all__ = ["TARGETS", "via", "best_rows", "table", "latency_table", "main"]

_NAME = re.compile(
    r"^bench-allreduce-(?P<transport>[a-z-]+)-mps_(?P<mps>on|off)-n(?P<n>\d+)\.jsonl$")
_LATENCY = re.compile(r"^latency-(?P<transport>[a-z-]+)-mps_(?P<mps>on|off)-n(?P<n>\d+)\.jsonl$")
_NOT_HAND_WRITTEN = ("native", "nccl", "raw", "gloo")   # and native[...], torch-mpicoll[...]

#: (label, bytes, field, goal, better): "busbw" is GB/s (higher is better), "time" is us.
TARGETS = [
    ("busbw at 256 MiB", 256 << 20, "busbw", 300.0, "higher"),
    ("busbw at 16 MiB", 16 << 20, "busbw", 100.0, "higher"),
    ("time of 8 B", 8, "time", 100.0, "lower"),
]
#: The 8-byte goal (us, N = 4 with MPS on), applied to the latency records' agree face too.
_SMALL_GOAL = next(goal for _, _, field, goal, _ in TARGETS if field == "time")


def _records(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)


def via(moved):
    """'ipc', 'ipc+staged'...: the paths that moved a row's messages.

    From its ``moved_by``, most bytes first; '' where the record does not say.
    """
    if not moved:
        return ""
    busy = [p for p, c in moved.items() if c.get("msgs")] or list(moved)
    return "+".join(sorted(busy, key=lambda p: -moved[p].get("bytes", 0)))


def best_rows(path):
    """{bytes: (algorithm, busbw GB/s, median time us, via)}: the best hand-written rows.

    One per size (``via``: what moved its messages, see :func:`via`).
    """
    best = {}
    for r in _records(path):
        algo = r.get("algorithm") or ""
        if (r.get("type") != "result" or algo.split("[")[0] in _NOT_HAND_WRITTEN
                or algo.startswith("torch-mpicoll")):
            continue
        if not r.get("checked") or r.get("wrong"):
            continue
        t = r["time_us"]
        row = (r["algorithm"], float(r["busbw_GBps"]), float(t.get("median", t["avg"])),
               via(r.get("moved_by")))
        old = best.get(r["bytes"])
        if old is None or row[1] > old[1]:
            best[r["bytes"]] = row
    return best


def _runs(out, pattern=_NAME):
    for name in sorted(os.listdir(out)):
        m = pattern.match(name)
        if m:
            yield m["transport"], m["mps"], int(m["n"]), os.path.join(out, name)


def table(out):
    """The markdown table (one line per transport x MPS x N), or a line saying why none."""
    lines = ["| transport | MPS | N | " + " | ".join(label for label, *_ in TARGETS) + " |",
             "| --- | --- | --- |" + " --- |" * len(TARGETS)]
    any_run = False
    for transport, mps, n, path in _runs(out):
        any_run = True
        best = best_rows(path)
        cells = []
        for _label, nbytes, field, goal, better in TARGETS:
            if field == "time" and not (n == 4 and mps == "on"):
                cells.append("(target: N=4, MPS on)")
                continue
            row = best.get(nbytes)
            if row is None:
                cells.append("not measured")
                continue
            algo, busbw, time_us, moved = row
            value = busbw if field == "busbw" else time_us
            met = value >= goal if better == "higher" else value <= goal
            unit = "GB/s" if field == "busbw" else "us"
            algo += f" via {moved}" if moved else ""
            cells.append(f"{value:.1f} {unit} ({algo}) {'met' if met else '**missed**'} "
                         f"(goal {'>=' if better == 'higher' else '<='} {goal:g})")
        lines.append(f"| {transport} | {mps} | {n} | " + " | ".join(cells) + " |")
    if not any_run:
        return "No allreduce bench records in this run (bench-allreduce-*.jsonl)."
    return "\n".join(lines)


def latency_table(out):
    """The per-face table of the latency records (one line per file and algorithm)."""
    lines = ["| transport | MPS | N | algorithm | " + " | ".join(f"{f} us" for f in _FACES)
             + " | agree vs goal |", "| --- | --- | --- | --- |" + " --- |" * (len(_FACES) + 1)]
    found = False
    for transport, mps, n, path in _runs(out, _LATENCY):
        for r in _records(path):
            if r.get("bytes") != 8 or "us_per_call" not in r:
                continue
            found = True
            us = r["us_per_call"]
            agree = us.get("agree")
            if agree is None:
                verdict = "not measured"
            elif n == 4 and mps == "on":
                verdict = f"{'met' if agree <= _SMALL_GOAL else '**missed**'} " \
                          f"(goal <= {_SMALL_GOAL:g})"
            else:
                verdict = "(target: N=4, MPS on)"
            cells = [f"{us[f]:.1f}" if f in us else "-" for f in _FACES]
            lines.append(f"| {transport} | {mps} | {n} | {r.get('algorithm')} | "
                         + " | ".join(cells) + f" | {verdict} |")
    if not found:
        return "No 8-byte latency records in this run (latency-*.jsonl)."
    return "\n".join(lines)


def main(argv):
    """Print the targets table of the results folder ``argv[0]``; the exit status."""
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: python scripts/gpu_targets.py OUT   (a gpu_proof.sh results folder)",
              file=sys.stderr)
        return 2
    print(table(argv[0]))
    print()
    print("8-byte allreduce per face (python -m mpicoll.bench latency --xp cupy):")
    print()
    print(latency_table(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
