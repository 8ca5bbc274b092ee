#!/usr/bin/env bash
#SBATCH --job-name=mpicoll-bench-cpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=1
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
# Every primitive x every algorithm (native included) over a message-size sweep, across nodes.
#   sbatch [-A ACCOUNT] [-p PARTITION] jobs/bench_cpu.sh
#   sbatch -N 4 --ntasks-per-node=32 jobs/bench_cpu.sh                      bigger
#   MPICOLL_BENCH_PRIMITIVES=allreduce,bcast MPICOLL_BENCH_SIZES="-b 1K -e 64M -f 2 -n 50 -w 10" \
#       sbatch jobs/bench_cpu.sh                                           other sweep
# Settings (besides jobs/env.sh):
#   MPICOLL_BENCH_PRIMITIVES  primitive(s) or "all"                    (all)
#   MPICOLL_BENCH_ALGORITHMS  --algorithm value                        (all: every one, native included)
#   MPICOLL_BENCH_SIZES       sweep: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c CHECK
#                                                                      (-b 16 -e 1M -f 4 -n 20 -w 5 -c 1)
#   MPICOLL_BENCH_ARGS        more arguments for `python -m mpicoll.bench`
# Results: results/mpicoll-bench-cpu-<job id>/: bench.jsonl (one record per measurement), bench.csv,
# report.md (tables), plot.png (needs matplotlib), provenance.json, mpi.json, summary.json, job.log.
# Exit non-zero if a result is wrong (the bench checks every one) or any step fails.

# sbatch runs a copy of this script: find the checkout (MPICOLL_HOME, the submitted path, the submit dir).
for MPICOLL_HOME in "${MPICOLL_HOME:-}" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" -o 2>/dev/null | sed -n 's|.* Command=\(/[^ ]*\)/jobs/[^/ ]*\.sh.*|\1|p')" \
    "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)"; do
    [[ -f $MPICOLL_HOME/jobs/env.sh ]] && break
done
[[ -f $MPICOLL_HOME/jobs/env.sh ]] || { echo "cannot find jobs/env.sh: submit from the mpicoll checkout or set MPICOLL_HOME" >&2; exit 2; }
# shellcheck source=jobs/env.sh
source "$MPICOLL_HOME/jobs/env.sh"
MPICOLL_SCRIPT=jobs/bench_cpu.sh
mpicoll_init
mpicoll_provenance
mpicoll_check_launcher

R=$MPICOLL_RESULTS
sizes=() extra=()
eval "sizes=(${MPICOLL_BENCH_SIZES:--b 16 -e 1M -f 4 -n 20 -w 5 -c 1})"
eval "extra=(${MPICOLL_BENCH_ARGS:-})"
mpicoll_par bench "$MPICOLL_PYTHON" -m mpicoll.bench "${MPICOLL_BENCH_PRIMITIVES:-all}" "${sizes[@]}" \
    --algorithm "${MPICOLL_BENCH_ALGORITHMS:-all}" -J "$R/bench.jsonl" --csv "$R/bench.csv" "${extra[@]}"
mpicoll_bench_outputs "$R/bench.jsonl"
mpicoll_finish
