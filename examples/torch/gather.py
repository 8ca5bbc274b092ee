"""The seed's gather example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/gather.py
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


def example_gather():
    """Run the seed's gather and print this rank's tensors before and after."""
    tensor = torch.tensor([dist.get_rank() + 1] * 5, dtype=torch.float32).to(device)
    if dist.get_rank() == 0:
        gather_list = [
            torch.zeros(5, dtype=torch.float32).to(device)
            for _ in range(dist.get_world_size())
        ]
    else:
        gather_list = None
    print_ranks(f"Before gather on rank {dist.get_rank()}: {tensor}")
    dist.gather(tensor, gather_list, dst=0)
    print_ranks(f"After gather on rank 0: {gather_list}" if dist.get_rank() == 0 else None)


init_process()
example_gather()
