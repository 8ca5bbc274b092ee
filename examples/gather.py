"""The seed's gather on mpicoll.distributed: every rank's [rank+1]*5 in a list on rank 0.

Run: mpirun -n 3 python -m mpicoll.run examples/gather.py [--device gpu]
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks, tensor_list


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_gather(xp):
    """Run the seed's gather and print every rank's tensors before and after, in rank order."""
    tensor = xp.array([dist.get_rank() + 1] * 5, dtype=xp.float32)
    if dist.get_rank() == 0:
        gather_list = [
            xp.zeros(5, dtype=xp.float32)
            for _ in range(dist.get_world_size())
        ]
    else:
        gather_list = None
    print_ranks(f"Before gather on rank {dist.get_rank()}: {host(tensor)}")
    dist.gather(tensor, gather_list, dst=0)
    if dist.get_rank() == 0:
        print(f"After gather on rank 0: {tensor_list(gather_list)}", flush=True)


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_gather(xp)


if __name__ == "__main__":
    main()
