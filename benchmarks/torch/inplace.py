"""In-place against out-of-place allreduce at 16 and 64 MiB: mpicoll's call, and dist.all_reduce.

Run: mpiexec -n N python benchmarks/torch/inplace.py [--algorithm shm] [--repeats 9]

float32 SUM. For each size: ``mpicoll.allreduce(x, y)`` (out of place),
``mpicoll.allreduce(MPI.IN_PLACE, z)`` (in place) with the same algorithm, and
``dist.all_reduce(t)`` on the "mpicoll" backend with that algorithm
(``pg_options``; torch's call is in place; ``t`` is torch's memory, the others
NumPy's). Two warm-up rounds, then ``--repeats`` rounds of the three forms in
turn (so that a drifting load hits them alike), each call started after a
barrier and timed as the slowest rank's; rank 0 prints the median (ms) of each
form and the median of the in-place / out-of-place ratios.
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import mpicoll
import mpicoll.torch


def main():
    """Time the three forms at each size; print the medians."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default="shm")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--sizes", default="16,64", help="MiB")
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    dist.init_process_group("mpicoll", pg_options=mpicoll.torch.Options(
        algorithms={"allreduce": args.algorithm}))

    def timed(fn):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        return comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

    for mib in (int(s) for s in args.sizes.split(",")):
        n = mib * (1 << 20) // 4
        x, y, z = np.ones(n, np.float32), np.empty(n, np.float32), np.ones(n, np.float32)
        t = torch.ones(n)
        forms = {
            "out-of-place": lambda x=x, y=y: mpicoll.allreduce(x, y, comm=comm,
                                                               algorithm=args.algorithm),
            "in-place": lambda z=z: mpicoll.allreduce(MPI.IN_PLACE, z, comm=comm,
                                                      algorithm=args.algorithm),
            "dist.all_reduce": lambda t=t: dist.all_reduce(t),
        }
        times = {k: [] for k in forms}
        for rep in range(2 + args.repeats):          # interleaved: drifting load hits all alike
            for k, fn in forms.items():
                dt = timed(fn)
                if rep >= 2:
                    times[k].append(dt)
            z.fill(1.0)                              # keep the in-place values small
            t.fill_(1.0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        ratio = statistics.median(a / b for a, b in zip(times["in-place"], times["out-of-place"],
                                                        strict=True))
        if comm.Get_rank() == 0:
            print(f"N={comm.Get_size()} {mib} MiB {args.algorithm} (median of {args.repeats}, "
                  f"ms): " + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
                  + f"; in-place / out-of-place (median of the ratios) {ratio:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
