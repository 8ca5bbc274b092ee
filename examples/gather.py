"""The seed's gather example on mpicoll.distributed: every rank's [rank+1]*5 collected in a list on rank 0.

Run: mpirun -n 3 python examples/gather.py
"""
import numpy as np

import mpicoll.distributed as dist
from mpicoll._failfast import run_main
from _seedprint import print_ranks, tensor_list


def init_process():
    dist.init_process_group(backend="p2p")


def example_gather():
    tensor = np.array([dist.get_rank() + 1] * 5, dtype=np.float32)
    if dist.get_rank() == 0:
        gather_list = [
            np.zeros(5, dtype=np.float32)
            for _ in range(dist.get_world_size())
        ]
    else:
        gather_list = None
    print_ranks(f"Before gather on rank {dist.get_rank()}: {tensor}")
    dist.gather(tensor, gather_list, dst=0)
    if dist.get_rank() == 0:
        print(f"After gather on rank 0: {tensor_list(gather_list)}", flush=True)


def main():
    init_process()
    example_gather()


if __name__ == "__main__":
    run_main(main)
