#!/usr/bin/env bash
# scripts/gpu_wheels.sh [DIR]: the wheels scripts/gpu_proof.sh --wheels DIR installs on the GPU
# machine, which has no network (default DIR: .whl, ignored by git; carry it to the device run).
#
# Downloads, for that machine's Python (3.12, manylinux x86_64; PY_VERSION overrides), with no
# dependencies: mpi4py, the mpich wheel (the MPI library), pytest-mpi and libucx-cu13 (UCX built
# with CUDA: the CUDA-aware point-to-point path of `python -m mpicoll.gpu env`). About 58 MB: the
# device run carries at most 64 MiB with the working tree. SPECS overrides the list.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
DIR=${1:-.whl}
PY_VERSION=${PY_VERSION:-3.12}
read -r -a SPECS <<<"${SPECS:-mpi4py==4.1.2 mpich==5.0.2 pytest-mpi==0.6 libucx-cu13}"
mkdir -p "$DIR"
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: \
    --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
    -d "$DIR" "${SPECS[@]}"
du -ch "$DIR"/*.whl | tail -1
ls "$DIR"
