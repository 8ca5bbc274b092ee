"""The per-call cost of the check modes: small collectives in local, agree and checked mode.

::

    mpiexec -n 2 python -m mpicoll.bench.checkmodes --rounds 41 --iters 300

Prints, for each call, the slowest rank's time per call in each mode (min and
median over rounds that interleave the modes), and the agreement step alone.
Recorded results: ``benchmarks/checked_mode.md``.
"""
import argparse
import os
import time

import numpy as np
from mpi4py import MPI

from ..engine.call import set_check
from ..engine.context import private_comm

__all__ = ["check_cost", "main"]


def check_cost(comm=None, rounds=7, iters=2000):
    """Per-call latency of small collectives in each check mode (rank-max, median of rounds).

    Modes: ``local`` (no agreement step), ``agree-1int`` (local plus the one-int
    Allreduce the agreement step used before checked mode existed, emulated),
    ``agree`` and ``checked``. Rounds interleave the modes so that load from
    other processes affects all of them alike. Returns {call: {mode: seconds}}.
    """
    import mpicoll

    comm = MPI.COMM_WORLD if comm is None else comm
    comm = comm.Dup()
    pcomm = private_comm(comm)
    x = np.ones(1)
    flag = np.zeros(1, dtype=np.intc)
    calls = {
        "allreduce 8 B, recursive_doubling": lambda: mpicoll.allreduce(
            x, comm=comm, algorithm="recursive_doubling"),
        "allreduce 8 B, native": lambda: mpicoll.allreduce(x, comm=comm, algorithm="native"),
        "bcast 8 B, binomial": lambda: mpicoll.bcast(x, 0, comm=comm, algorithm="binomial"),
        "barrier, dissemination": lambda: mpicoll.barrier(comm=comm, algorithm="dissemination"),
    }
    modes = ("local", "agree-1int", "agree", "checked")
    times = {c: {m: [] for m in modes} for c in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            for mode in modes:
                set_check(comm, "local" if mode == "agree-1int" else mode)
                if mode == "agree-1int":
                    def f(fn=fn):
                        pcomm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX)
                        fn()
                else:
                    f = fn
                for _ in range(max(1, iters // 10)):
                    f()
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    f()
                dt = (time.perf_counter() - t0) / iters
                times[name][mode].append(comm.allreduce(dt, op=MPI.MAX))
    # The agreement step alone, on the private communicator: before (one-int Allreduce)
    # and now (Allgather of the 128-byte fingerprint).
    mine = bytes(128)
    raw = bytearray(128 * comm.Get_size())
    bare = {"old: Allreduce of 1 int": lambda: pcomm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX),
            "new: Allgather of 128 B": lambda: pcomm.Allgather([mine, MPI.BYTE], [raw, MPI.BYTE])}
    for name in bare:
        times[name] = {"local": []}
    for _ in range(rounds):
        for name, fn in bare.items():
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            dt = (time.perf_counter() - t0) / iters
            times[name]["local"].append(comm.allreduce(dt, op=MPI.MAX))
    comm.Free()
    return {c: {m: (float(np.min(v)), float(np.median(v))) for m, v in ms.items()}
            for c, ms in times.items()}


def main(argv=None):
    """``python -m mpicoll.bench.checkmodes`` on ``argv``; the exit status."""
    ap = argparse.ArgumentParser(prog="python -m mpicoll.bench.checkmodes",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--iters", type=int, default=2000, help="calls per round (default 2000)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be >= 1")
    res = check_cost(rounds=args.rounds, iters=args.iters)
    if MPI.COMM_WORLD.Get_rank() == 0:
        size = MPI.COMM_WORLD.Get_size()
        print(f"N={size}: microseconds per call, slowest rank; min (median) of {args.rounds} "
              f"rounds x {args.iters} calls; load average {os.getloadavg()[0]:.1f}")
        print("| call | local | agree, old (1-int allreduce) | agree | checked "
              "| agree - local | checked - agree |")
        print("|---|---|---|---|---|---|---|")
        for c, m in res.items():
            if len(m) == 1:
                continue
            lo = {k: v[0] * 1e6 for k, v in m.items()}
            md = {k: v[1] * 1e6 for k, v in m.items()}
            cells = [f"{lo[k]:.1f} ({md[k]:.0f})"
                     for k in ("local", "agree-1int", "agree", "checked")]
            print(f"| {c} | " + " | ".join(cells) +
                  f" | {lo['agree'] - lo['local']:+.1f} | {lo['checked'] - lo['agree']:+.1f} |",
                  flush=True)
        print()
        print("| agreement step alone | min (median) |")
        print("|---|---|")
        for c, m in res.items():
            if len(m) == 1:
                print(f"| {c} | {m['local'][0] * 1e6:.1f} ({m['local'][1] * 1e6:.0f}) |")
    return 0


if __name__ == "__main__":
    from ..core.failfast import run_main
    run_main(main)
