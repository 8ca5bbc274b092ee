"""The seed's scatter on mpicoll.distributed: rank 0's list [[i+1]*5 for i] hands rank i its entry.

Run: mpirun -n 3 python -m mpicoll.run examples/scatter.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks, tensor_list


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_scatter(xp):
    """Run the seed's scatter and print every rank's tensors before and after, in rank order."""
    if dist.get_rank() == 0:
        scatter_list = [
            xp.array([i + 1] * 5, dtype=xp.float32)
            for i in range(dist.get_world_size())
        ]
        print(f"Rank 0: Tensor to scatter: {tensor_list(scatter_list)}", flush=True)
    else:
        scatter_list = None
    tensor = xp.zeros(5, dtype=xp.float32)
    print_ranks(f"Before scatter on rank {dist.get_rank()}: {host(tensor)}")
    dist.scatter(tensor, scatter_list, src=0)
    print_ranks(f"After scatter on rank {dist.get_rank()}: {host(tensor)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_scatter(xp)


if __name__ == "__main__":
    main()
