"""The seed's reduce_scatter on mpicoll.distributed: rank j gets the sum of every j-th tensor.

Run: mpirun -n 3 python -m mpicoll.run examples/reduce_scatter.py [--device gpu]
(prints [6 12], [14 56], [36 288])
"""
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks, tensor_list


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p")


def example_reduce_scatter(xp):
    """Run the seed's reduce_scatter; print each rank's tensors before and after, in rank order."""
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    input_tensor = [
        xp.array([(rank + 1) * i for i in range(1, 3)], dtype=xp.float32) ** (j + 1)
        for j in range(world_size)
    ]
    output_tensor = xp.zeros(2, dtype=xp.float32)
    print_ranks(f"Before ReduceScatter on rank {rank}: {tensor_list(input_tensor)}")
    dist.reduce_scatter(output_tensor, input_tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After ReduceScatter on rank {rank}: {host(output_tensor)}")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_reduce_scatter(xp)


if __name__ == "__main__":
    main()
