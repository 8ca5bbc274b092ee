"""Per-call time of an 8-byte blocking allreduce, raw mpi4py vs mpicoll (agree and local modes).

Runs unchanged on mpicoll before and after the schedules change (it uses only
the functional API and set_check), so the two can be compared on one machine:

    mpiexec -n N python benchmarks/nonblocking/blocking_latency.py [ITERS] [REPEATS]

Median over REPEATS blocks of ITERS calls, each block timed between barriers,
the slowest rank's time per call; µs.
"""
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import mpicoll

comm = MPI.COMM_WORLD
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
x, y = np.ones(1), np.empty(1)


def timed(fn):
    """The median over batches of ``fn``'s time per call, in µs (after 100 warm-up calls)."""
    for _ in range(100):
        fn()
    blocks = []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        blocks.append(comm.allreduce((time.perf_counter() - t0) / iters, op=MPI.MAX))
    return statistics.median(blocks) * 1e6


raw = timed(lambda: comm.Allreduce(x, y))
rows = []
for algo in [a for a in mpicoll.algorithms("allreduce") if a != "native"]:
    mpicoll.set_check(comm, "agree")
    agree = timed(lambda algo=algo: mpicoll.allreduce(x, y, algorithm=algo))
    mpicoll.set_check(comm, "local")
    local = timed(lambda algo=algo: mpicoll.allreduce(x, y, algorithm=algo))
    mpicoll.set_check(comm, None)
    rows.append((algo, agree, local))
if comm.rank == 0:
    print(f"# N={comm.size} mpicoll {mpicoll.__file__} raw comm.Allreduce {raw:.2f} us")
    for algo, agree, local in rows:
        print(f"{algo:<20} agree {agree:8.2f} us ({agree / raw:5.2f}x raw)   "
              f"local {local:8.2f} us ({local / raw:5.2f}x raw)")
