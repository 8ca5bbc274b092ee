"""The seed's all_reduce example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/all_reduce.py
Changed from the seed: the backend name, the device (cuda if present, else cpu), and
print -> print_ranks (_rankprint.py: the ranks' lines in rank order).
"""
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


def example_all_reduce():
    """Run the seed's all reduce and print this rank's tensors before and after."""
    tensor = torch.tensor([dist.get_rank() + 1] * 5, dtype=torch.float32).to(device)
    print_ranks(f"Before all_reduce on rank {dist.get_rank()}: {tensor}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After all_reduce on rank {dist.get_rank()}: {tensor}")


init_process()
example_all_reduce()
