#!/usr/bin/env bash
# Per-rank wrapper, run by the launcher on every rank:  srun ... jobs/lib/task.sh CMD ARGS...
# - replaces the text {rank} in ARGS with this rank's number (e.g. --junitxml=junit-rank{rank}.xml);
# - MPICOLL_GPU_BIND=1: one GPU per rank, CUDA_VISIBLE_DEVICES = the (local rank % count)-th of the
#   GPUs this task can see (Slurm may hand every task all of the node's GPUs); with more ranks than
#   GPUs several ranks share one (a one-GPU workstation).
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}}
local_rank=${MPI_LOCALRANKID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-0}}}
if [[ ${MPICOLL_GPU_BIND:-0} == 1 ]]; then
    if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
        IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
    else
        mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null)
    fi
    if ((${#gpus[@]} > 0)); then
        export CUDA_VISIBLE_DEVICES=${gpus[local_rank % ${#gpus[@]}]}
        ((local_rank >= ${#gpus[@]})) && echo "task.sh: rank $rank (local $local_rank) shares GPU ${CUDA_VISIBLE_DEVICES} with local rank $((local_rank % ${#gpus[@]})): more ranks than GPUs on $(hostname -s)" >&2
    fi
fi
# MPICOLL_TASK_LOG=PATH-with-{rank}: each rank's output to its own file; rank 0's also to the job log.
if [[ -n ${MPICOLL_TASK_LOG:-} ]]; then
    log=${MPICOLL_TASK_LOG//\{rank\}/$rank}
    if [[ $rank == 0 ]]; then
        exec > >(tee "$log") 2>&1
    else
        exec >"$log" 2>&1
    fi
fi
args=()
for a in "$@"; do args+=("${a//\{rank\}/$rank}"); done
if [[ -n ${MPICOLL_TASK_LOG:-} && $rank == 0 ]]; then
    "${args[@]}"  # not exec: let tee drain before the launcher sees this rank end
    rc=$?
    exec >&- 2>&-
    wait
    exit "$rc"
fi
exec "${args[@]}"
