"""The ``nccl`` column: NCCL's own collectives on the bench's CuPy buffers, as a reference.

With ``--xp cupy`` and ``nccl`` among the algorithms (``--algorithm all``
includes it then), :func:`setup` builds one NCCL communicator for the run
through mpi4py (rank 0's ``nccl.get_unique_id()``, broadcast) and the sweep
times ``nccl`` rows beside mpicoll's, on the same buffers, with the same
untimed check. NCCL calls are queued on the current CUDA stream and return
at once; each timed call synchronises the stream, as mpicoll's calls return
with the result in place.

NCCL has bcast, reduce, allreduce, allgather and reduce_scatter (each
primitive's spec names its NCCL call:
:attr:`mpicoll.calls.spec.Spec.nccl_method`,
:meth:`~mpicoll.calls.spec.Spec.nccl_args`); gather, scatter, alltoall and
barrier have no NCCL collective and are skipped with that reason. The whole
column is skipped, with the reason printed once and recorded in the
provenance, when the buffers are not CuPy's, NCCL is not usable on some
rank, the dtype has no NCCL type, several ranks share one GPU with an NCCL
older than 2.30 (NCCL refuses a communicator with one GPU twice) or the
communicator cannot be created. Every such decision is taken collectively,
so no rank waits in an NCCL call the others never make.

Ranks sharing a GPU with NCCL >= 2.30 on every rank: the column tries
NCCL's multi-rank-per-GPU mode (``NCCL_MULTI_RANK_GPU_ENABLE=1``, set for
the process unless the user set it; the variable's name and the version are
NCCL 2.30's, not yet verified against a 2.30 install);
if the communicator still cannot be created the column is skipped, the
reason saying what was tried. The provenance records ``multi_rank_gpu``.
"""
import os

import numpy as np

from mpicoll.device.arrays import data_ptr

from .specs import Declared

__all__ = ["LABEL", "METHODS", "Unsupported", "Skipped", "Column", "wanted", "setup",
           "dtype_code", "op_code", "shared_gpu_reason", "call_args", "MULTI_RANK_GPU_VAR",
           "MULTI_RANK_GPU_SINCE", "version_text"]

LABEL = "nccl"

#: primitive -> the ``NcclCommunicator`` method that runs it: its spec's ``nccl_method``.
METHODS = Declared("nccl_method")

#: NumPy dtype name -> the ``cupy.cuda.nccl`` constant naming the same type.
_DTYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
           "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
           "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}

_OPS = ("sum", "prod", "min", "max")

#: NCCL's switch for several ranks on one GPU, and the first version that has it
#: (``ncclGetVersion``'s code: major * 10000 + minor * 100 + patch).
MULTI_RANK_GPU_VAR = "NCCL_MULTI_RANK_GPU_ENABLE"
MULTI_RANK_GPU_SINCE = 23000


def version_text(code):
    """NCCL's version code as 'major.minor.patch' ('unknown' for None)."""
    if code is None:
        return "unknown"
    code = int(code)
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    # before 2.9: major*1000 + minor*100
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _version(nccl):
    try:
        return int(nccl.get_version())
    except Exception:  # an unknown version is only provenance
        return None


class Unsupported(ValueError):
    """NCCL cannot run this (the message is the reason shown to the user)."""


def dtype_code(nccl, dtype):
    """The NCCL data type of ``dtype`` (a ``cupy.cuda.nccl`` constant)."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = repr(dtype)
    attr = _DTYPES.get(name)
    if attr is None or not hasattr(nccl, attr):
        raise Unsupported(f"nccl: NCCL has no {name} type (it has "
                          f"{', '.join(n for n, a in _DTYPES.items() if hasattr(nccl, a))})")
    return getattr(nccl, attr)


def _op_name(op):
    """'sum', 'prod', 'min', 'max' for those MPI ops or names; None for any other op."""
    if isinstance(op, str):
        return op.strip().lower() if op.strip().lower() in _OPS else None
    from mpi4py import MPI
    for name in _OPS:
        if op == getattr(MPI, name.upper()):
            return name
    return None


def op_code(nccl, op):
    """The NCCL reduction of ``op`` (MPI.SUM/PROD/MIN/MAX or their names)."""
    name = _op_name(op)
    if name is None:
        what = "a user-defined op" if getattr(op, "is_predefined", True) is False else repr(op)
        raise Unsupported(f"nccl: NCCL has no reduction for {what} (it has {', '.join(_OPS)})")
    return getattr(nccl, "NCCL_" + name.upper())


def shared_gpu_reason(gpu_ids):
    """The skip reason when two ranks share a GPU (``gpu_ids[rank]``: host and bus id)."""
    first = {}
    for rank, gid in enumerate(gpu_ids):
        if gid in first:
            return (f"nccl: ranks {first[gid]} and {rank} share one GPU ({gid}); NCCL needs "
                    f"one GPU per rank (give each rank its own with --device/MPICOLL_DEVICE, "
                    f"or run as many ranks per node as GPUs)")
        first[gid] = rank
    return None


def call_args(case, dtype, op, stream):
    """(method name, arguments) of the NCCL call doing ``case``'s collective.

    ``dtype``/``op`` are NCCL codes, ``stream`` a CUDA stream handle. The
    primitive's spec orders the arguments and gives NCCL's counts
    (:meth:`~mpicoll.calls.spec.Spec.nccl_args`).
    """
    spec = case.spec
    if spec.nccl_method is None:
        raise Unsupported(f"nccl: no NCCL collective for {spec.name}; skipped")

    def ptr(a):
        # reduce: NCCL reads the receive buffer's address on the root only.
        return 0 if a is None else data_ptr(a)
    args = spec.nccl_args(case, ptr(case.send), ptr(case.recv), dtype, op, stream)
    return spec.nccl_method, args


class Skipped:
    """No NCCL column in this run; ``reason`` says why."""

    usable = False

    def __init__(self, reason):
        self.reason = reason

    def info(self):
        """The column's entry in the provenance record: requested, not used, and why."""
        return {"requested": True, "used": False, "reason": self.reason}

    def close(self):
        """Nothing to release."""
        pass


class Column:
    """One NCCL communicator for the run; makes the ``nccl`` calls of each case."""

    usable = True
    reason = None

    def __init__(self, nccl, ncomm, dtype, am, version=None, multi_rank_gpu=False):
        self.nccl, self.ncomm, self.am, self.version = nccl, ncomm, am, version
        self.multi_rank_gpu = multi_rank_gpu
        self.dtype = dtype_code(nccl, dtype)

    def info(self):
        """The column's entry in the provenance record: used, with the NCCL version."""
        return {"requested": True, "used": True, "reason": None, "nccl_version": self.version,
                "multi_rank_gpu": self.multi_rank_gpu}

    def skip_reason(self, spec, op):
        """Why ``spec``'s primitive has no nccl row (None: it has one). Same on every rank."""
        if spec.nccl_method is None:
            return f"nccl: no NCCL collective for {spec.name}; skipped"
        if spec.reduces:
            try:
                op_code(self.nccl, op)
            except Unsupported as exc:
                return f"{exc}; {spec.name} skipped"
        return None

    def call(self, case):
        """A zero-argument callable: one NCCL collective on ``case``'s buffers, completed."""
        op = op_code(self.nccl, case.op) if case.spec.reduces else None
        method, args = call_args(case, self.dtype, op, self.am.stream_ptr())
        bound = getattr(self.ncomm, method)
        sync = self.am.sync

        def run():
            bound(*args)
            sync()          # NCCL only queued the work: wait for it, like for like
        return run

    def close(self):
        """Free the communicator (every rank, at the end of the run)."""
        destroy = getattr(self.ncomm, "destroy", None)
        if destroy is not None:
            destroy()


def wanted(args):
    """True when the run asks for the nccl column (``nccl`` listed, or all with cupy)."""
    algs = getattr(args, "algorithms", ["all"])
    return LABEL in algs or (algs == ["all"] and getattr(args, "xp", "numpy") == "cupy")


def setup(comm, am, dtype, *, nccl=None, status=None):
    """The run's :class:`Column`, or :class:`Skipped` with the reason. Collective.

    ``nccl`` (the ``cupy.cuda.nccl`` module) and ``status`` (a ``() -> (ok,
    reason)`` probe, default :func:`mpicoll.gpu.nccl_status`) are parameters
    so that tests can stand in for them.
    """
    if am.name != "cupy":
        return Skipped(f"nccl: --xp {am.name}: NCCL runs on CuPy device buffers only "
                       "(use --xp cupy)")
    if status is None:
        from mpicoll.gpu import nccl_status as status
    ok, why = status()
    every = comm.allgather((bool(ok), why, am.gpu_id))
    bad = [(r, w) for r, (o, w, _) in enumerate(every) if not o]
    if bad:
        return Skipped(f"nccl: not usable on rank {bad[0][0]}: {bad[0][1]}")
    if nccl is None:
        from cupy.cuda import nccl
    try:
        dtype_code(nccl, dtype)
    except Unsupported as exc:
        return Skipped(str(exc))
    reason = shared_gpu_reason([gid for _, _, gid in every])
    versions = comm.allgather(_version(nccl))
    oldest = None if None in versions else min(versions)
    shared = reason is not None
    if shared:
        if oldest is None or oldest < MULTI_RANK_GPU_SINCE:
            return Skipped(f"{reason}; NCCL {version_text(oldest)} here: NCCL >= "
                           f"{version_text(MULTI_RANK_GPU_SINCE)} could share it "
                           f"({MULTI_RANK_GPU_VAR}=1)")
        os.environ.setdefault(MULTI_RANK_GPU_VAR, "1")     # read by NCCL at communicator init
    uid = err = None
    if comm.Get_rank() == 0:
        try:
            uid = nccl.get_unique_id()
        except Exception as exc:  # any failure is a reason to skip
            err = f"nccl: get_unique_id() failed on rank 0: {exc}"
    uid, err = comm.bcast((uid, err), root=0)
    if err:
        return Skipped(err)
    ncomm = None
    try:
        ncomm = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
    except Exception as exc:  # NcclError and friends
        err = f"{type(exc).__name__}: {exc}"
    errs = comm.allgather(err)
    failed = [(r, e) for r, e in enumerate(errs) if e]
    if failed:
        if ncomm is not None:
            try:
                ncomm.destroy()
            except Exception:  # already skipping; keep the first reason
                pass
        tried = (f" (ranks share a GPU; tried NCCL {version_text(oldest)}'s multi-rank mode, "
                 f"{MULTI_RANK_GPU_VAR}={os.environ.get(MULTI_RANK_GPU_VAR)})" if shared else "")
        return Skipped(f"nccl: NcclCommunicator failed on rank {failed[0][0]}: "
                       f"{failed[0][1]}{tried}")
    return Column(nccl, ncomm, dtype, am, versions[comm.Get_rank()], multi_rank_gpu=shared)
