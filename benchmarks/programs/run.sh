#!/usr/bin/env bash
# Issue 34's records (benchmarks/programs.md): the small-call faces of this commit against a
# base commit, alternated, and DDP against gloo. From the repository root, venv active,
# torch==2.13.0 installed, on a quiet machine:
#     git worktree add /tmp/base <base commit>      # the commit to compare with
#     bash benchmarks/programs/run.sh /tmp/base
set -euo pipefail
BASE=${1:?usage: run.sh BASE_CHECKOUT}
D=benchmarks/programs
NEW=$PWD
export MPIEXEC_TIMEOUT=1800 OMP_NUM_THREADS=1
lat() {   # lat DIR N EXTRA...: one latency table of the checkout DIR at N ranks
  local dir=$1 n=$2; shift 2
  (cd "$dir" && PYTHONPATH=$dir mpiexec -n "$n" python -m mpicoll.bench latency --bytes 8 \
      --algorithm recursive_doubling -n 2000 --repeats 9 "$@" | tail -1)
}
# 1. N = 2 and N = 1: base and this commit alternated, three rounds each.
for n in 2 1; do
  for round in 1 2 3; do
    echo "base $n $(lat "$BASE" $n)"
    echo "new  $n $(lat "$NEW" $n)"
  done
done > $D/latency.txt
# 2. Through torch (this commit; torch_noop: a do-nothing backend, torch's own floor).
for round in 1 2 3; do lat "$NEW" 2 --torch; done > $D/torch_latency.txt
# 3. DDP: steps per second of examples/torch/ddp.py, the backends alternated.
for n in 2 4; do
  for round in 1 2 3; do
    for b in mpicoll gloo; do
      mpiexec -n $n python examples/torch/ddp.py --steps 60 --backend $b --quiet
    done
  done > $D/ddp_n$n.txt
done
