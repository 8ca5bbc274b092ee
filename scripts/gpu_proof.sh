#!/usr/bin/env bash
# scripts/gpu_proof.sh: the GPU proof of issue #6, on one machine with an NVIDIA GPU.
#
#   bash scripts/gpu_proof.sh [--quick] [--no-install] [--out DIR]
#
# Run from anywhere (it works in the repository root). Assumes only Python 3.10+, pip, gcc and
# access to PyPI; it installs everything else into a virtual environment (.venv-gpu):
#   1. checks for an NVIDIA GPU first: none (no nvidia-smi, or it lists no GPU) means exit 3 with
#      one line saying why, before anything is installed or written;
#   2. python3 -m venv .venv-gpu; pip install -e ".[mpich,gpu,test]" plus CUPY_SPEC (below)
#      and, best effort, NCCL for CuPy;
#   3. records nvidia-smi, CuPy / CUDA / NCCL versions, mpicoll.gpu.cuda_aware_report() and the
#      device path (the PyPI mpich wheel is not CUDA-aware: the path is "staged");
#   4. runs the GPU tests on CuPy arrays at N = 1, 2 and 4 ranks, all on this one GPU:
#        MPICOLL_TEST_XP=cupy mpiexec -n N python -m mpi4py -m pytest --with-mpi -q tests/mpi/test_device.py
#      plus the demo and an example with --device gpu;
#   5. benchmarks allreduce, allgather and bcast with --xp cupy at N = 2 and 4: every hand-written
#      algorithm, native (the MPI library's own, staged by mpicoll) and the bench's nccl column
#      (NCCL wants one GPU per rank: with ranks sharing this GPU the bench skips those rows and
#      says why);
#   6. writes everything to benchmarks/gpu/<date>-<host>/ with RUN.md: what ran (commands, exit
#      codes, seconds), the versions, the device path and the bench report tables.
# A failing step does not stop the run; the script exits 1 at the end if any step failed.
#   --quick       N = 1, 2 tests, N = 2 bench on a short sweep (8 B .. 1 MiB), about a minute
#   --no-install  reuse an existing .venv-gpu (MPICOLL_GPU_VENV) as it is
#   --out DIR     results here instead of benchmarks/gpu/<date>-<host>
# Settings: MPICOLL_GPU_VENV (.venv-gpu), CUPY_SPEC (the CuPy requirement), PYTHON (python3),
#   MPICOLL_NVIDIA_SMI (nvidia-smi), MPICOLL_BENCH_SIZES (the bench sweep), MPICOLL_STEP_TIMEOUT
#   (seconds per step, default 300).
# Full run: about 5-8 minutes on an H200 after the install.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

QUICK=0 INSTALL=1 OUT=""
while (($#)); do
    case $1 in
        --quick) QUICK=1 ;;
        --no-install) INSTALL=0 ;;
        --out) [[ $# -ge 2 ]] || { echo "gpu_proof.sh: --out needs a directory" >&2; exit 2; }; OUT=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "gpu_proof.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
HOST=$(hostname -s 2>/dev/null || hostname)

# --- 1. fail fast: no GPU, nothing installed, nothing written ---------------------------------
SMI=${MPICOLL_NVIDIA_SMI:-nvidia-smi}
if ! command -v "$SMI" >/dev/null 2>&1; then
    echo "gpu_proof.sh: needs an NVIDIA GPU, but $HOST has no $SMI (no NVIDIA driver): nothing installed, nothing run" >&2
    exit 3
fi
GPUS=$("$SMI" -L 2>/dev/null | grep '^GPU ' || true)
if [[ -z $GPUS ]]; then
    echo "gpu_proof.sh: needs an NVIDIA GPU, but $SMI finds none on $HOST: nothing installed, nothing run" >&2
    exit 3
fi

VENV=${MPICOLL_GPU_VENV:-$ROOT/.venv-gpu}
PY=$VENV/bin/python
MPIEXEC=$VENV/bin/mpiexec
STEP_TIMEOUT=${MPICOLL_STEP_TIMEOUT:-300}
# The gpu extra is the prebuilt CUDA 12 wheel (cupy-cuda12x); CUPY_SPEC adds [ctk], the CUDA
# runtime libraries from PyPI (NVRTC etc.; CuPy >= 14), so no system CUDA toolkit is needed.
# cupy-cuda12x runs on any driver for CUDA >= 12 (nvidia-smi's "CUDA Version").
CUPY_SPEC=${CUPY_SPEC:-cupy-cuda12x[ctk]}
NCCL_SPEC=${NCCL_SPEC:-nvidia-nccl-cu12}
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-$ROOT/benchmarks/gpu/$STAMP-$HOST}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STEPS=$OUT/steps.tsv
: >"$STEPS"
exec > >(tee -a "$OUT/proof.log") 2>&1
TEE_PID=$!
FAILED=()
T0=$(date +%s)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# step NAME CMD...: run CMD (output to the console and OUT/logs/NAME.log), record exit and time.
step() {
    local name=$1 t0 rc
    shift
    mkdir -p "$OUT/logs"
    say "step $name: $*"
    t0=$(date +%s.%N)
    set +e
    timeout -k 20 "$STEP_TIMEOUT" "$@" 2>&1 | tee "$OUT/logs/$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    local dt
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$*" >>"$STEPS"
    if ((rc == 0)); then
        say "step $name: ok ($dt s)"
    else
        say "step $name: FAILED with exit $rc ($dt s)$( ((rc == 124)) && echo ": timed out after $STEP_TIMEOUT s")"
        FAILED+=("$name")
    fi
    return 0
}

# mpistep NAME N [VAR=VALUE...] CMD...: CMD on N ranks with those variables set (hydra passes the
# environment on, and kills the whole job after the step timeout: no rank is left waiting).
mpistep() {
    local name=$1 n=$2 vars=()
    shift 2
    while [[ ${1:-} == [A-Z]*=* ]]; do
        vars+=("$1")
        shift
    done
    step "$name" env MPIEXEC_TIMEOUT="$STEP_TIMEOUT" "${vars[@]}" "$MPIEXEC" -n "$n" "$@"
}

say "gpu_proof.sh on $HOST: results in $OUT (quick=$QUICK install=$INSTALL)"
printf '%s\n' "$GPUS"

# --- 2. install -------------------------------------------------------------------------------
if ((INSTALL)); then
    step venv "${PYTHON:-python3}" -m venv "$VENV"
    step pip-upgrade "$PY" -m pip install -q -U pip setuptools wheel
    step install "$PY" -m pip install -e ".[mpich,gpu,test]" "$CUPY_SPEC"
    # NCCL for cupy.cuda.nccl: optional (mpicoll.gpu.nccl_status() below says whether CuPy finds it).
    step install-nccl "$PY" -m pip install "$NCCL_SPEC"
elif [[ ! -x $PY ]]; then
    echo "gpu_proof.sh: --no-install but there is no virtual environment at $VENV (run once without --no-install)" >&2
    printf 'venv\t2\t0\t--no-install: no %s\n' "$VENV" >>"$STEPS"
    FAILED+=(venv)
fi

# --- 3. versions and the device path ---------------------------------------------------------
step nvidia-smi "$SMI"
step versions "$PY" - "$OUT/versions.json" <<'PY'
import json, platform, sys
import numpy, mpi4py
from mpi4py import MPI
import mpicoll
from mpicoll import gpu
info = {"python": sys.version.split()[0], "platform": platform.platform(), "numpy": numpy.__version__,
        "mpi4py": mpi4py.__version__, "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
        "mpicoll": getattr(mpicoll, "__version__", "?")}
info["cupy_status"] = gpu.cupy_status()
info["nccl_status"] = gpu.nccl_status()
try:
    import cupy
    rt = cupy.cuda.runtime
    ver = lambda v: f"{v // 1000}.{v % 1000 // 10}"
    info.update(cupy=cupy.__version__, cuda_runtime=ver(rt.runtimeGetVersion()),
                cuda_driver=ver(rt.driverGetVersion()), devices=[
                    rt.getDeviceProperties(i)["name"].decode() for i in range(rt.getDeviceCount())])
except Exception as exc:  # noqa: BLE001 - recorded, the step fails below
    info["cupy_error"] = f"{type(exc).__name__}: {exc}"
info["cuda_aware_report"] = gpu.cuda_aware_report()
info["device_path"] = gpu.device_path()
json.dump(info, open(sys.argv[1], "w"), indent=2, default=str)
for k, v in info.items():
    print(f"{k:18}: {v}")
sys.exit(0 if info["cupy_status"][0] else 1)
PY

# --- 4. GPU tests at N = 1, 2, 4 on this GPU; demo and an example with --device gpu -------------
if ((QUICK)); then SIZES_T=(1 2); else SIZES_T=(1 2 4); fi
for n in "${SIZES_T[@]}"; do
    mpistep "test-device-n$n" "$n" MPICOLL_TEST_XP=cupy "$PY" -m mpi4py -m pytest --with-mpi -q \
        tests/mpi/test_device.py
done
mpistep demo-gpu-n2 2 "$PY" -m mpicoll.demo --device gpu --sleep-scale 0.05
if ((!QUICK)); then mpistep demo-gpu-n4 4 "$PY" -m mpicoll.demo --device gpu --sleep-scale 0.05; fi
mpistep example-all_reduce-gpu-n2 2 "$PY" examples/all_reduce.py --device gpu

# --- 5. bench: hand-written (staged) vs native (staged) vs NCCL ----------------------------------
if ((QUICK)); then
    SIZES_B=(2)
    read -r -a SWEEP <<<"${MPICOLL_BENCH_SIZES:--b 8 -e 1M -f 16 -n 5 -w 2 -c 1}"
else
    SIZES_B=(2 4)
    read -r -a SWEEP <<<"${MPICOLL_BENCH_SIZES:--b 8 -e 64M -f 4 -n 20 -w 5 -c 1}"
fi
JSONL=()
for prim in allreduce allgather bcast; do
    # Every hand-written algorithm, then native, then the bench's nccl column (the bench skips it,
    # saying why, where NCCL cannot run: no NCCL, or ranks sharing this one GPU).
    algos=$("$PY" -c 'import sys, mpicoll
print(",".join([a for a in mpicoll.algorithms(sys.argv[1]) if a != "native"] + ["native", "nccl"]))' "$prim")
    for n in "${SIZES_B[@]}"; do
        f=$OUT/bench-$prim-n$n
        mpistep "bench-$prim-n$n" "$n" "$PY" -m mpicoll.bench "$prim" --xp cupy --algorithm "$algos" \
            "${SWEEP[@]}" -J "$f.jsonl" --csv "$f.csv"
        if [[ -s $f.jsonl ]]; then JSONL+=("$f.jsonl"); fi
    done
done
if ((${#JSONL[@]})); then
    step report "$PY" -m mpicoll.bench report "${JSONL[@]}" -o "$OUT/report.md"
    if "$PY" -c 'import matplotlib' 2>/dev/null; then
        step plot "$PY" -m mpicoll.bench plot "${JSONL[@]}" -o "$OUT/plot.png"
    fi
fi

# --- 6. RUN.md ---------------------------------------------------------------------------------
{
    echo "# GPU proof run: $HOST, $(date -Is)"
    echo
    echo "Written by \`scripts/gpu_proof.sh$( ((QUICK)) && echo ' --quick')$( ((INSTALL)) || echo ' --no-install')\`;"
    echo "commit \`$(git rev-parse HEAD 2>/dev/null || echo unknown)\`$(git diff --quiet HEAD -- mpicoll tests scripts examples 2>/dev/null || echo ' (with local changes)'),"
    echo "$(( $(date +%s) - T0 )) s in all. Every figure here was measured by this run on this machine."
    echo
    echo "## GPUs"
    echo
    printf '%s\n' "$GPUS" | sed 's/ (UUID: [^)]*)//; s/^/- /'
    echo
    echo "## Versions and device path"
    echo
    if [[ -s $OUT/versions.json ]]; then
        "$PY" - "$OUT/versions.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
rep = v.get("cuda_aware_report", {})
path = v.get("device_path", {})
rows = [("Python", v.get("python")), ("NumPy", v.get("numpy")), ("mpi4py", v.get("mpi4py")),
        ("MPI library", v.get("mpi_library")), ("CuPy", v.get("cupy", v.get("cupy_error"))),
        ("CUDA runtime / driver", f"{v.get('cuda_runtime')} / {v.get('cuda_driver')}"),
        ("NCCL (cupy.cuda.nccl)", v.get("nccl_status")),
        ("CUDA-aware MPI", f"{rep.get('cuda_aware')} (decided by {rep.get('source')}; "
                           f"MPIX_Query_cuda_support={rep.get('mpix_query')}, "
                           f"mpi_memory_alloc_kinds={rep.get('alloc_kinds')})"),
        ("device path", f"**{path.get('path')}** (decided by {path.get('source')})")]
print("| what | value |\n| --- | --- |")
for k, val in rows:
    print(f"| {k} | {val} |")
PY
    else
        echo "versions.json was not written (see logs/versions.log)."
    fi
    echo
    echo "## Steps"
    echo
    echo "| step | exit | seconds | command |"
    echo "| --- | --- | --- | --- |"
    while IFS=$'\t' read -r name rc dt cmd; do
        echo "| $name | $rc$( ((rc != 0)) && echo ' **FAILED**') | $dt | \`${cmd//|/\\|}\` |"
    done <"$STEPS"
    echo
    echo "Logs: \`logs/<step>.log\`; the whole run: \`proof.log\`. Bench records: \`bench-<primitive>-n<N>.jsonl\` / \`.csv\`."
    echo
    echo "## Bench report (python -m mpicoll.bench report)"
    echo
    if [[ -s $OUT/report.md ]]; then cat "$OUT/report.md"; else echo "No report: no bench step produced records."; fi
    echo
    if ((${#FAILED[@]})); then echo "**Failed steps:** ${FAILED[*]}"; else echo "All steps passed."; fi
} >"$OUT/RUN.md"

say "RUN.md written: $OUT/RUN.md"
rc=0
if ((${#FAILED[@]})); then
    say "FAILED steps: ${FAILED[*]}"
    rc=1
else
    say "all steps passed"
fi
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null || true
exit "$rc"
