#!/usr/bin/env bash
# The commands behind benchmarks/shm.md: run from the repository root with the venv
# active, on a quiet machine: bash benchmarks/shm/run.sh > benchmarks/shm/results.txt
set -euo pipefail
S="python benchmarks/shm/interleaved.py"
export MPIEXEC_TIMEOUT=1800
python -m mpicoll.shm
for N in 2 4; do
  mpiexec -n $N $S --bytes 16M --rounds 5 --iters 3                          # allreduce 16 MiB
done
for P in bcast allgather reduce_scatter_block alltoall; do
  mpiexec -n 2 $S --primitive $P --bytes 4M --rounds 5 --iters 5
done
for N in 2 4; do
  for B in 8 1K 16K 64K 256K 1M 4M; do
    mpiexec -n $N $S --bytes $B --rounds 5 --iters 20 --no-symmetric
  done
done
# hierarchical with shm inside the nodes against flat, 2 simulated nodes x 2 ranks
for B in 8 1K 16K 64K; do
  MPICOLL_NODES=2 mpiexec -n 4 $S --bytes $B --rounds 5 --iters 50 --no-symmetric \
      --variants recursive_doubling,ring,hierarchical,hierarchical:intra=shm
done
