"""What a group timeout of the user's own costs a small torch call (every call then a request).

    mpiexec -n 2 python scripts/torch_timeout_cost.py [--calls 2000] [--blocks 11]

Two groups over the same ranks: one made with torch's default timeout (blocking fast path),
one with ``timeout=600 s`` (requests waited on with a deadline, the group watched); blocks of
8-byte ``dist.all_reduce`` alternate between them. Prints the median µs per call of each.
"""
import argparse
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mpicoll.torch  # noqa: F401


def main():
    """Measure and print."""
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--blocks", type=int, default=11)
    a = p.parse_args()
    dist.init_process_group(backend="mpicoll")
    ranks = list(range(dist.get_world_size()))
    groups = {"default timeout": dist.new_group(ranks),
              "timeout=600 s": dist.new_group(ranks, timeout=timedelta(seconds=600))}
    t = torch.ones(2)
    times = {k: [] for k in groups}
    for _ in range(a.blocks):
        for name, g in groups.items():
            for _ in range(100):
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
            dt = (time.perf_counter() - t0) / a.calls * 1e6
            m = torch.tensor([dt])
            dist.all_reduce(m, op=dist.ReduceOp.MAX)
            times[name].append(m.item())
    if dist.get_rank() == 0:
        for name, ts in times.items():
            print(f"{name:16s} N={len(ranks)}: median {statistics.median(ts):7.2f} µs, "
                  f"min {min(ts):7.2f} µs per dist.all_reduce (8 bytes)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
