"""The seed's barrier example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/barrier.py
Changed from the seed: the backend name, the device (cuda if present, else cpu), and
print -> print_ranks (_rankprint.py: the ranks' lines in rank order).
"""
import time

import torch
import torch.distributed as dist

import mpicoll.torch  # noqa: F401  (registers the "mpicoll" backend)

from _rankprint import print_ranks

device = "cuda" if torch.cuda.is_available() else "cpu"


def init_process():
    """Join the "mpicoll" process group; on a GPU machine, pick this rank's GPU."""
    dist.init_process_group(backend='mpicoll')
    if device == "cuda":
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())


def example_barrier():
    """Sleep rank seconds, wait at the barrier, print how long each rank waited."""
    rank = dist.get_rank()
    t_start = time.time()
    print_ranks(f"Rank {rank} sleeps {rank} seconds.")
    time.sleep(rank)  # simulate different processing times
    dist.barrier()
    print_ranks(f"Rank {rank} after barrier time delta: {time.time()-t_start:.4f}")


init_process()
example_barrier()
