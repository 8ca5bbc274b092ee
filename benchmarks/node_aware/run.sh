#!/usr/bin/env bash
# The node-aware measurements: hierarchical vs flat allreduce (and native MPICH) on hosts made of
# network namespaces (scripts/netns_cluster.sh), and the two-level model fitted there.
#
#   bash benchmarks/node_aware/run.sh [OUTDIR]      # root; default OUTDIR benchmarks/node_aware/<date>
#
# Layouts: 4 hosts x 2 ranks unshaped and with --rate 1gbit (tbf; burst 2mbit so the rate is
# the one named), and 2 hosts x 2 ranks unshaped. Each: allreduce 8 B .. 4 MiB (x4), every flat
# hand-written algorithm, hierarchical (default options), native (MPICH's choice) and native
# forced to MPICH's node-aware 'smp' algorithm, raw (plain mpi4py call). Then `bench fit` on the
# 4 x 2 unshaped layout (alpha/beta inside and between nodes; predicted vs measured per
# algorithm). Nothing else should run on the machine meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-benchmarks/node_aware/$(date +%Y-%m-%d)-$(hostname -s)}
mkdir -p "$OUT"
CL=scripts/netns_cluster.sh
ALGS=recursive_doubling,ring,rabenseifner,reduce_bcast,hierarchical,native,raw
SWEEP=(allreduce -b 8 -e 4M -f 4 -n "${MPICOLL_BENCH_ITERS:-100}" -w 10 -a "$ALGS"
       --native-algorithm smp --no-memcpy --progress off)
trap '$CL down >/dev/null 2>&1 || true' EXIT
{
    echo "# $(date -u +%FT%TZ) $(hostname -s), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
    python -c 'import mpi4py, numpy; from mpi4py import MPI; print("#", MPI.Get_library_version().splitlines()[0], "mpi4py", mpi4py.__version__, "numpy", numpy.__version__)'
} | tee "$OUT/RUN.txt"

run() {   # run NAME HOSTS UP_ARGS...
    local name=$1 hosts=$2; shift 2
    $CL down >/dev/null 2>&1 || true
    $CL up "$@" | tail -1 | tee -a "$OUT/RUN.txt"
    local n
    n=$(tr ',' '\n' <<<"$hosts" | awk -F: '{s += $2} END {print s}')
    echo "## $name: -hosts $hosts (N=$n)" | tee -a "$OUT/RUN.txt"
    $CL mpiexec -hosts "$hosts" -n "$n" python -m mpicoll.bench "${SWEEP[@]}" \
        -J "$OUT/$name.jsonl" > "$OUT/$name.txt" 2>&1
    python -m mpicoll.bench report "$OUT/$name.jsonl" -o "$OUT/$name.md" >/dev/null
}

run 4x2 mpc-h1:2,mpc-h2:2,mpc-h3:2,mpc-h4:2 4
run 4x2-1gbit mpc-h1:2,mpc-h2:2,mpc-h3:2,mpc-h4:2 4 --rate 1gbit --burst 2mbit
run 2x2 mpc-h1:2,mpc-h2:2 2

$CL down >/dev/null 2>&1 || true
$CL up 4 | tail -1
echo "## fit: 4x2 unshaped" | tee -a "$OUT/RUN.txt"
$CL mpiexec -hosts mpc-h1:2,mpc-h2:2,mpc-h3:2,mpc-h4:2 -n 8 python -m mpicoll.bench fit \
    -b 8 -e 1M -f 4 -n 50 -w 5 --fit-maxbytes 1M --primitive allreduce -o "$OUT/model.json" > "$OUT/fit.txt" 2>&1
python benchmarks/node_aware/summarize.py "$OUT" | tee "$OUT/summary.md"
# The fitted model extrapolated: flat vs hierarchical up to 10^4 ranks at 8, 16, 64 ranks per node.
python -m mpicoll.bench predict --model "$OUT/model.json" --ranks 2..10000 --bytes 8,64K,16M \
    --ranks-per-node 8,16,64 --primitive allreduce,bcast,reduce,allgather \
    -o "$OUT/predict.png" --json "$OUT/predict.json" > "$OUT/predict.txt" 2>&1
