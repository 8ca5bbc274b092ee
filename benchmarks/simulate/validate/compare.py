"""Measured against simulated, row by row: the validation table of benchmarks/simulate.md.

    python benchmarks/simulate/validate/compare.py SIMULATED.jsonl MEASURED.jsonl... \
        [--min-bytes B]

Rows are joined on (primitive, N, bytes, algorithm); the measured ``native`` row is the
simulated ``native[mpich]`` (the measured runs use MPICH; SMPI runs its copy of MPICH's
selection). The measured time is the slowest rank's mean call (``time_us.max``: a call ends
when its last rank is done, and a replay's time is when its last rank finishes; the ranks'
average would credit a bcast's root for leaving early), the simulated one the replay's time.
Error = simulated / measured - 1. Prints a Markdown table of
every joined row, then the median and worst absolute error over all rows and over the rows of
at least ``--min-bytes`` (where the shaped link, not this VM's two cores, sets the time).
"""
import argparse
import statistics

from mpicoll.bench.results import load
from mpicoll.bench.units import fmt_size, parse_size


def rows_of(paths, simulated):
    """{(primitive, N, bytes, algorithm): µs} of result files."""
    _, results, _ = load(paths)
    out = {}
    for r in results:
        alg = r["algorithm"]
        if not simulated:
            if alg == "raw" or r.get("skipped"):
                continue
            alg = "native[mpich]" if alg == "native" else alg
        out[(r["primitive"], r["nranks"], r["bytes"], alg)] = r["time_us"]["max"]
    return out


def summary(label, errors):
    """One line: how many rows, the median and the worst absolute error (and its row)."""
    if not errors:
        return f"- {label}: no rows"
    worst = max(errors, key=lambda e: abs(e[0]))
    med = statistics.median(abs(e) for e, _ in errors)
    return (f"- {label}: {len(errors)} rows, median |error| {100 * med:.0f} %, worst "
            f"{100 * worst[0]:+.0f} % ({worst[1]})")


def main():
    """Print the joined table and the error summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("simulated")
    p.add_argument("measured", nargs="+")
    p.add_argument("--min-bytes", default="64K", help="the network-bound rows start here")
    args = p.parse_args()
    meas, sim = rows_of(args.measured, False), rows_of([args.simulated], True)
    floor = parse_size(args.min_bytes)
    print("| primitive | N | size | algorithm | measured (µs) | simulated (µs) | error |")
    print("|---|---|---|---|---|---|---|")
    errors, big = [], []
    for key in sorted(set(meas) & set(sim)):
        prim, n, nbytes, alg = key
        err = sim[key] / meas[key] - 1
        where = f"{prim} {alg} N={n} {fmt_size(nbytes)}"
        errors.append((err, where))
        if nbytes >= floor:
            big.append((err, where))
        print(f"| {prim} | {n} | {fmt_size(nbytes)} | {alg} | {meas[key]:.1f} | "
              f"{sim[key]:.1f} | {100 * err:+.0f} % |")
    print()
    print(summary("every joined row", errors))
    print(summary(f"rows of {args.min_bytes} and more", big))
    only = sorted({k[3] for k in meas} - {k[3] for k in sim})
    if only:
        print(f"- measured only (no plan to replay): {', '.join(only)}")


if __name__ == "__main__":
    main()
