# shellcheck shell=bash
# jobs/env.sh: the one place where mpicoll's Slurm jobs set up their environment.
# Sourced by every jobs/*.sh; not a job itself (`bash jobs/env.sh` prints the setup it would use).
#
# Site settings (environment variables, all optional; sbatch passes your environment on):
#   MPICOLL_HOME          the mpicoll checkout (found from the submitted script otherwise)
#   MPICOLL_SITE_SETUP    a file sourced first (site module setup, conda activate, ...)
#   MPICOLL_MODULES       modules to load, e.g. "gcc/12 openmpi/5.0 cuda/12.4"
#   MPICOLL_MODULE_PURGE  1: `module purge` before loading
#   MPICOLL_VENV          the virtual environment (default: the active one, else $MPICOLL_HOME/.venv)
#   MPI4PY_LIBMPI         the libmpi mpi4py loads (site MPI / CUDA-aware MPI); passed through
#   MPICOLL_LAUNCHER      auto (srun, else mpiexec) | srun | mpiexec
#   MPICOLL_SRUN_MPI      srun --mpi= plugin (default: pmi2, pmix for Open MPI)
#   MPICOLL_SRUN_ARGS     extra srun arguments (e.g. "--cpu-bind=cores")
#   MPICOLL_MPIEXEC       mpiexec command for the fallback (default: mpiexec on PATH)
#   MPICOLL_NTASKS        ranks when run outside Slurm (`bash jobs/demo.sh`; default 2)
#   MPICOLL_STEP_TIMEOUT  seconds after which a parallel step is killed (default: none)
#   MPICOLL_TIMEOUT       seconds after which a stuck collective is reported and ends the job
#                         (mpicoll's watchdog, docs/guide/faults.rst; default: off); passed through
#   MPICOLL_RESULTS_ROOT  where results/<job name>-<job id>/ goes (default $MPICOLL_HOME/results)
#
# Functions for the job scripts:
#   mpicoll_init                 set up, create $MPICOLL_RESULTS, log provenance (top of the log)
#   mpicoll_provenance           the Python/MPI part of the provenance (after mpicoll_init)
#   mpicoll_check_launcher       choose srun/mpiexec and prove it starts one world of SLURM_NTASKS ranks
#   mpicoll_step [--tee F] NAME CMD...  run CMD, log it, record a failure (the job goes on)
#   mpicoll_par [--tee F] NAME CMD...   the same under the parallel launcher (every rank runs CMD)
#   mpicoll_bench_outputs F.jsonl...   check the bench records; report.md (table) and plot.png
#   mpicoll_die MSG [CODE]       print MSG and end the job now (exit CODE, default 2)
#   mpicoll_finish               write summary.json, exit 1 if any step failed, else 0

MPICOLL_JOBS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${MPICOLL_HOME:=$(dirname "$MPICOLL_JOBS_DIR")}"
export MPICOLL_HOME

MPICOLL_FAILED=()
MPICOLL_STEPS_FILE=""

mpicoll_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

mpicoll_die() {
    printf '\n%s: ERROR: %s\n' "${MPICOLL_JOB_NAME:-mpicoll}" "$1" >&2
    if [[ -n $MPICOLL_STEPS_FILE ]]; then
        printf '{"step": "fatal", "rc": %d, "message": %s}\n' "${2:-2}" \
            "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/"/' | tr -d '\n')" >>"$MPICOLL_STEPS_FILE"
        "${MPICOLL_PYTHON:-python3}" "$MPICOLL_JOBS_DIR/lib/jobtools.py" summary "$MPICOLL_RESULTS" "${2:-2}" >/dev/null 2>&1
    fi
    exit "${2:-2}"
}

# --- environment: site file, modules, venv ---------------------------------------------------
_mpicoll_modules() {
    [[ -z ${MPICOLL_MODULES:-} && -z ${MPICOLL_MODULE_PURGE:-} ]] && return 0
    if ! type module >/dev/null 2>&1; then
        local f
        for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash \
            /usr/share/modules/init/bash "${MODULESHOME:-/nonexistent}/init/bash"; do
            # shellcheck disable=SC1090
            [[ -f $f ]] && source "$f" && break
        done
    fi
    type module >/dev/null 2>&1 || mpicoll_die "MPICOLL_MODULES='${MPICOLL_MODULES:-}' but no \`module\` command (Lmod/Environment Modules) was found"
    [[ ${MPICOLL_MODULE_PURGE:-0} == 1 ]] && module purge
    if [[ -n ${MPICOLL_MODULES:-} ]]; then
        # shellcheck disable=SC2086
        module load $MPICOLL_MODULES || mpicoll_die "module load $MPICOLL_MODULES failed"
    fi
}

_mpicoll_venv() {
    local v=${MPICOLL_VENV:-${VIRTUAL_ENV:-}}
    if [[ -z $v ]]; then
        for v in "$MPICOLL_HOME/.venv" ""; do [[ -z $v || -f $v/bin/activate ]] && break; done
    fi
    if [[ -n $v ]]; then
        [[ -f $v/bin/activate ]] || mpicoll_die "no virtual environment at '$v' (set MPICOLL_VENV to one with mpicoll installed: python3 -m venv .venv && .venv/bin/pip install -e '.[mpich,test]')"
        # shellcheck disable=SC1091
        VIRTUAL_ENV_DISABLE_PROMPT=1 source "$v/bin/activate"
    fi
    MPICOLL_PYTHON=${MPICOLL_PYTHON:-python}
    command -v "$MPICOLL_PYTHON" >/dev/null || MPICOLL_PYTHON=python3
    "$MPICOLL_PYTHON" -c 'import mpicoll, mpi4py, numpy' 2>/dev/null \
        || mpicoll_die "'$(command -v "$MPICOLL_PYTHON")' cannot import mpicoll, mpi4py and numpy (venv: '${v:-none}'; set MPICOLL_VENV)"
    export MPICOLL_PYTHON
}

mpicoll_setup_env() {
    # Site files, module scripts and activate are not all written for `set -u`.
    local had_u=0
    [[ $- == *u* ]] && had_u=1
    set +u
    if [[ -n ${MPICOLL_SITE_SETUP:-} ]]; then
        [[ -f $MPICOLL_SITE_SETUP ]] || mpicoll_die "MPICOLL_SITE_SETUP=$MPICOLL_SITE_SETUP: no such file"
        # shellcheck disable=SC1090
        source "$MPICOLL_SITE_SETUP" || mpicoll_die "sourcing $MPICOLL_SITE_SETUP failed"
    fi
    _mpicoll_modules
    _mpicoll_venv
    ((had_u)) && set -u
    export PYTHONUNBUFFERED=1 MPLBACKEND=${MPLBACKEND:-Agg} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    # MPICOLL_STEP_TIMEOUT bounds every parallel step (`timeout`); hydra's own bound as well.
    [[ -n ${MPICOLL_STEP_TIMEOUT:-} ]] && export MPIEXEC_TIMEOUT=$MPICOLL_STEP_TIMEOUT
    return 0
}

# --- job start: results directory, log, provenance --------------------------------------------
mpicoll_init() {
    set -u -o pipefail
    # Outside Slurm the job name is the script's #SBATCH --job-name (results/<job name>-local-...).
    MPICOLL_JOB_NAME=${SLURM_JOB_NAME:-$(sed -n '/^#SBATCH  *--job-name=/{s/^#SBATCH  *--job-name=\([^ ]*\).*/\1/p;q}' "$MPICOLL_HOME/${MPICOLL_SCRIPT:-none}" 2>/dev/null)}
    : "${MPICOLL_JOB_NAME:=$(basename "${MPICOLL_SCRIPT:-$0}" .sh)}"
    MPICOLL_JOB_ID=${SLURM_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)-$$}
    MPICOLL_NTASKS=${SLURM_NTASKS:-${MPICOLL_NTASKS:-2}}
    MPICOLL_T0=$(date +%s.%N)
    cd "$MPICOLL_HOME" || mpicoll_die "cannot cd to MPICOLL_HOME=$MPICOLL_HOME"
    MPICOLL_RESULTS=${MPICOLL_RESULTS_ROOT:-$MPICOLL_HOME/results}/$MPICOLL_JOB_NAME-$MPICOLL_JOB_ID
    mkdir -p "$MPICOLL_RESULTS" || mpicoll_die "cannot create $MPICOLL_RESULTS"
    export MPICOLL_JOB_NAME MPICOLL_JOB_ID MPICOLL_NTASKS MPICOLL_RESULTS MPICOLL_T0
    MPICOLL_STEPS_FILE=$MPICOLL_RESULTS/steps.jsonl
    : >"$MPICOLL_STEPS_FILE"
    # Everything from here on goes to the Slurm log and to $MPICOLL_RESULTS/job.log.
    exec > >(tee -a "$MPICOLL_RESULTS/job.log") 2>&1
    MPICOLL_TEE_PID=$!
    trap _mpicoll_on_exit EXIT
    trap 'mpicoll_die "terminated by signal (time limit or scancel?)" 143' TERM INT

    local commit dirty
    commit=$(git -C "$MPICOLL_HOME" rev-parse HEAD 2>/dev/null || echo unknown)
    dirty=$(git -C "$MPICOLL_HOME" status --porcelain --untracked-files=no -- mpicoll jobs 2>/dev/null | wc -l)
    echo "=================================== provenance ==================================="
    echo "job         : $MPICOLL_JOB_NAME  id=$MPICOLL_JOB_ID  script=${MPICOLL_SCRIPT:-$0}"
    echo "date        : $(date -Is)"
    echo "user@host   : $(id -un)@$(hostname)"
    echo "slurm       : nodes=${SLURM_JOB_NUM_NODES:-none} [${SLURM_JOB_NODELIST:-}] ntasks=${SLURM_NTASKS:-} tasks/node=${SLURM_TASKS_PER_NODE:-} cpus/task=${SLURM_CPUS_PER_TASK:-} gpus/node=${SLURM_GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-}} partition=${SLURM_JOB_PARTITION:-} account=${SLURM_JOB_ACCOUNT:-} timelimit=$(_mpicoll_timelimit)"
    echo "repository  : $MPICOLL_HOME  commit=$commit  modified(mpicoll,jobs)=$dirty"
    echo "results     : $MPICOLL_RESULTS"
    echo "kernel/cpu  : $(uname -srm); $(nproc) cores visible; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
    mpicoll_setup_env
    echo "modules     : ${LOADEDMODULES:-none}"
    echo "python      : $(command -v "$MPICOLL_PYTHON")  venv=${VIRTUAL_ENV:-none}"
    echo "settings    : $(env | grep -E '^(MPICOLL_[A-Z_]+|MPI4PY_[A-Z_]+|MPIR_CVAR_[A-Z_]+|OMPI_MCA_[A-Za-z_]+|UCX_[A-Z_]+|CUDA_VISIBLE_DEVICES|NCCL_[A-Z_]+)=' \
        | grep -vE '^MPICOLL_(HOME|RESULTS|JOB_NAME|JOB_ID|NTASKS|PYTHON|T0)=' | sort | tr '\n' ' ')"
}

mpicoll_provenance() {
    "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" provenance "$MPICOLL_RESULTS/provenance.json" \
        || mpicoll_die "the Python environment is broken (see above)"
    echo "=================================================================================="
}

_mpicoll_timelimit() {
    [[ -n ${SLURM_JOB_ID:-} ]] || { echo none; return; }
    scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | sed -n 's/.* TimeLimit=\([^ ]*\).*/\1/p'
}

# --- launching ---------------------------------------------------------------------------------
# MPICOLL_LAUNCH (an array) is the parallel launch prefix once mpicoll_check_launcher has run.
MPICOLL_LAUNCH=()

_mpicoll_srun_cmd() {
    local plugin=${MPICOLL_SRUN_MPI:-}
    if [[ -z $plugin ]]; then
        plugin=pmi2
        "$MPICOLL_PYTHON" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; import sys; sys.exit(0 if "Open MPI" in MPI.Get_library_version() else 1)' 2>/dev/null \
            && plugin=pmix
    fi
    # Since Slurm 22.05 srun does not take --cpus-per-task from sbatch: hand it on.
    [[ -n ${SLURM_CPUS_PER_TASK:-} ]] && export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK
    # shellcheck disable=SC2206
    MPICOLL_LAUNCH=(srun "--mpi=$plugin" --kill-on-bad-exit=1 ${MPICOLL_SRUN_ARGS:-})
}

_mpicoll_mpiexec_cmd() {
    local exe=${MPICOLL_MPIEXEC:-mpiexec}
    # shellcheck disable=SC2206
    local parts=($exe)
    command -v "${parts[0]}" >/dev/null || return 1
    MPICOLL_LAUNCH=("${parts[@]}" -n "$MPICOLL_NTASKS")
}

_mpicoll_try_launch() {  # run jobtools mpi-check under MPICOLL_LAUNCH; 0 if one world of NTASKS ranks
    mpicoll_log "launcher check: ${MPICOLL_LAUNCH[*]} python jobs/lib/jobtools.py mpi-check $MPICOLL_NTASKS"
    _mpicoll_timeout 120 "${MPICOLL_LAUNCH[@]}" "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" \
        mpi-check "$MPICOLL_NTASKS" "$MPICOLL_RESULTS/mpi.json"
}

mpicoll_check_launcher() {
    local want=${MPICOLL_LAUNCHER:-auto}
    case $want in auto | srun | mpiexec) ;; *) mpicoll_die "MPICOLL_LAUNCHER=$want: use auto, srun or mpiexec" ;; esac
    if [[ $want != mpiexec ]]; then
        if [[ -n ${SLURM_JOB_ID:-} ]] && command -v srun >/dev/null; then
            _mpicoll_srun_cmd
            if _mpicoll_try_launch; then
                mpicoll_log "launcher: ${MPICOLL_LAUNCH[*]}"
                return 0
            fi
            [[ $want == srun ]] && mpicoll_die "MPICOLL_LAUNCHER=srun but '${MPICOLL_LAUNCH[*]}' did not start one MPI world of $MPICOLL_NTASKS ranks (wrong --mpi plugin? set MPICOLL_SRUN_MPI)"
            mpicoll_log "srun did not start one MPI world of $MPICOLL_NTASKS ranks: falling back to mpiexec"
        elif [[ $want == srun ]]; then
            mpicoll_die "MPICOLL_LAUNCHER=srun but this is not a Slurm job (or srun is missing)"
        fi
    fi
    _mpicoll_mpiexec_cmd || mpicoll_die "no mpiexec found (${MPICOLL_MPIEXEC:-mpiexec}); install mpich in the venv or set MPICOLL_MPIEXEC"
    _mpicoll_try_launch || mpicoll_die "'${MPICOLL_LAUNCH[*]}' did not start one MPI world of $MPICOLL_NTASKS ranks either"
    mpicoll_log "launcher: ${MPICOLL_LAUNCH[*]}"
}

_mpicoll_timeout() {  # _mpicoll_timeout DEFAULT CMD...: CMD under `timeout` if a bound is set
    local t=${MPICOLL_STEP_TIMEOUT:-$1}
    shift
    if [[ -n $t && $t != 0 ]] && command -v timeout >/dev/null; then
        timeout -k 20 "$t" "$@"
    else
        "$@"
    fi
}

# --- steps -------------------------------------------------------------------------------------
mpicoll_step() {  # mpicoll_step [--tee FILE] NAME CMD...   (serial; --tee: stdout also to FILE)
    _mpicoll_run serial "$@"
}

mpicoll_par() {  # mpicoll_par [--tee FILE] NAME CMD...   (every rank, through the checked launcher)
    ((${#MPICOLL_LAUNCH[@]})) || mpicoll_die "mpicoll_par before mpicoll_check_launcher"
    _mpicoll_run par "$@"
}

_mpicoll_run() {
    local mode=$1 tee_file="" name t0 rc
    shift
    if [[ $1 == --tee ]]; then
        tee_file=$2
        shift 2
    fi
    name=$1
    shift
    local cmd=("$@")
    if [[ $mode == par ]]; then
        mpicoll_log "step $name: ${MPICOLL_LAUNCH[*]} $*"
        cmd=(_mpicoll_timeout "" "${MPICOLL_LAUNCH[@]}" "$@")
    else
        mpicoll_log "step $name: $*"
    fi
    t0=$(date +%s.%N)
    if [[ -n $tee_file ]]; then
        "${cmd[@]}" | tee "$tee_file"
        rc=${PIPESTATUS[0]}
    else
        "${cmd[@]}"
        rc=$?
    fi
    _mpicoll_record "$name" "$rc" "$t0"
    return "$rc"
}

_mpicoll_record() {
    local name=$1 rc=$2 t0=$3 dt
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    printf '{"step": "%s", "rc": %d, "seconds": %s}\n' "$name" "$rc" "$dt" >>"$MPICOLL_STEPS_FILE"
    if ((rc == 0)); then
        mpicoll_log "step $name: ok (${dt} s)"
    else
        mpicoll_log "step $name: FAILED with exit $rc (${dt} s)"
        MPICOLL_FAILED+=("$name")
    fi
}

mpicoll_bench_outputs() {  # mpicoll_bench_outputs FILE.jsonl...: check them; report.md, plot.png
    local f ok=0
    for f in "$@"; do
        mpicoll_step "results-$(basename "$f" .jsonl)" "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" \
            check-jsonl "$f" || ok=1
    done
    ((ok == 0)) || return 1
    if mpicoll_step report "$MPICOLL_PYTHON" -m mpicoll.bench report "$@" -o "$MPICOLL_RESULTS/report.md"; then
        cat "$MPICOLL_RESULTS/report.md"
    fi
    if "$MPICOLL_PYTHON" -c 'import matplotlib' 2>/dev/null; then
        mpicoll_step plot "$MPICOLL_PYTHON" -m mpicoll.bench plot "$@" -o "$MPICOLL_RESULTS/plot.png"
    else
        mpicoll_log "note: matplotlib is not installed in $(command -v "$MPICOLL_PYTHON"): no plot (pip install matplotlib)"
    fi
}

mpicoll_finish() {
    local rc=0
    ((${#MPICOLL_FAILED[@]})) && rc=1
    "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" summary "$MPICOLL_RESULTS" "$rc" || rc=1
    echo "=================================================================================="
    if ((rc == 0)); then
        echo "$MPICOLL_JOB_NAME: all steps passed; results in $MPICOLL_RESULTS"
    else
        echo "$MPICOLL_JOB_NAME: FAILED steps: ${MPICOLL_FAILED[*]:-summary}; results in $MPICOLL_RESULTS"
    fi
    exit "$rc"
}

_mpicoll_on_exit() {
    local rc=$?
    trap - EXIT
    # Close our end of the log pipe and let tee drain before the job ends.
    exec >&- 2>&-
    [[ -n ${MPICOLL_TEE_PID:-} ]] && wait "$MPICOLL_TEE_PID" 2>/dev/null
    exit "$rc"
}

# `bash jobs/env.sh`: show what a job would use, run nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -u
    echo "jobs/env.sh is sourced by the job scripts (sbatch jobs/demo.sh ...); it is not a job."
    mpicoll_setup_env
    echo "MPICOLL_HOME=$MPICOLL_HOME"
    echo "python=$(command -v "$MPICOLL_PYTHON") venv=${VIRTUAL_ENV:-none} modules=${LOADEDMODULES:-none}"
    "$MPICOLL_PYTHON" -m mpi4py --mpi-library 2>/dev/null | sed 's/^/libmpi=/'
fi
