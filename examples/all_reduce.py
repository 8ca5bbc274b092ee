"""The seed's all_reduce example on mpicoll.distributed: every rank gets the sum of [rank+1]*5.

Run: mpirun -n 3 python -m mpicoll.run examples/all_reduce.py [--device gpu]
"""
import mpicoll.distributed as dist
from _device import setup
from _seedprint import host, print_ranks


def init_process():
    dist.init_process_group(backend="p2p")


def example_all_reduce(xp):
    tensor = xp.array([dist.get_rank() + 1] * 5, dtype=xp.float32)
    print_ranks(f"Before all_reduce on rank {dist.get_rank()}: {host(tensor)}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After all_reduce on rank {dist.get_rank()}: {host(tensor)}")


def main(argv=None):
    xp, _ = setup(argv, __doc__)
    init_process()
    example_all_reduce(xp)


if __name__ == "__main__":
    main()
