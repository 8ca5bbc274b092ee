"""The seed's reduce example on mpicoll.distributed: the sum of [rank+1]*5 lands on rank 0 only.

Run: mpirun -n 3 python -m mpicoll.run examples/reduce.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_reduce(xp):
    """Run the seed's reduce and print every rank's tensors before and after, in rank order."""
    rank = dist.get_rank()
    tensor = xp.array([rank + 1] * 5, dtype=xp.float32)
    print_ranks(f"Before reduce on rank {rank}: {host(tensor)}")
    dist.reduce(tensor, dst=0, op=dist.ReduceOp.SUM)
    print_ranks(f"After reduce on rank {rank}: {host(tensor)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_reduce(xp)


if __name__ == "__main__":
    main()
