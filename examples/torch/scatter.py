"""The seed's scatter example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/scatter.py
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


def example_scatter():
    """Run the seed's scatter and print this rank's tensors before and after."""
    if dist.get_rank() == 0:
        scatter_list = [
            torch.tensor([i + 1] * 5, dtype=torch.float32).to(device)
            for i in range(dist.get_world_size())
        ]
    else:
        scatter_list = None
    print_ranks(f"Rank 0: Tensor to scatter: {scatter_list}" if dist.get_rank() == 0 else None)
    tensor = torch.zeros(5, dtype=torch.float32).to(device)
    print_ranks(f"Before scatter on rank {dist.get_rank()}: {tensor}")
    dist.scatter(tensor, scatter_list, src=0)
    print_ranks(f"After scatter on rank {dist.get_rank()}: {tensor}")


init_process()
example_scatter()
