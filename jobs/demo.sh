#!/usr/bin/env bash
#SBATCH --job-name=mpicoll-demo
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --output=%x-%j.out
# The mpicoll demo: every primitive, hand-written algorithms beside the native ones.
#   sbatch [-A ACCOUNT] [-p PARTITION] jobs/demo.sh          (from the mpicoll checkout)
#   MPICOLL_DEMO_ARGS="--only allreduce,bcast --count 8" sbatch jobs/demo.sh
#   bash jobs/demo.sh                                        (no Slurm: mpiexec -n ${MPICOLL_NTASKS:-2})
# Results: results/mpicoll-demo-<job id>/ (demo.txt, provenance.json, mpi.json, summary.json, job.log).
# Settings: jobs/env.sh.

# sbatch runs a copy of this script: find the checkout (MPICOLL_HOME, the submitted path, the submit dir).
for MPICOLL_HOME in "${MPICOLL_HOME:-}" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" -o 2>/dev/null | sed -n 's|.* Command=\(/[^ ]*\)/jobs/[^/ ]*\.sh.*|\1|p')" \
    "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)"; do
    [[ -f $MPICOLL_HOME/jobs/env.sh ]] && break
done
[[ -f $MPICOLL_HOME/jobs/env.sh ]] || { echo "cannot find jobs/env.sh: submit from the mpicoll checkout or set MPICOLL_HOME" >&2; exit 2; }
# shellcheck source=jobs/env.sh
source "$MPICOLL_HOME/jobs/env.sh"
MPICOLL_SCRIPT=jobs/demo.sh
mpicoll_init
mpicoll_provenance
mpicoll_check_launcher

demo_args=()
eval "demo_args=(${MPICOLL_DEMO_ARGS:-})"
mpicoll_par --tee "$MPICOLL_RESULTS/demo.txt" demo "$MPICOLL_PYTHON" -m mpicoll.demo "${demo_args[@]}"
mpicoll_finish
