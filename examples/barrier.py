"""The seed's barrier example on mpicoll.distributed: rank r sleeps r seconds, then all wait for the slowest.

Run: mpirun -n 3 python examples/barrier.py [SLEEP_SCALE]
SLEEP_SCALE (default 1, the seed's) multiplies every rank's sleep.
"""
import sys
import time

import mpicoll.distributed as dist
from mpicoll._failfast import run_main
from _seedprint import print_ranks


def init_process():
    dist.init_process_group(backend="p2p")


def example_barrier(scale=1.0):
    rank = dist.get_rank()
    t_start = time.time()
    print_ranks(f"Rank {rank} sleeps {rank * scale:g} seconds.")
    time.sleep(rank * scale)  # simulate different processing times
    dist.barrier()
    print_ranks(f"Rank {rank} after barrier time delta: {time.time()-t_start:.4f}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    init_process()
    example_barrier(float(argv[0]) if argv else 1.0)


if __name__ == "__main__":
    run_main(main)
