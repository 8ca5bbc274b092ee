"""``plot RESULTS... -o FILE.png``: time and busbw against size, one line per algorithm.

One row per (primitive, N): time (log-log) on the left, busbw in the middle
(barrier: time only) and, where the results have ``raw`` rows (the plain
mpi4py call), a third panel: each algorithm's speedup over raw (raw time /
time; above the line at 1 is faster than what a user would otherwise call).
Needs matplotlib (the ``plot`` extra).
"""
__all__ = ["add_parser", "plot_results", "plot_predictions", "plot_two_level", "need_matplotlib"]


def add_parser(sub):
    """Add the ``plot`` command to ``sub`` (the bench's subcommands)."""
    p = sub.add_parser("plot", help="PNG of time and busbw vs size per algorithm")
    p.add_argument("results", nargs="+", metavar="RESULTS.jsonl")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png")
    p.set_defaults(func=main)


def need_matplotlib():
    """Matplotlib's ``pyplot`` on the Agg backend; SystemExit where matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plot: matplotlib is not installed (pip install 'mpicoll[plot]')") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _order(label):
    """References first (raw, native, native[...], nccl), then the algorithms by name."""
    rank = 0 if label == "raw" else 1 if label == "native" else \
        2 if label.startswith("native[") else 3 if label == "nccl" else 4
    return (rank, label)


def _style(label):
    if label == "raw":                      # the plain mpi4py call: what a user would call
        return {"color": "grey", "linewidth": 2.2, "linestyle": ":", "marker": "D",
                "markersize": 3}
    if label == "native":
        return {"color": "black", "linewidth": 2.2, "linestyle": "-", "marker": "s",
                "markersize": 3}
    if label == "nccl":                     # the GPU reference, as visible as native
        return {"color": "tab:green", "linewidth": 2.2, "linestyle": "-.", "marker": "^",
                "markersize": 4}
    if label.startswith("native["):
        return {"linewidth": 1.4, "linestyle": "--", "marker": "x", "markersize": 5}
    return {"linewidth": 1.3, "marker": "o", "markersize": 3}


def _bar_color(label):
    return {"native": "black", "raw": "grey", "nccl": "tab:green"}.get(label, "C0")


def _vs_raw_panel(ax, rows, algs, title):
    """Speedup over raw (raw time / time) per algorithm; hidden without raw rows."""
    from .report import vs_raw
    if not any("raw" in cell for cell in rows.values()):
        ax.set_visible(False)
        return
    others = [a for a in algs if a != "raw"]
    if set(rows) == {0}:                     # barrier: one bar per algorithm
        cell = rows[0]
        got = [(a, vs_raw(cell, cell[a])) for a in others]
        got = [(a, x) for a, x in got if x is not None]
        if got:
            ax.bar([a for a, _ in got], [x for _, x in got],
                   color=[_bar_color(a) for a, _ in got])
        ax.tick_params(axis="x", labelsize=7)
    else:
        for alg in others:
            pts = [(max(b, 1), vs_raw(cell, cell[alg])) for b, cell in sorted(rows.items())
                   if alg in cell]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), label=alg, **_style(alg))
        ax.set(xscale="log", xlabel="size (B)")
        if ax.lines:
            ax.legend(fontsize=7, loc="upper left")
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1.2)
    ax.set(ylabel="speedup over raw (raw time / time)", title=title + ": vs raw mpi4py")
    ax.grid(True, alpha=0.3)


def plot_results(provs, results, path):
    """Plot the results to ``path``: time and busbw vs size per algorithm (see the module doc)."""
    from .report import index
    plt = need_matplotlib()
    idx = index(results)
    keys = sorted(idx, key=lambda k: (k[0], k[1], k[2], k[3] or ""))
    has_raw = any(r.get("algorithm") == "raw" for r in results)
    ncols = 3 if has_raw else 2
    fig, axes = plt.subplots(len(keys), ncols, figsize=(6.5 * ncols, 3.6 * len(keys)),
                             squeeze=False)
    for row, key in enumerate(keys):
        prim, n, dtype, op = key
        rows = idx[key]
        algs = sorted({a for cell in rows.values() for a in cell}, key=_order)
        ax_t, ax_b = axes[row][:2]
        title = f"{prim}, N={n}, {dtype}" + (f", {op}" if op else "")
        if has_raw:
            _vs_raw_panel(axes[row][2], rows, algs, title)
        if set(rows) == {0}:                 # barrier: no size axis, one bar per algorithm
            cell = rows[0]
            ax_t.bar(algs, [cell[a]["time_us"]["avg"] for a in algs],
                     yerr=[[cell[a]["time_us"]["avg"] - cell[a]["time_us"]["min"] for a in algs],
                           [cell[a]["time_us"]["max"] - cell[a]["time_us"]["avg"] for a in algs]],
                     color=[_bar_color(a) for a in algs], capsize=3)
            ax_t.set(ylabel="time (µs), avg with min-max", title=title + ": time")
            ax_t.tick_params(axis="x", labelsize=7)
            ax_b.set_visible(False)
            continue
        for alg in algs:
            pts = sorted((b, cell[alg]) for b, cell in rows.items() if alg in cell)
            xs = [max(b, 1) for b, _ in pts]
            label = alg + (" (#wrong>0)" if any(r.get("wrong") for _, r in pts) else "")
            ax_t.plot(xs, [r["time_us"]["avg"] for _, r in pts], label=label, **_style(alg))
            bus = [(x, r["busbw_GBps"]) for x, (_, r) in zip(xs, pts, strict=True)
                   if r.get("busbw_GBps")]
            if bus:
                ax_b.plot(*zip(*bus, strict=True), label=label, **_style(alg))
        ax_t.set(xscale="log", yscale="log", xlabel="size (B)", ylabel="time (µs)",
                 title=title + ": time")
        ax_b.set(xscale="log", xlabel="size (B)", ylabel="busbw (GB/s)", title=title + ": busbw")
        for ax in (ax_t, ax_b):
            ax.grid(True, alpha=0.3)
        ax_t.legend(fontsize=7, loc="upper left")
        if ax_b.lines:
            ax_b.legend(fontsize=7, loc="upper left")
        else:
            ax_b.set_visible(False)
    if provs:
        from .provenance import hosts_text, lib_line
        p = provs[0]
        fig.suptitle(f"mpicoll.bench: {lib_line(p)}; {p.get('date')}; "
                     f"hosts {hosts_text(p)}", fontsize=9, y=1 - 0.15 / (3.6 * len(keys)))
    # margins in inches (the figure grows with the rows): room for the suptitle above and
    # the x-axis labels below even with one row
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.6 / (3.6 * len(keys)),
                        top=1 - 0.6 / (3.6 * len(keys)),
                        hspace=0.5, wspace=0.18)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_predictions(out, ns, path):
    """Model time vs N per algorithm; one panel per (primitive, n); crossovers marked."""
    from .units import fmt_size
    plt = need_matplotlib()
    panels = [(p, nb, curves) for p, res in out["primitives"].items()
              for nb, curves in res.get("_curves", {}).items()]
    cols = max(1, max((len(r.get("_curves", {})) for r in out["primitives"].values()), default=1))
    rows = len(out["primitives"])
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.3 * rows), squeeze=False)
    used = set()
    prim_row = {p: i for i, p in enumerate(out["primitives"])}
    col_of = {}
    for p, nb, curves in panels:
        c = col_of[p] = col_of.get(p, -1) + 1
        ax = axes[prim_row[p]][c]
        used.add((prim_row[p], c))
        for alg, ts in curves.items():
            ax.plot(ns, [t * 1e6 for t in ts], label=alg, linewidth=1.3)
        seg = next(s for s in out["primitives"][p]["by_ranks"] if s["bytes"] == nb)
        _finish_panel(ax, seg["crossovers"], f"{p}, n = {fmt_size(nb)}")
    _drop_unused(fig, axes, used)
    m = out["model"]
    fig.suptitle(f"α-β-γ model ({m['source']}): α={m['alpha_s'] * 1e6:.3g} µs, "
                 f"β={m['beta_s_per_byte'] * 1e9:.3g} ns/B, "
                 f"γ={m['gamma_s_per_byte'] * 1e9:.3g} ns/B",
                 fontsize=9)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.6 / (3.3 * rows), top=0.95, hspace=0.45,
                        wspace=0.25)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _finish_panel(ax, marks, title):
    """A predicted-time panel's marks (dotted lines at N = x), log axes, title and legend."""
    for x in marks:
        ax.axvline(x, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"N={x}", (x, ax.get_ylim()[0]), fontsize=6, rotation=90,
                    va="bottom", ha="right")
    ax.set(xscale="log", yscale="log", xlabel="ranks N", ylabel="predicted time (µs)",
           title=title)
    ax.minorticks_off()          # log minor ticks over many decades are slow to lay out
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")


def _drop_unused(fig, axes, used):
    """Remove the grid's panels not in ``used`` ((row, column) pairs)."""
    for r, row in enumerate(axes):
        for c, ax in enumerate(row):
            if (r, c) not in used:
                fig.delaxes(ax)


def plot_two_level(out, ns, path):
    """Plot ``predict --ranks-per-node``: model time vs N.

    One row per (K, primitive), one column per n; flat algorithms thin, hierarchical thick
    black, where it overtakes marked.
    """
    from .units import fmt_size
    plt = need_matplotlib()
    panels = [(K, p, nb, curves) for K, per_k in out["two_level"].items()
              for p, res in per_k["primitives"].items()
              for nb, curves in res.get("_curves", {}).items()]
    rows = [(K, p) for K, per_k in out["two_level"].items() for p in per_k["primitives"]]
    cols = max(1, max((len(res.get("_curves", {})) for per_k in out["two_level"].values()
                       for res in per_k["primitives"].values()), default=1))
    fig, axes = plt.subplots(len(rows), cols, figsize=(4.6 * cols, 3.1 * len(rows)),
                             squeeze=False)
    used, col_of = set(), {}
    for K, p, nb, curves in panels:
        r = rows.index((K, p))
        c = col_of[(K, p)] = col_of.get((K, p), -1) + 1
        ax = axes[r][c]
        used.add((r, c))
        for alg, ts in curves.items():
            if alg == "hierarchical":
                ax.plot(ns, [t * 1e6 for t in ts], label=alg, color="black", linewidth=2.2)
            else:
                ax.plot(ns, [t * 1e6 for t in ts], label=alg, linewidth=1.0, alpha=0.8)
        entry = next(e for e in out["two_level"][K]["primitives"][p]["by_ranks"]
                     if e["bytes"] == nb)
        hv = entry.get("hierarchical_vs_flat", {})
        marks = [x for fam in ("pow2", "other") for x in hv.get(fam, {}).get("overtakes", {})]
        _finish_panel(ax, marks, f"{p}, n = {fmt_size(nb)}, {K} ranks/node")
    _drop_unused(fig, axes, used)
    m = out["model"]
    fig.suptitle(f"two-level model ({m['source']}): intra α={m['alpha_intra_s'] * 1e6:.3g} µs, "
                 f"β={m['beta_intra_s_per_byte'] * 1e9:.3g} ns/B; inter "
                 f"α={m['alpha_inter_s'] * 1e6:.3g} µs, β={m['beta_inter_s_per_byte'] * 1e9:.3g}"
                 f" ns/B; link α={m['link_alpha_s'] * 1e6:.3g} µs, "
                 f"β={m['link_beta_s_per_byte'] * 1e9:.3g} ns/B", fontsize=9)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.6 / (3.1 * len(rows)),
                        top=1 - 0.9 / (3.1 * len(rows)), hspace=0.5, wspace=0.25)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(args):
    from .results import load
    provs, results, _ = load(args.results)
    if not results:
        raise SystemExit("plot: no result records in " + ", ".join(args.results))
    plot_results(provs, results, args.output)
    print(f"# plot written to {args.output}")
    return 0
