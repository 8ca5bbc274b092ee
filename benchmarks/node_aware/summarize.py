"""The node-aware targets' tables from a run of benchmarks/node_aware/run.sh (Markdown).

    python benchmarks/node_aware/summarize.py benchmarks/node_aware/<date>-<host>

Per layout: median time per call of hierarchical, of the best flat hand-written algorithm
(named), of native and native[smp], and the ratios; the targets are checked as they were set
(hierarchical >= 1.5x the best flat at 8 B - 64 KiB, not slower at >= 1 MiB). Then the
two-level model's median |error| per algorithm from `bench fit`'s comparison.
"""
import json
import os
import statistics
import sys

FLAT = ("recursive_doubling", "ring", "rabenseifner", "reduce_bcast")
SMALL, LARGE = 64 * 1024, 1024 * 1024


def load(path):
    """The run's provenance record and ``{bytes: {algorithm: median µs}}`` of allreduce."""
    rows, prov = {}, None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "provenance":
                prov = r
            elif r["type"] == "result" and r["primitive"] == "allreduce":
                forced = r.get("native_forced")
                name = f"native[{forced}]" if forced else r["algorithm"]
                rows.setdefault(r["bytes"], {})[name] = r["time_us"]["median"]
    return prov, rows


def size(b):
    """``b`` bytes in KiB or MiB where whole enough."""
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:g} {unit}"
    return f"{b} B"


def table(name, path):
    """Print one run's table: hierarchical against the best flat and native, per size."""
    prov, rows = load(path)
    print(f"\n### {name}\n")
    if prov:
        print(f"N = {prov['world_size']}, hosts {prov.get('hosts')}, load at start "
              f"{[round(x, 1) for x in prov.get('loadavg_at_start', [])]}; median µs per call\n")
    print("| bytes | hierarchical | best flat | flat/hier | native | native[smp] | native/hier "
          "| target |")
    print("|---:|---:|---|---:|---:|---:|---:|---|")
    verdicts = []
    for b in sorted(rows):
        t = rows[b]
        h = t.get("hierarchical")
        flat = {a: t[a] for a in FLAT if a in t}
        if h is None or not flat:
            continue
        best = min(flat, key=flat.get)
        ratio = flat[best] / h
        nat = t.get("native")
        smp = next((v for k, v in t.items() if k.startswith("native[")), None)
        if b <= SMALL:
            ok = ratio >= 1.5
            target = f"≥ 1.5×: {'met' if ok else 'missed'}"
        elif b >= LARGE:
            ok = ratio >= 1.0
            target = f"not slower: {'met' if ok else 'missed'}"
        else:
            ok, target = None, "-"
        if ok is not None:
            verdicts.append(ok)

        def fmt(v):
            return "-" if v is None else f"{v:.0f}"
        print(f"| {size(b)} | {h:.0f} | {best} {flat[best]:.0f} | {ratio:.2f}× | {fmt(nat)} | "
              f"{fmt(smp)} | {'-' if nat is None else f'{nat / h:.2f}×'} | {target} |")
    print(f"\ntargets met at {sum(verdicts)} of {len(verdicts)} sizes")


def model(path):
    """Print the model's predicted against measured times of the run."""
    with open(path) as f:
        m = json.load(f)
    rows = [r for r in m.get("comparison", []) if r.get("error") is not None]
    print("\n### two-level model (bench fit on this layout)\n")
    keys = ("alpha_intra_s", "beta_intra_s_per_byte", "alpha_inter_s", "beta_inter_s_per_byte",
            "link_alpha_s", "link_beta_s_per_byte")
    print(", ".join(f"{k} = {m[k]:.3g}" for k in keys if k in m))
    print("\n| algorithm | points | median abs error | within 25 % |")
    print("|---|---:|---:|---|")
    algos = sorted({r["algorithm"] for r in rows})
    for a in algos:
        errs = [abs(r["error"]) for r in rows if r["algorithm"] == a]
        med = statistics.median(errs)
        print(f"| {a} | {len(errs)} | {100 * med:.0f} % | {'yes' if med <= 0.25 else 'no'} |")
    if rows:
        med = statistics.median(abs(r["error"]) for r in rows)
        print(f"\nall algorithms: median |error| {100 * med:.0f} % over {len(rows)} points "
              f"(target ≤ 25 %: {'met' if med <= 0.25 else 'missed'})")


def main(out):
    """Print the tables of every run found under ``out``."""
    for name in ("4x2", "4x2-1gbit", "2x2"):
        path = os.path.join(out, f"{name}.jsonl")
        if os.path.exists(path):
            table(name, path)
    path = os.path.join(out, "model.json")
    if os.path.exists(path):
        model(path)


if __name__ == "__main__":
    main(sys.argv[1])
