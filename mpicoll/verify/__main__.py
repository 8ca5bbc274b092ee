"""``python -m mpicoll.verify``: prove every registered algorithm at every size, symbolically.

Usage::

    python -m mpicoll.verify [--primitive P] [--algorithm A] [--min-n 1] [--max-n 1024]
                             [--seed S] [--import MODULE] [--jobs J]
    python -m mpicoll.verify --case "allreduce/ring N=5 count=7 op=sum" [--draw]
    python -m mpicoll.verify --mutations [--max-n 64]

The first form sweeps (see :mod:`mpicoll.verify.sweep`) and prints a table
of algorithm x range of N: the number of cases passed, or the smallest N that
failed; then each failing algorithm's smallest case. Exit status 1 on any
failure, and when a worker process ends without answering (the code under
test ended it); 2 on bad arguments. Progress goes to stderr: a line redrawn on
a terminal, else a plain line every 10 s.
``--case`` re-runs one case and says what it checked; ``--draw`` prints its
verified plan step by step. ``--mutations`` seeds faults into copies of
algorithms and shows each one caught (:mod:`mpicoll.verify.mutations`).
"""
import argparse
import os
import sys
import time

__all__ = ["main"]


def _positive(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return n


def _parser():
    ap = argparse.ArgumentParser(
        prog="python -m mpicoll.verify",
        description="Execute every registered algorithm's plans symbolically, on every rank "
                    "together, and check results, matching, deadlock freedom and declared costs.")
    ap.add_argument("--primitive", help="only this primitive")
    ap.add_argument("--algorithm", help="only this algorithm (and its configured variants)")
    ap.add_argument("--max-n", type=_positive, default=1024, help="largest N (default 1024)")
    ap.add_argument("--min-n", type=_positive, default=1, help="smallest N (default 1)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the sampled roots and of the fingerprints (default 0)")
    ap.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                    help="a module or .py file that registers algorithms (repeatable)")
    ap.add_argument("--jobs", type=_positive, default=os.cpu_count() or 1,
                    help="processes of the sweep (default: the CPUs; a sweep of under 50 "
                         "cases runs in one)")
    ap.add_argument("--case", help="verify one case, e.g. \"allreduce/ring N=5 count=7 op=sum\"")
    ap.add_argument("--draw", action="store_true", help="with --case: print the verified plan")
    ap.add_argument("--mutations", action="store_true",
                    help="seed faults into copies of algorithms and show each caught")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return ap


def _progress(quiet):
    """Report progress on stderr: one line redrawn on a terminal, else a line every 10 s.

    A piped or logged sweep of many minutes says where it is, and how long it has run,
    in lines a log keeps.
    """
    if quiet:
        return None
    tty = sys.stderr.isatty()
    t0 = time.perf_counter()
    last = [t0]

    def show(done, total):
        now = time.perf_counter()
        if tty:
            if done == total or done % 200 == 0:
                sys.stderr.write(f"\r{done}/{total} cases, {now - t0:.0f} s")
                if done == total:
                    sys.stderr.write("\n")
        elif done in (1, total) or now - last[0] >= 10:
            last[0] = now
            sys.stderr.write(f"verify: {done}/{total} cases, {now - t0:.0f} s\n")
        sys.stderr.flush()
    return show


def main(argv=None):
    """Run ``python -m mpicoll.verify`` with the arguments ``argv``; the exit status."""
    args = _parser().parse_args(argv)
    from ._mpicoll import PluginError, import_modules
    try:
        import_modules(args.imports)
    except PluginError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.case:
        from .show import show_case
        return show_case(args.case, seed=args.seed, draw=args.draw)
    if args.mutations:
        from .mutations import report_mutations, run_mutations
        rows = run_mutations(max_n=min(args.max_n, 64), seed=args.seed)
        return 0 if report_mutations(rows) else 1
    from .sweep import WorkerLost, algorithms, report, sweep
    if not algorithms(args.primitive, args.algorithm):
        print(f"no registered algorithm matches --primitive {args.primitive} "
              f"--algorithm {args.algorithm}", file=sys.stderr)
        return 2
    print(f"# python -m mpicoll.verify --max-n {args.max_n} --seed {args.seed}"
          + (f" --min-n {args.min_n}" if args.min_n != 1 else "")
          + (f" --primitive {args.primitive}" if args.primitive else "")
          + (f" --algorithm {args.algorithm}" if args.algorithm else "")
          + "".join(f" --import {m}" for m in args.imports))
    try:
        summary = sweep(args.primitive, args.algorithm, args.max_n, args.seed, args.jobs,
                        args.imports, _progress(args.quiet), args.min_n)
    except WorkerLost as exc:
        print(f"python -m mpicoll.verify: {exc}", file=sys.stderr)
        return 1
    ok = report(summary)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
