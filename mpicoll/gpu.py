"""GPU support probes: is CuPy usable, is the MPI library CUDA-aware?

mpi4py 4 has no call for CUDA awareness, so :func:`cuda_aware` asks the
loaded MPI library itself:

1. ``MPICOLL_CUDA_AWARE=0|1`` overrides everything (site knowledge wins);
2. ``MPIX_Query_cuda_support()`` looked up with ctypes in the loaded libmpi
   (MPICH and Open MPI export it; it reports what the build supports);
3. the MPI 4.1 info key ``mpi_memory_alloc_kinds`` of COMM_WORLD, which a
   CUDA-aware library lists as ``cuda:...``.

The PyPI MPICH and Open MPI wheels are built without CUDA: passing them a
device pointer crashes the process, so device buffers must be staged through
host memory there. The CuPy data path itself (staging, device reductions) is
not part of this version: CuPy arrays passed to the collectives get a clear
error (see ``mpicoll._buffers.as_array``).
"""
import ctypes
import os

__all__ = ["cuda_aware", "cuda_aware_report", "cupy_status"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _query_function():
    from mpi4py import MPI
    try:
        lib = ctypes.CDLL(MPI.__file__)
        fn = lib.MPIX_Query_cuda_support
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return fn


def _alloc_kinds():
    from mpi4py import MPI
    try:
        info = MPI.COMM_WORLD.Get_info()
    except MPI.Exception:
        return None
    try:
        return info.Get("mpi_memory_alloc_kinds")
    finally:
        info.Free()


def cuda_aware_report():
    """Dict: the decision and every probe's answer (for provenance and headers)."""
    from mpi4py import MPI
    report = {"override": os.environ.get("MPICOLL_CUDA_AWARE"), "mpix_query": None,
              "alloc_kinds": None, "library": MPI.Get_library_version().splitlines()[0].strip()}
    raw = (report["override"] or "").strip().lower()
    if raw and raw not in _TRUE | _FALSE:
        from ._errors import ArgumentError
        raise ArgumentError(f"MPICOLL_CUDA_AWARE: expected 0 or 1; got {report['override']!r}")
    fn = _query_function()
    if fn is not None:
        report["mpix_query"] = bool(fn())
    kinds = _alloc_kinds()
    report["alloc_kinds"] = kinds
    if raw in _TRUE | _FALSE:
        report["cuda_aware"], report["source"] = raw in _TRUE, "MPICOLL_CUDA_AWARE"
    elif report["mpix_query"] is not None:
        report["cuda_aware"], report["source"] = report["mpix_query"], "MPIX_Query_cuda_support"
    elif kinds is not None:
        names = [k.split(":")[0].strip() for k in kinds.split(",")]
        report["cuda_aware"], report["source"] = "cuda" in names, "mpi_memory_alloc_kinds"
    else:
        report["cuda_aware"], report["source"] = False, "no probe answered (assumed not aware)"
    return report


def cuda_aware():
    """True when device pointers may be handed to MPI directly."""
    return cuda_aware_report()["cuda_aware"]


def cupy_status():
    """(usable, reason): whether CuPy imports and sees a CUDA device."""
    try:
        import cupy
    except ImportError as exc:
        return False, f"cupy is not installed ({exc}); pip install -e '.[gpu]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - any CUDA error means no usable device
        return False, f"cupy cannot reach a CUDA device: {exc}"
    if n < 1:
        return False, "cupy sees no CUDA device"
    return True, f"{n} CUDA device(s)"
