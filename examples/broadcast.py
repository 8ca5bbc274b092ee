"""The seed's broadcast example on mpicoll.distributed: rank 0's [1, 2, 3, 4, 5] reaches every rank.

Run: mpirun -n 3 python examples/broadcast.py
"""
import numpy as np

import mpicoll.distributed as dist
from mpicoll._failfast import run_main
from _seedprint import print_ranks


def init_process():
    dist.init_process_group(backend="p2p")     # the seed's 'nccl' maps here too


def example_broadcast():
    if dist.get_rank() == 0:
        tensor = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    else:
        tensor = np.zeros(5, dtype=np.float32)
    print_ranks(f"Before broadcast on rank {dist.get_rank()}: {tensor}")
    dist.broadcast(tensor, src=0)
    print_ranks(f"After broadcast on rank {dist.get_rank()}: {tensor}")


def main():
    init_process()
    example_broadcast()


if __name__ == "__main__":
    run_main(main)
