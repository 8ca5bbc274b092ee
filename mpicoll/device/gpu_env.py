"""``python -m mpicoll.gpu env``: the exports that make the PyPI MPICH wheel CUDA-aware.

The ``mpich`` wheel is built with the ch4 device over UCX but without CUDA;
the ``libucx-cu12`` / ``libucx-cu13`` wheel (extra ``gpu-aware``) carries a
UCX built with CUDA transports (``cuda_copy``, ``cuda_ipc``). Loading that
UCX first turns MPICH's point-to-point layer CUDA-aware, from PyPI alone::

    eval "$(python -m mpicoll.gpu env)"
    mpirun -n 4 python -m mpicoll.demo --device gpu

- ``LD_PRELOAD`` of the wheel's ``libucs``, ``libucm``, ``libuct``, ``libucp``,
  ``UCX_MODULE_DIR`` pointing at its transport modules, ``LD_LIBRARY_PATH``
  with its libraries first;
- ``MPIR_CVAR_CH4_NETMOD=ucx``; ``MPIR_CVAR_NOLOCAL=1`` (MPICH's own
  shared-memory path would try ``process_vm_readv`` on device memory);
- ``MPICOLL_CUDA_AWARE=1``: mpicoll hands device arrays to point-to-point
  calls. MPICH's *collectives* still reduce on the CPU, so ``native`` on
  device buffers stays staged (see ``mpicoll.device.arrays.collectives_aware``).

With this set-up mpicoll's ring allreduce has moved 169 GB/s (busbw) at 256 MiB,
N = 2, on one H200 (the measurement, and what is not yet measured, are in
``benchmarks/``).
"""
import importlib.util
import os
import shlex
import sys

__all__ = ["ucx_dir", "aware_env", "ucx_setup", "main"]

_LIBS = ("libucs.so.0", "libucm.so.0", "libuct.so.0", "libucp.so.0")


def ucx_dir():
    """The installed ``libucx`` wheel's package folder, or None."""
    spec = importlib.util.find_spec("libucx")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def aware_env(root=None, preload=None, library_path=None):
    """{variable: value} for CUDA-aware MPICH over the wheel's UCX (``root``: its folder).

    ``LD_LIBRARY_PATH`` gets the wheel's ``lib`` and its vendored libraries
    (``libucx_cu12.libs`` / ``libucx_cu13.libs`` beside it), as in the set-up
    checked on the H200, ahead of ``library_path`` (default: the current value).
    """
    root = root or ucx_dir()
    if root is None:
        raise LookupError("the libucx wheel is not installed: pip install -e '.[gpu-aware]' "
                          "(libucx-cu12 for CUDA 12, libucx-cu13 for CUDA 13)")
    lib = os.path.join(root, "lib")
    missing = [n for n in _LIBS if not os.path.exists(os.path.join(lib, n))]
    if missing:
        raise LookupError(f"{lib}: the libucx wheel lacks {', '.join(missing)}")
    libs = ":".join(os.path.join(lib, n) for n in _LIBS)
    preload = os.environ.get("LD_PRELOAD", "") if preload is None else preload
    site = os.path.dirname(os.path.abspath(root))
    vendored = sorted(os.path.join(site, d) for d in os.listdir(site)
                      if d.startswith("libucx_cu") and d.endswith(".libs"))
    library_path = os.environ.get("LD_LIBRARY_PATH", "") if library_path is None else library_path
    return {
        "LD_LIBRARY_PATH": ":".join([lib] + vendored + ([library_path] if library_path else [])),
        "LD_PRELOAD": libs + (":" + preload if preload else ""),
        "UCX_MODULE_DIR": os.path.join(lib, "ucx"),
        "MPIR_CVAR_CH4_NETMOD": "ucx",
        "MPIR_CVAR_NOLOCAL": "1",
        "MPICOLL_CUDA_AWARE": "1",
    }


def ucx_setup():
    """What :func:`aware_env` set up in this environment, or None.

    A libucx wheel's ``libucp`` in ``LD_PRELOAD`` and MPICH's UCX netmod chosen -- MPICH
    CUDA-aware in point-to-point only. The text names the preloaded folder.
    """
    preload = os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
    ucp = next((p for p in preload if os.path.basename(p) == _LIBS[-1] and "libucx" in p), None)
    if ucp is None or os.environ.get("MPIR_CVAR_CH4_NETMOD", "").strip().lower() != "ucx":
        return None
    return f"UCX point-to-point: {os.path.dirname(ucp)} preloaded, MPIR_CVAR_CH4_NETMOD=ucx"


def main(argv):
    """``python -m mpicoll.gpu env``: print the exports of :func:`aware_env`; the exit status."""
    usage = ("usage: python -m mpicoll.gpu env   (prints the exports for CUDA-aware MPICH "
             "from PyPI; use: eval \"$(python -m mpicoll.gpu env)\")")
    if argv in (["--help"], ["-h"]):
        print(usage)
        return 0
    if argv[:1] != ["env"] or len(argv) > 1:
        # (to stderr: eval "$(python -m mpicoll.gpu envv)" must not run the usage line)
        print(usage, file=sys.stderr)
        return 2
    try:
        env = aware_env()
    except LookupError as exc:
        print(f"echo {shlex.quote(f'mpicoll.gpu env: {exc}')} >&2; false")
        return 1
    for k, v in env.items():
        print(f"export {k}={shlex.quote(v)}")
    return 0
