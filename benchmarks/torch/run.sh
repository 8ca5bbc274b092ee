#!/usr/bin/env bash
# The torch backend's records (benchmarks/torch.md): run from the repository root with the
# venv active (torch==2.13.0 installed), on a quiet machine: bash benchmarks/torch/run.sh
set -euo pipefail
D=benchmarks/torch
export MPIEXEC_TIMEOUT=1800 OMP_NUM_THREADS=1

# 1. The cost of the torch layer on one small call: the direct in-place mpicoll call,
#    the process group's method, and dist.all_reduce, beside the raw mpi4py call.
mpiexec -n 2 python -m mpicoll.bench latency --torch --bytes 8 --algorithm recursive_doubling \
    -n 2000 --repeats 7 > $D/latency_n2.txt

# 2. dist.all_reduce over "mpicoll" (auto) against "gloo", 8 B .. 64 MiB, float32.
for N in 2 4; do
  mpiexec -n $N python -m mpicoll.bench allreduce --sizes 8,1K,64K,1M,16M,64M -n 20 -w 5 \
      --algorithm raw,native,auto,torch-mpicoll,gloo -J $D/allreduce_n$N.jsonl > $D/allreduce_n$N.txt
done

# 3. DDP: steps per second of examples/torch/ddp.py, interleaved rounds of both backends.
for N in 2 4; do
  for round in 1 2 3; do
    for b in mpicoll gloo; do
      mpiexec -n $N python examples/torch/ddp.py --steps 60 --backend $b --quiet
    done
  done > $D/ddp_n$N.txt
done

# 4. In place against out of place at 16 and 64 MiB (shm), and dist.all_reduce: the tree before
#    the chunk-wise in-place change and this one alternated (BEFORE: a checkout of the commit
#    before it), then this tree with torch's huge-page allocation (THP_MEM_ALLOC_ENABLE=1).
for N in 2 4; do
  for round in 1 2; do
    for tree in ${BEFORE:?a checkout of the tree before} .; do
      echo "# N=$N round $round tree $tree $(uptime | sed 's/.*load/load/')"
      (cd $tree && PYTHONPATH=$PWD mpiexec -n $N python benchmarks/torch/inplace.py --repeats 9)
    done
  done
done > $D/inplace_before_after.txt
for N in 2 4; do
  for round in 1 2; do
    echo "# N=$N round $round THP_MEM_ALLOC_ENABLE=1 $(uptime | sed 's/.*load/load/')"
    THP_MEM_ALLOC_ENABLE=1 mpiexec -n $N python benchmarks/torch/inplace.py --repeats 9
  done
done > $D/inplace_thp.txt
