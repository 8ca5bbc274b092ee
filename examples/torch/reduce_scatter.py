"""The seed's reduce_scatter example as torch code, on the "mpicoll" backend.

Run: mpirun -n 3 python -m mpicoll.run examples/torch/reduce_scatter.py
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


def example_reduce_scatter():
    """Run the seed's reduce scatter and print this rank's tensors before and after."""
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    input_tensor = [
        torch.tensor([(rank + 1) * i for i in range(1, 3)],
                     dtype=torch.float32).to(device)**(j + 1)
        for j in range(world_size)
    ]
    output_tensor = torch.zeros(2, dtype=torch.float32).to(device)
    print_ranks(f"Before ReduceScatter on rank {rank}: {input_tensor}")
    dist.reduce_scatter(output_tensor, input_tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After ReduceScatter on rank {rank}: {output_tensor}")


init_process()
example_reduce_scatter()
