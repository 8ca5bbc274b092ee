"""Where one small repeated call spends its time: cProfile of 20 000 calls on rank 0.

    mpiexec -n 2 python benchmarks/latency/profile_call.py \
        [--face local|agree|persistent|nonblocking]

8-byte float64 allreduce, recursive doubling, the functional face (``local``: check mode
local; ``agree``: the default mode), ``allreduce_init`` Start/Wait (``persistent``) or
``iallreduce(...).Wait()`` (``nonblocking``). Prints the slowest rank's µs per call
without the profiler, the raw ``comm.Allreduce`` beside it, then the profile's top
entries by internal time (the profiler's own overhead inflates small functions).
"""
import argparse
import cProfile
import pstats
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def main():
    """Profile repeated calls of one face and print the functions that cost most."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--face", default="local",
                    choices=("local", "agree", "persistent", "nonblocking"))
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD.Dup()
    mpicoll.set_check(comm, "agree" if args.face == "agree" else "local")
    x, y = np.ones(1), np.empty(1)
    algo = "recursive_doubling"
    if args.face == "persistent":
        req = mpicoll.allreduce_init(x, y, comm=comm, algorithm=algo)

        def call():
            req.Start()
            req.Wait()
    elif args.face == "nonblocking":
        def call():
            mpicoll.iallreduce(x, y, comm=comm, algorithm=algo).Wait()
    else:
        def call():
            mpicoll.allreduce(x, y, comm=comm, algorithm=algo)

    def timed(fn, n):
        for _ in range(n // 10):
            fn()
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return comm.allreduce((time.perf_counter() - t0) / n, op=MPI.MAX) * 1e6

    raw = timed(lambda: comm.Allreduce(x, y), args.calls)
    ours = timed(call, args.calls)
    prof = cProfile.Profile()
    comm.Barrier()
    prof.enable()
    for _ in range(args.calls):
        call()
    prof.disable()
    if comm.Get_rank() == 0:
        print(f"# {args.face}: {ours:.2f} us per call, raw comm.Allreduce {raw:.2f} us "
              f"({ours / raw:.2f}x); N={comm.Get_size()}; 8-byte float64 allreduce, {algo}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
