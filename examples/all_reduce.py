"""The seed's all_reduce example on mpicoll.distributed: every rank gets the sum of [rank+1]*5.

Run: mpirun -n 3 python -m mpicoll.run examples/all_reduce.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_all_reduce(xp):
    """Run the seed's all reduce and print every rank's tensors before and after, in rank order."""
    tensor = xp.array([dist.get_rank() + 1] * 5, dtype=xp.float32)
    print_ranks(f"Before all_reduce on rank {dist.get_rank()}: {host(tensor)}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After all_reduce on rank {dist.get_rank()}: {host(tensor)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_all_reduce(xp)


if __name__ == "__main__":
    main()
