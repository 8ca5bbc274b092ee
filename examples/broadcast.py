"""The seed's broadcast on mpicoll.distributed: rank 0's [1, 2, 3, 4, 5] reaches every rank.

Run: mpirun -n 3 python -m mpicoll.run examples/broadcast.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")     # the seed's 'nccl' maps here too


def example_broadcast(xp):
    """Run the seed's broadcast and print every rank's tensors before and after, in rank order."""
    if dist.get_rank() == 0:
        tensor = xp.array([1, 2, 3, 4, 5], dtype=xp.float32)
    else:
        tensor = xp.zeros(5, dtype=xp.float32)
    print_ranks(f"Before broadcast on rank {dist.get_rank()}: {host(tensor)}")
    dist.broadcast(tensor, src=0)
    print_ranks(f"After broadcast on rank {dist.get_rank()}: {host(tensor)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_broadcast(xp)


if __name__ == "__main__":
    main()
