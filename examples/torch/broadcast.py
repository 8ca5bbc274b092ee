"""The seed's broadcast example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/broadcast.py
Changed from the seed: the backend name, the device (cuda if present, else cpu),
print -> print_ranks (_rankprint.py: the ranks' lines in rank order), and the
seed's typo example_broadcats() -> example_broadcast().
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


def example_broadcast():
    """Run the seed's broadcast and print this rank's tensors before and after."""
    if dist.get_rank() == 0:
        tensor = torch.tensor([1, 2, 3, 4, 5], dtype=torch.float32).to(device)
    else:
        tensor = torch.zeros(5, dtype=torch.float32).to(device)
    print_ranks(f"Before broadcast on rank {dist.get_rank()}: {tensor}")
    dist.broadcast(tensor, src=0)
    print_ranks(f"After broadcast on rank {dist.get_rank()}: {tensor}")


init_process()
example_broadcast()
