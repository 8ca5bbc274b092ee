"""The watchdog's cost per call, measured in one job: small allreduces with it off and on.

    mpiexec -n N python scripts/watchdog_cost.py [--calls 2000] [--blocks 21]

The watchdog is attached (``set_timeout(COMM_WORLD, 600)``: its thread runs throughout) and
its hooks are switched off and on between blocks (``watchdog.ON``), alternating, so that
both see the same machine. Prints, per face, the median and the minimum over blocks of µs
per call (slowest rank per block) for each setting and their difference.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.core import watchdog


def main():
    """Measure and print."""
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--blocks", type=int, default=21)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    mpicoll.set_timeout(comm, 600)
    x, y = np.ones(1), np.empty(1)
    p2p = mpicoll.P2PComm(comm, allreduce="recursive_doubling")
    faces = {
        "allreduce": lambda: mpicoll.allreduce(x, y, algorithm="recursive_doubling"),
        "P2PComm.Allreduce": lambda: p2p.Allreduce(x, y),
        "iallreduce+Wait": lambda: mpicoll.iallreduce(x, y, algorithm="recursive_doubling").Wait(),
    }
    for name, fn in faces.items():
        times = {False: [], True: []}
        for _ in range(50):
            fn()
        for b in range(2 * a.blocks):
            on = bool(b % 2)
            watchdog.ON = on
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                fn()
            dt = (time.perf_counter() - t0) / a.calls * 1e6
            times[on].append(comm.allreduce(dt, op=MPI.MAX))
        watchdog.ON = True
        if comm.rank == 0:
            off, on = times[False], times[True]
            print(f"{name:20s} N={comm.size}  off: median {statistics.median(off):7.2f} min "
                  f"{min(off):7.2f}   on: median {statistics.median(on):7.2f} min {min(on):7.2f}"
                  f"   on-off: median {statistics.median(on) - statistics.median(off):+6.2f} "
                  f"min {min(on) - min(off):+6.2f} µs", flush=True)


if __name__ == "__main__":
    main()
