"""Is the loaded MPI library CUDA-aware? The probes, with nothing of mpicoll's device layer.

:mod:`mpicoll.device.arrays` asks them once per process (and caches the answer);
:mod:`mpicoll.gpu` publishes them. Kept apart from both so that neither has
to import the other to reach them. mpi4py 4 has no call for CUDA awareness,
so the loaded library itself is asked (see :func:`cuda_aware_report`).
"""
import ctypes
import os

from mpi4py import MPI

from ..core.errors import ArgumentError
from .gpu_env import ucx_setup

__all__ = ["cuda_aware_report"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _query_function():
    """``MPIX_Query_cuda_support`` of the loaded libmpi, or None where it has none."""
    fn = None
    # mpi4py's extension links libmpi; a libmpi opened with dlopen is found
    # through the process's global symbols instead.
    for lib in (MPI.__file__, None):
        try:
            fn = ctypes.CDLL(lib).MPIX_Query_cuda_support
            break
        except (OSError, AttributeError):
            continue
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return fn


def _alloc_kinds():
    """COMM_WORLD's ``mpi_memory_alloc_kinds`` info value (MPI 4.1), or None."""
    try:
        info = MPI.COMM_WORLD.Get_info()
    except MPI.Exception:
        return None
    try:
        return info.Get("mpi_memory_alloc_kinds")
    finally:
        info.Free()


def cuda_aware_report():
    """Dict: the decision and every probe's answer (for provenance and headers).

    ``ucx``: :func:`mpicoll.device.gpu_env.ucx_setup` (``source`` says "UCX point-to-point"
    when MPICOLL_CUDA_AWARE decided with it).
    """
    report = {"override": os.environ.get("MPICOLL_CUDA_AWARE"), "mpix_query": None,
              "alloc_kinds": None, "library": MPI.Get_library_version().splitlines()[0].strip(),
              "ucx": ucx_setup()}
    raw = (report["override"] or "").strip().lower()
    if raw and raw not in _TRUE | _FALSE:
        raise ArgumentError(f"MPICOLL_CUDA_AWARE: expected 0 or 1; got {report['override']!r}")
    fn = _query_function()
    if fn is not None:
        report["mpix_query"] = bool(fn())
    kinds = _alloc_kinds()
    report["alloc_kinds"] = kinds
    if raw in _TRUE | _FALSE:
        report["cuda_aware"], report["source"] = raw in _TRUE, "MPICOLL_CUDA_AWARE"
        if raw in _TRUE and report["ucx"]:
            report["source"] += " (UCX point-to-point)"
    elif report["mpix_query"] is not None:
        report["cuda_aware"], report["source"] = report["mpix_query"], "MPIX_Query_cuda_support"
    elif kinds is not None:
        names = [k.split(":")[0].strip() for k in kinds.split(",")]
        report["cuda_aware"], report["source"] = "cuda" in names, "mpi_memory_alloc_kinds"
    else:
        report["cuda_aware"], report["source"] = False, "no probe answered (assumed not aware)"
    return report
