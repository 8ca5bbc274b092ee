"""The seed's ring allreduce: all_reduce on the ring, and the 2(N-1)K/N elements each rank sends.

Run: mpirun -n 3 python -m mpicoll.run examples/ring_allreduce.py [--device gpu]
The seed's numbers: N GPUs, a tensor of K = 5 values; each rank sends N-1
chunks in the reduce-scatter ring and N-1 in the allgather ring, about K/N
values each (chunks differ by one element when N does not divide K).
"""
import numpy as np

import mpicoll
import mpicoll.distributed as dist

from _device import setup
from _seedprint import host, print_ranks


def init_process():
    """Join the process group on mpicoll's hand-written (point-to-point) backend."""
    dist.init_process_group(backend="p2p", algorithms={"all_reduce": "ring"})


def example_ring_allreduce(xp):
    """All-reduce on the ring and print what each rank sent against 2(N-1)K/N."""
    rank, n = dist.get_rank(), dist.get_world_size()
    tensor = xp.array([rank + 1] * 5, dtype=xp.float32)
    print_ranks(f"Before ring all_reduce on rank {rank}: {host(tensor)}")
    with mpicoll.traffic() as t:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    print_ranks(f"After ring all_reduce on rank {rank}: {host(tensor)}")
    k = tensor.size
    chunks = ",".join(str(len(c)) for c in np.array_split(host(tensor), n))
    print_ranks(f"Rank {rank} sent {t.sent_elements} elements in {t.sent_msgs} messages "
                f"(2(N-1)K/N = {2 * (n - 1) * k / n:.4g} on average; chunks of {chunks} elements)")


def main(argv=None):
    """Parse the arguments (--device), join the group, run the example."""
    xp, _ = setup(argv, __doc__)
    init_process()
    example_ring_allreduce(xp)


if __name__ == "__main__":
    main()
