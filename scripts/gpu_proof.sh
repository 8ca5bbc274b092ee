#!/usr/bin/env bash
# scripts/gpu_proof.sh: the GPU proof (GPU paths and targets), on one machine with an NVIDIA GPU.
#
#   bash scripts/gpu_proof.sh [--quick] [--no-install | --wheels DIR] [--transports LIST]
#                             [--mps LIST] [--primitives LIST] [--test-ranks LIST]
#                             [--bench-ranks LIST] [--budget SECONDS] [--out DIR] [--pack FILE]
#
# Run from anywhere (it works in the repository root). Assumes only Python 3.10+, pip, gcc and
# access to PyPI (or, with --wheels, no network at all); it installs into .venv-gpu:
#   1. checks for an NVIDIA GPU first: none (no nvidia-smi, or it lists no GPU) means exit 3 with
#      one line saying why, before anything is installed or written;
#   2. python3 -m venv .venv-gpu; pip install -e ".[mpich,gpu-aware,test]" plus CUPY_SPEC (below)
#      and, best effort, NCCL for CuPy. --wheels DIR instead: offline, a venv that sees this
#      interpreter's own packages (CuPy, torch... of the machine's image, through a .pth file)
#      plus DIR's wheels (mpi4py, mpich, pytest-mpi, libucx-cu13) installed with --no-index;
#      the checkout runs from PYTHONPATH. --no-install: reuse the venv (MPICOLL_GPU_VENV) as is;
#   3. records nvidia-smi, CuPy / CUDA / NCCL versions, mpicoll.gpu.cuda_aware_report(), the
#      device path, IPC support and the MPS daemon's state;
#   4. for each MPS state of --mps (off: none running; on: nvidia-cuda-mps-control -d first,
#      stopped after) and each transport of --transports (MPICOLL_GPU_TRANSPORT: staged, aware =
#      the CUDA-aware MPICH of `python -m mpicoll.gpu env`, ipc):
#        - the GPU tests on CuPy arrays at each N of --test-ranks, all on this one GPU (in the
#          first MPS state that runs, MPS on first: results do not depend on it):
#            MPICOLL_TEST_XP=cupy mpiexec -n N python -m mpi4py -m pytest --with-mpi -q \
#            (cupy-ipc on ipc: every message it can map must be mapped; with the first
#            transport also cupy-host-copy: small calls on host copies)
#                tests/mpi/test_device.py tests/mpi/test_device_requests.py
#        - the bench (--xp cupy) of each primitive of --primitives at each N of --bench-ranks:
#          every hand-written algorithm and native, and in the first transport the nccl column
#          (NCCL wants one GPU per rank; with ranks sharing this GPU the bench skips those rows
#          and says why unless NCCL >= 2.30 allows it) and the torch columns (torch.distributed's
#          gloo backend on CUDA tensors: allreduce and bcast; and the "mpicoll" backend);
#        - `python -m mpicoll.bench latency --xp cupy` (8 B allreduce, ring and recursive
#          doubling, every face against the raw call) at the largest N of --bench-ranks;
#      plus the demo and an example with --device gpu (once);
#   5. writes everything to benchmarks/gpu/<date>-<host>/ with RUN.md: what ran (commands, exit
#      codes, seconds), the versions, the device path, the GPU targets
#      (scripts/gpu_targets.py) and one bench report per transport and MPS state.
# A failing step does not stop the run; the script exits 1 at the end if any step failed.
#   --quick        tests at N = 1, 2; bench allreduce at N = 2 on 8 B, 64 KiB, 1 MiB
#   --transports   default ipc,aware,staged (in this order: under --budget, what matters most
#                  first)                           --mps        default on,off (on runs first)
#   --primitives   default allreduce,allgather,reduce_scatter,bcast
#   --test-ranks   default 1,2,4                    --bench-ranks default 2,4
#   --out DIR      results here instead of benchmarks/gpu/<date>-<host>
#   --pack FILE    also keep OUT packed as FILE (a .tar.gz, remade after every step, so that a
#                  run cut short still leaves what it did) with RUN.md and steps.tsv beside it:
#                  for machines that hand back only a few files (the lent H200: 8)
#   --budget S     the whole run within S seconds of its start: each step's timeout shrinks to
#                  what is left (less MPICOLL_PROOF_RESERVE, default 30 s, kept for the reports
#                  and RUN.md), and a step with under 15 s left is not started but recorded as
#                  skipped; RUN.md lists them. Default: no budget (MPICOLL_PROOF_BUDGET).
# Settings: MPICOLL_GPU_VENV (.venv-gpu), CUPY_SPEC (the CuPy requirement), PYTHON (python3),
#   MPICOLL_NVIDIA_SMI (nvidia-smi), MPICOLL_MPS_CONTROL (nvidia-cuda-mps-control),
#   MPICOLL_BENCH_SIZES (the bench's size options, default --sizes 8,1K,64K,1M,16M,256M -n 10
#   -w 3 -c 1), MPICOLL_STEP_TIMEOUT (seconds per step, default 300; a test that hangs is also
#   stopped by pytest-timeout after MPICOLL_TEST_TIMEOUT, default 120 s).
# MPS: a daemon this script started is stopped at the end, however the run ends (budget spent,
# a failure, a signal); one that starts but cannot serve a CUDA client within 60 s (the
# mps-probe step) is stopped at once and the MPS-on runs are skipped.
# On the lent H200 (15 minutes, start-up included; at most 8 files come back) one command that
# fits, its results kept even if time runs short (run it with a device timeout of 600 s; the
# wheels from `bash scripts/gpu_wheels.sh .whl` here, carried):
#   MPICOLL_STEP_TIMEOUT=180 bash scripts/gpu_proof.sh --wheels .whl --primitives allreduce \
#       --test-ranks 2,4 --budget 480 --out /tmp/proof --pack "$OUT/proof.tar.gz"
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

ARGV=("$@")
QUICK=0 INSTALL=1 OUT="" WHEELS="" PACK="" BUDGET=${MPICOLL_PROOF_BUDGET:-0}
TRANSPORTS_ARG="" MPS_ARG="" PRIMS_ARG="" TRANKS_ARG="" BRANKS_ARG=""
needs() { [[ $2 -ge 2 ]] || { echo "gpu_proof.sh: $1 needs a value" >&2; exit 2; }; }
while (($#)); do
    case $1 in
        --quick) QUICK=1 ;;
        --no-install) INSTALL=0 ;;
        --wheels) needs "$1" $#; WHEELS=$2; INSTALL=2; shift ;;
        --out) needs "$1" $#; OUT=$2; shift ;;
        --pack) needs "$1" $#; PACK=$2; shift ;;
        --budget) needs "$1" $#; BUDGET=$2; shift ;;
        --transports) needs "$1" $#; TRANSPORTS_ARG=$2; shift ;;
        --mps) needs "$1" $#; MPS_ARG=$2; shift ;;
        --primitives) needs "$1" $#; PRIMS_ARG=$2; shift ;;
        --test-ranks) needs "$1" $#; TRANKS_ARG=$2; shift ;;
        --bench-ranks) needs "$1" $#; BRANKS_ARG=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "gpu_proof.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if ! [[ $BUDGET =~ ^[0-9]+$ ]]; then
    echo "gpu_proof.sh: --budget: expected whole seconds (0 = none); got '$BUDGET'" >&2
    exit 2
fi

# list NAME VALUE DEFAULT ALLOWED...: split a comma list into the array NAME, each item checked.
list() {
    local -n arr=$1
    local value=${2:-$3} item ok a
    shift 3
    IFS=, read -r -a arr <<<"$value"
    for item in "${arr[@]}"; do
        ok=0
        for a in "$@"; do [[ $item == "$a" ]] && ok=1; done
        if ((!ok)); then
            echo "gpu_proof.sh: '$item' is not one of: $*" >&2
            exit 2
        fi
    done
}
list TRANSPORTS "$TRANSPORTS_ARG" ipc,aware,staged staged aware ipc
list MPS_STATES "$MPS_ARG" on,off off on
list PRIMS "$PRIMS_ARG" allreduce,allgather,reduce_scatter,bcast allreduce allgather reduce_scatter bcast
if ((QUICK)); then
    list SIZES_T "$TRANKS_ARG" 1,2 1 2 3 4 5 6 7 8
    list SIZES_B "$BRANKS_ARG" 2 2 3 4 5 6 7 8
    [[ -n $PRIMS_ARG ]] || PRIMS=(allreduce)
else
    list SIZES_T "$TRANKS_ARG" 1,2,4 1 2 3 4 5 6 7 8
    list SIZES_B "$BRANKS_ARG" 2,4 2 3 4 5 6 7 8
fi
if [[ -n $WHEELS && ! -d $WHEELS ]]; then
    echo "gpu_proof.sh: --wheels $WHEELS: no such directory" >&2
    exit 2
fi

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
if [[ -n $PACK ]]; then
    mkdir -p "$(dirname "$PACK")"
    PACK=$(cd "$(dirname "$PACK")" && pwd)/$(basename "$PACK")
fi
exec > >(tee -a "$OUT/proof.log") 2>&1
TEE_PID=$!
FAILED=()
T0=$(date +%s)
DEADLINE=$((BUDGET ? T0 + BUDGET : 0))
RESERVE=${MPICOLL_PROOF_RESERVE:-30}
BUDGETED=1         # steps count against --budget (the reports at the end do not)
SKIPPED=()
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# pack: OUT as the --pack archive (written aside, then renamed: a run killed meanwhile leaves the
# last whole one), RUN.md and steps.tsv beside it. Files still being written are taken as they are.
pack() {
    [[ -n $PACK ]] || return 0
    tar czf "$PACK.part" --warning=no-file-changed -C "$(dirname "$OUT")" "$(basename "$OUT")" \
        2>/dev/null || true
    if [[ -s $PACK.part ]]; then mv -f "$PACK.part" "$PACK"; fi
    cp -f "$STEPS" "$(dirname "$PACK")/" 2>/dev/null || true
    [[ -s $OUT/RUN.md ]] && cp -f "$OUT/RUN.md" "$(dirname "$PACK")/"
    return 0
}

# The MPS daemon this script started goes when the script does, however it ends.
MPS_CTL=${MPICOLL_MPS_CONTROL:-nvidia-cuda-mps-control}
MPS_STARTED=0
stop_mps() {
    if ((MPS_STARTED)); then
        echo quit | timeout 30 "$MPS_CTL" >/dev/null 2>&1 || true
        MPS_STARTED=0
    fi
}
trap 'stop_mps; pack' EXIT

# limit: the seconds the next step may take -- the step timeout, or less near the --budget
# deadline; 0 when under 15 s are left (the step is then skipped).
limit() {
    local lim=${STEP_CAP:-$STEP_TIMEOUT} left
    if ((DEADLINE && BUDGETED)); then
        left=$((DEADLINE - $(date +%s) - RESERVE))
        ((left < lim)) && lim=$left
        ((lim < 15)) && lim=0
    fi
    echo "$lim"
}

# step NAME CMD...: run CMD (output to the console and OUT/logs/NAME.log), record exit and time.
step() {
    local name=$1 t0 rc lim
    shift
    mkdir -p "$OUT/logs"
    lim=$(limit)
    if ((lim == 0)); then
        say "step $name: skipped (the --budget of $BUDGET s is spent)"
        printf '%s\t%s\t%s\t%s\n' "$name" "skipped" "0.0" "$*" >>"$STEPS"
        SKIPPED+=("$name")
        LAST_RC=125
        return 0
    fi
    say "step $name: $*"
    t0=$(date +%s.%N)
    set +e
    timeout -k 20 "$lim" "$@" 2>&1 | tee "$OUT/logs/$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    LAST_RC=$rc
    local dt
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$*" >>"$STEPS"
    if ((rc == 0)); then
        say "step $name: ok ($dt s)"
    else
        say "step $name: FAILED with exit $rc ($dt s)$( ((rc == 124)) && echo ": timed out after $lim s")"
        FAILED+=("$name")
    fi
    pack
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
    step "$name" "${WRAP[@]}" env MPIEXEC_TIMEOUT="$(limit)" "${vars[@]}" "$MPIEXEC" -n "$n" "$@"
}
WRAP=()            # a command prefix for mpistep (the aware transport's environment)

# mps_stop_step: stop the MPS daemon this script started, as a recorded step that is never
# skipped for the budget (the daemon must not outlive the run).
mps_stop_step() {
    BUDGETED=0 step mps-stop bash -c 'echo quit | "$1"' _ "$MPS_CTL"
    MPS_STARTED=0
}

say "gpu_proof.sh on $HOST: results in $OUT (quick=$QUICK install=$INSTALL transports=${TRANSPORTS[*]} mps=${MPS_STATES[*]})"
printf '%s\n' "$GPUS"

# --- 2. install -------------------------------------------------------------------------------
if ((INSTALL == 2)); then
    # Offline: the image's packages through a .pth file (a --system-site-packages venv would not
    # see them when the interpreter is itself a venv), the carried wheels, the checkout on the path.
    WHEELS=$(cd "$WHEELS" && pwd)
    step venv "${PYTHON:-python3}" -m venv "$VENV"
    step image-site "$PY" -c 'import site, subprocess, sys
base = subprocess.run([sys.argv[1], "-c", "import site; print(site.getsitepackages()[0])"],
                      capture_output=True, text=True, check=True).stdout.strip()
open(site.getsitepackages()[0] + "/image.pth", "w").write(base + "\n")
print("image packages:", base)' "${PYTHON:-python3}"
    # --force-reinstall: a wheel of a version the image already has would be skipped otherwise.
    step install-wheels bash -c '"$1" -m pip install -q --no-index --no-deps --force-reinstall \
        "$2"/*.whl' _ "$PY" "$WHEELS"
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
elif ((INSTALL)); then
    step venv "${PYTHON:-python3}" -m venv "$VENV"
    step pip-upgrade "$PY" -m pip install -q -U pip setuptools wheel
    step install "$PY" -m pip install -e ".[mpich,gpu-aware,test]" "$CUPY_SPEC"
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
from mpicoll.device import gpu_env as _gpu_env, mps as _mps
info["libucx_wheel"] = _gpu_env.ucx_dir() or "not installed (no aware transport)"
info["mps_daemon_at_start"] = _mps.server_status()
json.dump(info, open(sys.argv[1], "w"), indent=2, default=str)
for k, v in info.items():
    print(f"{k:18}: {v}")
sys.exit(0 if info["cupy_status"][0] else 1)
PY

# --- 4. per MPS state and transport: GPU tests and bench; the demo and an example once -------
TEST_TIMEOUT=${MPICOLL_TEST_TIMEOUT:-120}
if ((QUICK)); then
    read -r -a SWEEP <<<"${MPICOLL_BENCH_SIZES:---sizes 8,64K,1M -n 5 -w 2 -c 1}"
else
    read -r -a SWEEP <<<"${MPICOLL_BENCH_SIZES:---sizes 8,1K,64K,1M,16M,256M -n 10 -w 3 -c 1}"
fi
COMBOS=()          # transport-mps_state pairs that ran, for the reports
DEMOED=0 TESTED=0
# MPS on first: the tests run once, in the first state that starts (they do not depend on it,
# and ranks sharing the GPU run them faster with MPS).
ORDER=()
for mps in on off; do
    [[ " ${MPS_STATES[*]} " == *" $mps "* ]] && ORDER+=("$mps")
done
for mps in "${ORDER[@]}"; do
    if [[ $mps == on ]]; then
        # The daemon must not keep the step's output open (tee would wait for it forever).
        step mps-start bash -c '"$1" -d </dev/null >/dev/null 2>&1' _ "$MPS_CTL"
        if ((LAST_RC != 0)); then
            say "MPS could not be started: the MPS-on runs are skipped"
            continue
        fi
        MPS_STARTED=1
        # A daemon that starts is not yet one that serves: one CUDA client must get through.
        STEP_CAP=60 step mps-probe "$PY" -c 'import cupy; print("MPS client ok:", int(cupy.arange(8).sum().get()))'
        if ((LAST_RC != 0)); then
            say "MPS started but a CUDA client could not use it: stopped, the MPS-on runs are skipped"
            mps_stop_step
            continue
        fi
    fi
    for t in "${TRANSPORTS[@]}"; do
        tag=$t-mps_$mps
        WRAP=()
        if [[ $t == aware ]]; then
            # CUDA-aware MPICH from the libucx wheel: the exports of `python -m mpicoll.gpu env`.
            # (A command substitution that fails inside eval would leave eval "" succeeding.)
            # (One line: the command is recorded in steps.tsv.)
            WRAP=(bash -c 'e=$("$1" -m mpicoll.gpu env) || { echo "$e"; exit 97; }; eval "$e"; shift; exec "$@"' \
                aware-env "$PY")
        fi
        COMBOS+=("$tag")
        if ((!TESTED)); then
            for n in "${SIZES_T[@]}"; do
                # One rank has no peer: its run does not depend on the transport (run once).
                if ((n == 1)) && [[ $t != "${TRANSPORTS[0]}" ]]; then continue; fi
                # The ipc transport's kind (cupy-ipc) asserts the messages were mapped: a
                # transport that silently fell back would pass as cupy. Small calls on host
                # copies do not depend on the transport: first one only.
                xp=cupy
                [[ $t == ipc ]] && xp=cupy-ipc
                [[ $t == "${TRANSPORTS[0]}" ]] && xp=$xp,cupy-host-copy
                mpistep "test-$tag-n$n" "$n" MPICOLL_TEST_XP="$xp" MPICOLL_GPU_TRANSPORT="$t" \
                    "$PY" -m mpi4py -m pytest --with-mpi -q --timeout="$TEST_TIMEOUT" \
                    --timeout-method=thread tests/mpi/test_device.py tests/mpi/test_device_requests.py
            done
        fi
        if ((!DEMOED)); then
            DEMOED=1
            mpistep demo-gpu-n2 2 MPICOLL_GPU_TRANSPORT="$t" "$PY" -m mpicoll.demo --device gpu \
                --sleep-scale 0.05
            mpistep example-all_reduce-gpu-n2 2 MPICOLL_GPU_TRANSPORT="$t" "$PY" \
                examples/all_reduce.py --device gpu
        fi
        for prim in "${PRIMS[@]}"; do
            # Every hand-written algorithm, then native; the nccl and torch.distributed columns
            # (gloo; torch-mpicoll: auto through torch) with the first transport only.
            extra=native
            [[ $t == "${TRANSPORTS[0]}" ]] && extra=native,nccl,gloo,torch-mpicoll
            # (If Python cannot even import mpicoll here, the bench steps fail and say why;
            # the run goes on: no bare command may end it under set -e.)
            algos=$("$PY" -c 'import sys, mpicoll
print(",".join([a for a in mpicoll.algorithms(sys.argv[1]) if a != "native"] + sys.argv[2].split(",")))' \
                "$prim" "$extra" 2>/dev/null) || algos=all
            for n in "${SIZES_B[@]}"; do
                f=$OUT/bench-$prim-$tag-n$n
                mpistep "bench-$prim-$tag-n$n" "$n" MPICOLL_GPU_TRANSPORT="$t" "$PY" -m mpicoll.bench \
                    "$prim" --xp cupy --algorithm "$algos" "${SWEEP[@]}" -J "$f.jsonl" --csv "$f.csv"
            done
        done
        # What one small call costs per face (memo, persistent, nonblocking) against the raw
        # call on the same CuPy arrays: the GPU targets' 8-byte one (N = 4), face by face;
        # at the largest N of --bench-ranks only (device time is short).
        n=${SIZES_B[-1]}
        mpistep "latency-$tag-n$n" "$n" MPICOLL_GPU_TRANSPORT="$t" "$PY" -m mpicoll.bench \
            latency --xp cupy --bytes 8 --algorithm ring,recursive_doubling -n 100 \
            --repeats 3 -J "$OUT/latency-$tag-n$n.jsonl"
        WRAP=()
    done
    TESTED=1
    if [[ $mps == on ]]; then
        mps_stop_step
    fi
done

# --- 5. reports: one per transport and MPS state; the GPU targets --------------------------
BUDGETED=0         # the reserve is for these
for tag in "${COMBOS[@]}"; do
    files=()
    for f in "$OUT"/bench-*-"$tag"-n*.jsonl; do
        # A step killed before its first result leaves only the provenance line.
        [[ -s $f ]] && grep -q '"type": "result"' "$f" && files+=("$f")
    done
    if ((${#files[@]})); then
        step "report-$tag" "$PY" -m mpicoll.bench report "${files[@]}" -o "$OUT/report-$tag.md"
    fi
done
step targets bash -c '"$1" scripts/gpu_targets.py "$2" > "$2/targets.md"' _ "$PY" "$OUT"

# --- 6. RUN.md ---------------------------------------------------------------------------------
{
    echo "# GPU proof run: $HOST, $(date -Is)"
    echo
    echo "Written by \`scripts/gpu_proof.sh${ARGV[*]:+ ${ARGV[*]}}\`;"
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
mps = v.get("mps_daemon_at_start") or {}


def verdict(pair):
    """(ok, why) -> 'yes: why' / 'no: why' (None: not recorded)."""
    ok, why = pair or (None, "not recorded")
    return f"{'yes' if ok else 'no'}: {why}"
rows = [("Python", v.get("python")), ("NumPy", v.get("numpy")), ("mpi4py", v.get("mpi4py")),
        ("MPI library", v.get("mpi_library")), ("CuPy", v.get("cupy", v.get("cupy_error"))),
        ("CUDA runtime / driver", f"{v.get('cuda_runtime')} / {v.get('cuda_driver')}"),
        ("NCCL (cupy.cuda.nccl)", verdict(v.get("nccl_status"))),
        ("CUDA-aware MPI", f"{rep.get('cuda_aware')} (decided by {rep.get('source')}; "
                           f"MPIX_Query_cuda_support={rep.get('mpix_query')}, "
                           f"mpi_memory_alloc_kinds={rep.get('alloc_kinds')})"),
        ("device path", f"**{path.get('path')}** (decided by {path.get('source')}); the "
                        f"library's collectives: {path.get('collectives')}"),
        ("CUDA IPC (the ipc transport)", verdict((path.get("ipc_supported"),
                                                  path.get("ipc_reason")))),
        ("transport (choice: what set it)", f"{path.get('transport')} "
                                             f"({path.get('transport_choice')}: "
                                             f"{path.get('transport_source')})"),
        ("libucx wheel (the aware transport)", v.get("libucx_wheel")),
        ("MPS daemon at the start", verdict((mps.get("running"), mps.get("how"))))]
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
        echo "| $name | $rc$([[ $rc != 0 && $rc != skipped ]] && echo ' **FAILED**') | $dt | \`${cmd//|/\\|}\` |"
    done <"$STEPS"
    echo
    echo "Logs: \`logs/<step>.log\`; the whole run: \`proof.log\`. Bench records:"
    echo "\`bench-<primitive>-<transport>-mps_<off|on>-n<N>.jsonl\` / \`.csv\`."
    echo
    echo "## GPU targets (python scripts/gpu_targets.py)"
    echo
    if [[ -s $OUT/targets.md ]]; then cat "$OUT/targets.md"; else echo "Not computed (see logs/targets.log)."; fi
    echo
    for tag in "${COMBOS[@]}"; do
        echo "## Bench report: transport ${tag%-mps_*}, MPS ${tag##*-mps_} (python -m mpicoll.bench report)"
        echo
        if [[ -s $OUT/report-$tag.md ]]; then cat "$OUT/report-$tag.md"; else echo "No report: no bench step produced records."; fi
        echo
    done
    if ((${#FAILED[@]})); then echo "**Failed steps:** ${FAILED[*]}"; else echo "All steps that ran passed."; fi
    if ((${#SKIPPED[@]})); then
        echo
        echo "**Not run: the --budget of $BUDGET s was spent before:** ${SKIPPED[*]}"
    fi
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
