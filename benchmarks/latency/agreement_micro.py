"""The agreement step's collective alone: mpi4py's Allgather against Iallgather().Wait().

Each rank gives one 128-byte fingerprint (benchmarks/latency.md).

    mpiexec -n 2 python benchmarks/latency/agreement_micro.py

µs per call, rank 0's, mean of 20 000 calls after 500 warm-up calls; three rounds.
"""
import time

import numpy as np
from mpi4py import MPI

c = MPI.COMM_WORLD.Dup()
mine = np.zeros(16, np.int64)
every = np.zeros(16 * c.size, np.int64)


def per_call(f, n=20000):
    """``f``'s time per call in µs over ``n`` calls, after 500 warm-up calls."""
    for _ in range(500):
        f()
    c.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n * 1e6


rounds = {"Allgather": [], "Iallgather().Wait()": []}
for _ in range(3):
    rounds["Allgather"].append(per_call(
        lambda: c.Allgather([mine, MPI.BYTE], [every, MPI.BYTE])))
    rounds["Iallgather().Wait()"].append(per_call(
        lambda: c.Iallgather([mine, MPI.BYTE], [every, MPI.BYTE]).Wait()))
if c.rank == 0:
    print(f"# N={c.size}, {MPI.Get_library_version().splitlines()[0].strip()}")
    for name, times in rounds.items():
        print(f"{name:20} " + " ".join(f"{t:.2f}" for t in times))
