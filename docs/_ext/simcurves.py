"""The gallery's simulated scaling curves: time per call against N, per algorithm.

Drawn at every docs build from a recorded ``python -m mpicoll.bench simulate`` sweep,
:data:`SOURCE` (every plannable algorithm of every primitive replayed by SimGrid/SMPI at
several N and sizes on one platform; its command is in the file's provenance line and in
``benchmarks/simulate.md``). An algorithm's page shows its curve beside
``native[mpich]``'s (SMPI's copy of MPICH's selection), one line per size. Nothing is
simulated at build time: the docs build needs no SimGrid.
"""
import os

__all__ = ["SOURCE", "Sweep", "load", "image_name", "draw"]

#: The recorded sweep, relative to the repository root.
SOURCE = os.path.join("benchmarks", "simulate", "scaling.jsonl")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Sweep:
    """A loaded sweep: its curves, platform and command."""

    def __init__(self, curves, platform, command):
        #: {(primitive, algorithm): {bytes: [(N, µs), ...] sorted by N}}
        self.curves = curves
        self.platform = platform
        self.command = command

    def has(self, primitive, algorithm):
        """Whether ``algorithm`` of ``primitive`` has a curve (at two N or more)."""
        return any(len(pts) > 1 for pts in self.curves.get((primitive, algorithm), {}).values())


def load(path=None):
    """The sweep at ``path`` (default :data:`SOURCE`); None when the file is not there."""
    from mpicoll.bench.results import load as load_results
    path = path or os.path.join(_ROOT, SOURCE)
    if not os.path.isfile(path):
        return None
    provs, results, _ = load_results([path])
    curves = {}
    for r in results:
        pts = curves.setdefault((r["primitive"], r["algorithm"]), {}).setdefault(r["bytes"], [])
        pts.append((r["nranks"], r["time_us"]["avg"]))
    for by_size in curves.values():
        for pts in by_size.values():
            pts.sort()
    prov = provs[0] if provs else {}
    return Sweep(curves, prov.get("platform_arg", "?"), prov.get("command", "?"))


def image_name(primitive, algorithm):
    """The curve's file beside the algorithm's page (unique over the gallery)."""
    return f"{primitive}-{algorithm}-simulated.png"


def draw(sweep, primitive, algorithm, path):
    """Draw ``algorithm``'s curves (and native[mpich]'s, dashed) into the PNG ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mpicoll.bench.units import fmt_size
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=96)
    mine = sweep.curves[(primitive, algorithm)]
    native = sweep.curves.get((primitive, "native[mpich]"), {})
    for i, nbytes in enumerate(sorted(mine)):
        color = f"C{i}"
        ns, us = zip(*mine[nbytes], strict=True)
        ax.plot(ns, us, "o-", color=color, label=f"{algorithm}, {fmt_size(nbytes)}")
        if native.get(nbytes):
            ns, us = zip(*native[nbytes], strict=True)
            ax.plot(ns, us, "--", color=color, alpha=0.6,
                    label=f"native[mpich], {fmt_size(nbytes)}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks N")
    ax.set_ylabel("simulated time per call (µs)")
    ax.set_title(f"{primitive} {algorithm}: simulated on {sweep.platform}", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
