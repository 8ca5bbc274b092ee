#!/usr/bin/env bash
# The exact commands behind benchmarks/ (see README.md). Run from the repository root
# with the venv active: `bash benchmarks/run.sh` (MPICH wheel; `mpiexec` on PATH).
set -euo pipefail
B="python -m mpicoll.bench"
R=benchmarks/results
mkdir -p "$R"
export MPIEXEC_TIMEOUT=3600

for N in 2 4; do
  # every primitive and algorithm, 8 B .. 64 MiB by x8 (8, 64, 512, 4K, 32K, 256K, 2M, 16M)
  mpiexec -n $N $B all -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 --algorithm all \
      -J $R/all_n$N.jsonl --csv $R/all_n$N.csv > $R/all_n$N.txt
  # allreduce 1-64 MiB by x2 for the bandwidth targets, with MPICH's own ring and recursive
  # doubling forced beside native; 20 timed calls at every size (no shrinking below 64M)
  mpiexec -n $N $B allreduce -b 1M -e 64M -f 2 -n 20 -w 5 -c 1 --large-bytes 64M --algorithm all \
      --native-algorithm ring,recursive_doubling \
      -J $R/allreduce_n$N.jsonl --csv $R/allreduce_n$N.csv > $R/allreduce_n$N.txt
done

# one call of each hand-written allreduce at 1 MiB, N = 4, as a Chrome trace
mpiexec -n 4 $B allreduce -b 1M -e 1M -n 5 -w 2 --algorithm ring,rabenseifner,recursive_doubling,reduce_bcast \
    --trace benchmarks/trace_allreduce_1M_n4.json > $R/trace_n4.txt

# cost model: alpha, beta, gamma measured here; predicted vs measured; crossovers
for N in 2 4; do
  mpiexec -n $N $B fit -b 8 -e 1M -f 32 -n 10 -w 2 -o benchmarks/model_n$N.json > $R/fit_n$N.txt
done
$B predict --model benchmarks/model_n4.json --ranks 2..10000 --bytes 8,64K,16M \
    -o benchmarks/predict.png --json benchmarks/predict.json > benchmarks/predict.txt

# reading the results
$B report $R/all_n2.jsonl $R/all_n4.jsonl $R/allreduce_n2.jsonl $R/allreduce_n4.jsonl \
    -o benchmarks/report.md
$B plot $R/all_n2.jsonl $R/allreduce_n2.jsonl -o benchmarks/n2.png
$B plot $R/all_n4.jsonl $R/allreduce_n4.jsonl -o benchmarks/n4.png

# the default table of algorithm="auto" (shipped as mpicoll/tuning/default.json)
rm -f mpicoll/tuning/default.json
for N in 2 3 4; do
  mpiexec -n $N $B tune -b 8 -e 16M -f 4 -n 10 -w 2 --merge -o mpicoll/tuning/default.json \
      --label "measured on a shared, noisy 2-core x86_64 VM (MPICH 5.0.2 wheel, N = 2, 3, 4 oversubscribed on 2 cores); re-tune on your own machine with: python -m mpicoll.bench tune -o table.json" \
      -J $R/tune_n$N.jsonl > $R/tune_n$N.txt
done
