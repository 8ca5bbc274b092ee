"""``report RESULTS... [-o report.md]``: the winner per size, its speedup over native and raw.

One Markdown table per (primitive, N, dtype, op). Speedup over native =
native time / time (> 1: faster than the MPI library's own collective; the
same ratio as busbw / native busbw). Where the results have ``raw`` rows (the
plain mpi4py call, ``comm.Allreduce(sendbuf, recvbuf, op)``, no mpicoll
layer) the table adds the raw time and "vs raw" = raw time / time for the
winner, the best hand-written algorithm and native: each speedup read against
what a user would otherwise call. ``raw`` and ``nccl`` rows (NCCL's own
collective, ``--xp cupy`` runs) may win but are never "best hand-written".
Rows with #wrong > 0 never win. When
the same point was measured in several runs, the fastest is kept. A
"Speed targets" section follows when the results cover them.
"""
import sys

from .units import fmt_size

__all__ = ["add_parser", "best_table", "targets", "render", "vs_raw"]

TARGET_BUSBW = 1.5        # best hand-written allreduce vs native busbw, 1-64 MiB, N = 2, 4
TARGET_MEMCPY = 0.40      # allreduce busbw vs memcpy bandwidth at 16 MiB, N = 2
TARGET_LATENCY = 1.5      # best hand-written time / native time, 8 B - 4 KiB, every primitive


def add_parser(sub):
    """Add the ``report`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("report", help="Markdown table: winner per size, speedup over native "
                                      "and over raw (the plain mpi4py call)")
    p.add_argument("results", nargs="+", metavar="RESULTS.jsonl")
    p.add_argument("-o", "--output", metavar="report.md", help="write here (default stdout)")
    p.add_argument("--no-targets", dest="targets", action="store_false",
                   help="leave out the speed-target section")
    p.set_defaults(func=main)


def is_native(label):
    return label == "native" or label.startswith("native[")


def is_reference(label):
    """Whether ``label`` is a reference column: never a 'hand-written' winner.

    The reference columns: native, native[...], raw, nccl, gloo, torch-mpicoll[:...].
    """
    return is_native(label) or label in ("raw", "nccl", "gloo") or \
        label.startswith("torch-mpicoll")


def index(results):
    """{(primitive, nranks, dtype, op): {bytes: {algorithm: best record}}}."""
    out = {}
    for r in results:
        if r.get("time_us", {}).get("avg") is None:
            continue
        key = (r["primitive"], r["nranks"], r["dtype"], r.get("op"))
        cell = out.setdefault(key, {}).setdefault(r["bytes"], {})
        old = cell.get(r["algorithm"])
        if old is None or r["time_us"]["avg"] < old["time_us"]["avg"]:
            cell[r["algorithm"]] = r
    return out


def _ok(r):
    return not r.get("wrong")


def best(cell, *, hand_written=False):
    cands = [r for a, r in cell.items() if _ok(r) and a != "auto"
             and not (hand_written and is_reference(a))]
    return min(cands, key=lambda r: r["time_us"]["avg"]) if cands else None


def _alg(r):
    return "-" if r is None else r["algorithm"]


def _t(r):
    return "-" if r is None else f"{r['time_us']['avg']:.2f}"


def vs_raw(cell, r):
    """Raw time / r's time in one size's cell (> 1: faster than the plain mpi4py call).

    None without a correct raw row or a time.
    """
    raw = cell.get("raw")
    if r is None or raw is None or not _ok(raw) or not r["time_us"]["avg"]:
        return None
    return raw["time_us"]["avg"] / r["time_us"]["avg"]


def _x(ratio):
    return "-" if ratio is None else f"{ratio:.2f}x"


def best_table(key, rows):
    """The Markdown table of one (primitive, N, dtype, op): winner per size; a list of lines."""
    prim, n, dtype, op = key
    title = f"### {prim}, N = {n}, {dtype}" + (f", {op}" if op else "")
    has_raw = any("raw" in cell for cell in rows.values())
    raw_head = ("| raw time (µs) | winner vs raw | hand-written vs raw | native vs raw "
                if has_raw else "")
    lines = [title, "",
             "| size | winner | time (µs) | busbw (GB/s) | speedup over native "
             "| best hand-written | its time (µs) | its speedup over native " + raw_head
             + "| #wrong |",
             "|---:|---|---:|---:|---:|---|---:|---:|" + ("---:|" * 4 if has_raw else "")
             + "---:|"]
    for nbytes in sorted(rows):
        cell = rows[nbytes]
        win, hand, nat = best(cell), best(cell, hand_written=True), cell.get("native")
        wrong = sum(r.get("wrong") or 0 for r in cell.values())
        unchecked = any(r.get("wrong") is None for r in cell.values())

        def sp(r, nat=nat):
            if r is None or nat is None or not r["time_us"]["avg"]:
                return "-"
            return f"{nat['time_us']['avg'] / r['time_us']['avg']:.2f}x"

        bus = "-" if win is None or win.get("busbw_GBps") is None else f"{win['busbw_GBps']:.3f}"
        raw_cols = ""
        if has_raw:
            raw_cols = (f"{_t(cell.get('raw'))} | {_x(vs_raw(cell, win))} | "
                        f"{_x(vs_raw(cell, hand))} | {_x(vs_raw(cell, nat))} | ")
        lines.append(f"| {fmt_size(nbytes)} | {_alg(win)} | {_t(win)} | {bus} | {sp(win)} | "
                     f"{_alg(hand)} | {_t(hand)} | {sp(hand)} | {raw_cols}"
                     f"{wrong}{' (some N/A)' if unchecked else ''} |")
    return lines


def _raw_note(ratio, what="speedup"):
    """' (1.20x raw)': the same point against the plain mpi4py call, where measured."""
    return "" if ratio is None else f" ({ratio:.2f}x raw{' time' if what == 'time' else ''})"


def targets(idx, memcpys):
    """The project's speed targets, evaluated on whatever the results cover."""
    lines, found = ["## Speed targets (recorded, never asserted)", ""], False
    for n in (2, 4):
        cells = [(k, v) for k, v in idx.items() if k[0] == "allreduce" and k[1] == n]
        for key, rows in cells:
            ratios = []
            for nbytes in sorted(b for b in rows if (1 << 20) <= b <= (64 << 20)):
                hand, nat = best(rows[nbytes], hand_written=True), rows[nbytes].get("native")
                if hand and nat:
                    ratios.append((nbytes, hand["algorithm"],
                                   nat["time_us"]["avg"] / hand["time_us"]["avg"],
                                   vs_raw(rows[nbytes], hand)))
            if ratios:
                found = True
                worst = min(r[2] for r in ratios)
                status = "met" if worst >= TARGET_BUSBW else \
                    f"missed: worst {worst:.2f}x, {100 * (1 - worst / TARGET_BUSBW):.0f}% short"
                lines.append(f"- allreduce N = {n} ({key[2]}): best hand-written busbw / native "
                             f"busbw at 1-64 MiB (target >= {TARGET_BUSBW}x): " + ", ".join(
                                 f"{fmt_size(b)} {a} {x:.2f}x" + _raw_note(y)
                                 for b, a, x, y in ratios)
                             + f" — **{status}**")
    for key, rows in idx.items():
        if key[0] != "allreduce" or key[1] != 2 or (16 << 20) not in rows:
            continue
        hand = best(rows[16 << 20], hand_written=True)
        mc = [m for m in memcpys if m["nranks"] == 2 and m["bytes"] == 16 << 20
              and (hand is None or m.get("_run") == hand.get("_run"))]
        if hand and mc and hand.get("busbw_GBps"):
            found = True
            ratio = hand["busbw_GBps"] / mc[0]["bw_GBps"]
            status = "met" if ratio >= TARGET_MEMCPY else \
                f"missed by {100 * (TARGET_MEMCPY - ratio):.0f} points"
            lines.append(f"- allreduce N = 2 at 16 MiB: {hand['algorithm']} busbw "
                         f"{hand['busbw_GBps']:.3f} GB/s = {100 * ratio:.0f}% of the memcpy "
                         f"bandwidth measured in the same run ({mc[0]['bw_GBps']:.3f} GB/s; "
                         f"target >= {100 * TARGET_MEMCPY:.0f}%) — **{status}**")
    for key in sorted(idx):
        rows = idx[key]
        ratios = []
        for nbytes in sorted(b for b in rows if b <= 4096 and (b >= 8 or key[0] == "barrier")):
            hand, nat = best(rows[nbytes], hand_written=True), rows[nbytes].get("native")
            if hand and nat:
                raw = vs_raw(rows[nbytes], hand)
                ratios.append((nbytes, hand["algorithm"],
                               hand["time_us"]["avg"] / nat["time_us"]["avg"],
                               None if raw is None else 1 / raw))
        if ratios:
            found = True
            worst = max(ratios, key=lambda r: r[2])
            status = "met" if worst[2] <= TARGET_LATENCY else \
                f"missed: {worst[2]:.2f}x native at {fmt_size(worst[0])} ({worst[1]})"
            lines.append(f"- latency {key[0]} N = {key[1]}: best hand-written / native time at "
                         f"8 B-4 KiB (target <= {TARGET_LATENCY}x): "
                         + ", ".join(f"{fmt_size(b)} {x:.2f}x" + _raw_note(y, "time")
                                     for b, _, x, y in ratios)
                         + f" — **{status}**")
    return lines if found else []


def render(provs, results, memcpys, with_targets=True):
    """The Markdown report of the results: the runs, a table per key, the speed targets."""
    idx = index(results)
    lines = ["# mpicoll.bench report", ""]
    from .provenance import hosts_text, lib_line, load_text
    for p in provs:
        lines.append(f"- run {p.get('date')}: N = {p.get('world_size')}, "
                     f"{lib_line(p)}, hosts {hosts_text(p)}, "
                     f"load at start {load_text(p)}, `{p.get('command')}`")
    lines.append("")
    lines.append("Speedup over native = native time / time (= busbw ratio); > 1 is faster "
                 "than the MPI library's own collective. Rows with #wrong > 0 never win.")
    if any(r.get("algorithm") == "raw" for r in results):
        lines.append("`raw`: the plain mpi4py call (`comm.Allreduce(sendbuf, recvbuf, op)`, "
                     "...) on the same buffers, no mpicoll layer: what a user would otherwise "
                     "call. vs raw = raw time / time; > 1 is faster than that call (native vs "
                     "raw is the cost of mpicoll's layer around the library's collective). "
                     "Like native, never the best hand-written.")
    if any(r.get("algorithm") == "nccl" for r in results):
        lines.append("`nccl`: NCCL's own collective on the same GPU buffers, a reference "
                     "like native (never the best hand-written).")
    if any(r.get("algorithm") == "gloo" for r in results):
        lines.append("`gloo`: torch.distributed's gloo backend on tensors sharing the same "
                     "buffers (allreduce: input copied into the output, then all_reduce in "
                     "place), a reference like native (never the best hand-written).")
    if any(str(r.get("algorithm", "")).startswith("torch-mpicoll") for r in results):
        lines.append("`torch-mpicoll`: the same call through torch.distributed on the "
                     "\"mpicoll\" backend (auto's algorithm, or the one after the colon), in "
                     "the bench's check mode: its difference to the plain rows is the cost of "
                     "the torch layer (never the best hand-written).")
    lines.append("")
    for key in sorted(idx, key=lambda k: (k[0], k[1], k[2], k[3] or "")):
        lines += best_table(key, idx[key]) + [""]
    if with_targets:
        lines += targets(idx, memcpys)
    return "\n".join(lines) + "\n"


def main(args):
    from .results import load
    provs, results, memcpys = load(args.results)
    if not results:
        raise SystemExit("report: no result records in " + ", ".join(args.results))
    text = render(provs, results, memcpys, args.targets)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0
