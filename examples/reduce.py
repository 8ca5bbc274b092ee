"""The seed's reduce example on mpicoll.distributed: the sum of [rank+1]*5 lands on rank 0 only.

Run: mpirun -n 3 python examples/reduce.py
"""
import numpy as np

import mpicoll.distributed as dist
from mpicoll._failfast import run_main
from _seedprint import print_ranks


def init_process():
    dist.init_process_group(backend="p2p")


def example_reduce():
    rank = dist.get_rank()
    tensor = np.array([rank + 1] * 5, dtype=np.float32)
    print_ranks(f"Before reduce on rank {rank}: {tensor}")
    dist.reduce(tensor, dst=0, op=dist.ReduceOp.SUM)
    print_ranks(f"After reduce on rank {rank}: {tensor}")


def main():
    init_process()
    example_reduce()


if __name__ == "__main__":
    run_main(main)
