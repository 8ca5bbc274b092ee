#!/usr/bin/env bash
#SBATCH --job-name=mpicoll-bench-forced
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=1
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
# Like for like: each hand-written algorithm against the MPI library forced to the same algorithm
# (MPICH: MPIR_CVAR_<COLL>_INTRA_ALGORITHM; Open MPI: coll_tuned_<coll>_algorithm), rows
# ALG and native[NAME] side by side, plus native (the library's own choice) as the baseline.
#   sbatch [-A ACCOUNT] [-p PARTITION] jobs/bench_native_forced.sh
#   MPICOLL_FORCED_PAIRS="allreduce:ring=ring allreduce:rabenseifner=reduce_scatter_allgather" \
#       sbatch jobs/bench_native_forced.sh
# Settings (besides jobs/env.sh):
#   MPICOLL_FORCED_PAIRS      PRIMITIVE:ALGORITHM=LIBRARY_NAME ... (default: the table below for the
#                             MPI family in use; the library's names: `mpivars` for MPICH,
#                             `ompi_info --all | grep coll_tuned_.*_algorithm` for Open MPI)
#   MPICOLL_FORCED_PRIMITIVES only these primitives of the pairs, comma list (default: all of them)
#   MPICOLL_BENCH_SIZES       sweep (-b 16 -e 1M -f 4 -n 20 -w 5 -c 1)
#   MPICOLL_BENCH_ARGS        more arguments for `python -m mpicoll.bench`
# Results: results/mpicoll-bench-forced-<job id>/: forced-<primitive>.jsonl and .csv (one run per
# primitive), report.md and plot.png over all of them, pairs.txt, provenance.json, summary.json.

# sbatch runs a copy of this script: find the checkout (MPICOLL_HOME, the submitted path, the submit dir).
for MPICOLL_HOME in "${MPICOLL_HOME:-}" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" -o 2>/dev/null | sed -n 's|.* Command=\(/[^ ]*\)/jobs/[^/ ]*\.sh.*|\1|p')" \
    "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "$0")/.." 2>/dev/null && pwd)"; do
    [[ -f $MPICOLL_HOME/jobs/env.sh ]] && break
done
[[ -f $MPICOLL_HOME/jobs/env.sh ]] || { echo "cannot find jobs/env.sh: submit from the mpicoll checkout or set MPICOLL_HOME" >&2; exit 2; }
# shellcheck source=jobs/env.sh
source "$MPICOLL_HOME/jobs/env.sh"
MPICOLL_SCRIPT=jobs/bench_native_forced.sh
mpicoll_init
mpicoll_provenance
mpicoll_check_launcher

# mpicoll algorithm = the library's algorithm of the same shape.
PAIRS_MPICH="bcast:binomial=binomial bcast:scatter_allgather=scatter_ring_allgather
 reduce:binomial=binomial reduce:rabenseifner=reduce_scatter_gather
 allreduce:recursive_doubling=recursive_doubling allreduce:ring=ring allreduce:rabenseifner=reduce_scatter_allgather
 gather:binomial=binomial scatter:binomial=binomial
 allgather:ring=ring allgather:recursive_doubling=recursive_doubling allgather:bruck=brucks
 reduce_scatter:recursive_halving=recursive_halving reduce_scatter:pairwise=pairwise
 alltoall:pairwise=pairwise alltoall:bruck=brucks
 barrier:dissemination=k_dissemination"
PAIRS_OPENMPI="bcast:linear=basic_linear bcast:binomial=binomial bcast:pipeline=pipeline bcast:scatter_allgather=scatter_allgather_ring
 reduce:linear=linear reduce:binomial=binomial reduce:rabenseifner=rabenseifner
 allreduce:recursive_doubling=recursive_doubling allreduce:ring=ring allreduce:rabenseifner=rabenseifner
 gather:linear=basic_linear gather:binomial=binomial scatter:linear=basic_linear scatter:binomial=binomial
 allgather:ring=ring allgather:recursive_doubling=recursive_doubling allgather:bruck=bruck
 reduce_scatter:ring=ring reduce_scatter:recursive_halving=recursive_halving
 alltoall:pairwise=pairwise alltoall:bruck=modified_bruck
 barrier:linear=linear barrier:dissemination=bruck"
if [[ -z ${MPICOLL_FORCED_PAIRS:-} ]]; then
    family=$("$MPICOLL_PYTHON" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; v = MPI.Get_library_version()
print("openmpi" if "Open MPI" in v else "mpich" if "MPICH" in v and "Intel" not in v else "other")')
    case $family in
        mpich) MPICOLL_FORCED_PAIRS=$PAIRS_MPICH ;;
        openmpi) MPICOLL_FORCED_PAIRS=$PAIRS_OPENMPI ;;
        *) mpicoll_die "no default algorithm pairs for this MPI library ($family): set MPICOLL_FORCED_PAIRS" ;;
    esac
fi

# PRIMITIVE -> "alg,alg" and "name,name", in the order of the pairs.
declare -A algs natives
order=()
for pair in $MPICOLL_FORCED_PAIRS; do
    [[ $pair =~ ^([a-z_]+):([a-z_0-9]+)=([A-Za-z_0-9-]+)$ ]] || mpicoll_die "MPICOLL_FORCED_PAIRS: '$pair' is not PRIMITIVE:ALGORITHM=LIBRARY_NAME"
    p=${BASH_REMATCH[1]}
    if [[ -n ${MPICOLL_FORCED_PRIMITIVES:-} && ,$MPICOLL_FORCED_PRIMITIVES, != *,$p,* ]]; then continue; fi
    [[ -v "algs[$p]" ]] || order+=("$p")
    algs[$p]=${algs[$p]:+${algs[$p]},}${BASH_REMATCH[2]}
    natives[$p]=${natives[$p]:+${natives[$p]},}${BASH_REMATCH[3]}
done
((${#order[@]})) || mpicoll_die "no pairs left (MPICOLL_FORCED_PAIRS / MPICOLL_FORCED_PRIMITIVES)"

R=$MPICOLL_RESULTS
sizes=() extra=() files=()
eval "sizes=(${MPICOLL_BENCH_SIZES:--b 16 -e 1M -f 4 -n 20 -w 5 -c 1})"
eval "extra=(${MPICOLL_BENCH_ARGS:-})"
: >"$R/pairs.txt"
for p in "${order[@]}"; do
    echo "$p: ${algs[$p]} vs native[${natives[$p]}]" | tee -a "$R/pairs.txt"
done
for p in "${order[@]}"; do
    mpicoll_par "forced-$p" "$MPICOLL_PYTHON" -m mpicoll.bench "$p" "${sizes[@]}" \
        --algorithm "native,${algs[$p]}" --native-algorithm "${natives[$p]}" \
        -J "$R/forced-$p.jsonl" --csv "$R/forced-$p.csv" "${extra[@]}"
    [[ -s $R/forced-$p.jsonl ]] && files+=("$R/forced-$p.jsonl")
done
if ((${#files[@]})); then
    mpicoll_bench_outputs "${files[@]}"
else
    mpicoll_step results false
fi
mpicoll_finish
