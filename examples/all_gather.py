"""The seed's all_gather on mpicoll.distributed: every rank collects every rank's [rank+1]*5.

Run: mpirun -n 3 python -m mpicoll.run examples/all_gather.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks, tensor_list


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_all_gather(xp):
    """Run the seed's all gather and print every rank's tensors before and after, in rank order."""
    tensor = xp.array([dist.get_rank() + 1] * 5, dtype=xp.float32)
    gather_list = [
        xp.zeros(5, dtype=xp.float32)
        for _ in range(dist.get_world_size())
    ]
    print_ranks(f"Before all_gather on rank {dist.get_rank()}: {host(tensor)}")
    dist.all_gather(gather_list, tensor)
    print_ranks(f"After all_gather on rank {dist.get_rank()}: {tensor_list(gather_list)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_all_gather(xp)


if __name__ == "__main__":
    main()
