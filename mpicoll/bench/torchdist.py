"""The torch.distributed columns: ``gloo`` and ``torch-mpicoll``, on the bench's own buffers.

What a PyTorch user would otherwise call, and what calling mpicoll through
torch costs:

- ``gloo``: torch.distributed's gloo backend (on CUDA tensors gloo has
  allreduce and broadcast only; on CPU tensors every primitive below);
- ``torch-mpicoll``: the ``"mpicoll"`` backend (:mod:`mpicoll.torch`), whose
  calls run the algorithm ``auto`` picks, or the one named as
  ``torch-mpicoll:ALGORITHM`` (e.g. ``torch-mpicoll:ring``); its process
  group runs in check mode ``local``, as the bench's own timed rows do, so
  the difference to the plain mpicoll row is the torch layer alone.

With either listed in ``--algorithm``, :func:`setup` makes one process group
per column (the default group is the first; its store is the MPI rendezvous
of :mod:`mpicoll.torch`, served by rank 0 and joined with MPI). Each row
calls torch on tensors sharing the case's arrays (``torch.from_numpy``, DLPack
for CuPy: no copy) with the same untimed check. torch has no out-of-place
all_reduce or reduce: those rows copy the input into the output tensor first
(reduce on a scratch copy off the root: gloo leaves scratch values there), as
a torch user keeping their input would. Each primitive's spec names its torch
call (:attr:`mpicoll.calls.spec.Spec.torch_fn`,
:meth:`~mpicoll.calls.spec.Spec.torch_call`); primitives torch has no call for
(the v-collectives but alltoallv, the scans) are skipped with that reason. The
columns are skipped, the reason printed once and recorded in the provenance,
where torch cannot run on some rank; every such decision is collective.
"""
import numpy as np

from .nccl import Skipped
from .specs import Declared

__all__ = ["LABELS", "wanted", "setup", "torch_dtype", "reduce_op", "Column"]

#: Column labels (``torch-mpicoll:ALGORITHM`` names one algorithm).
LABELS = ("gloo", "torch-mpicoll")
#: primitive -> the torch.distributed function that runs it: its spec's ``torch_fn``.
_PRIMITIVES = Declared("torch_fn")
_DEVICE_FNS = {"gloo": ("all_reduce", "broadcast")}      # what gloo runs on CUDA tensors
#: torch's newer names for the tensor forms (the old ones warn from 2.13 on).
_NEWER = {"all_gather_into_tensor": "all_gather_single",
          "reduce_scatter_tensor": "reduce_scatter_single"}
_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX"}


class Unsupported(ValueError):
    """torch cannot run this (the message is the reason shown to the user)."""


def is_label(label):
    return label in LABELS or label.startswith("torch-mpicoll:")


def wanted(args):
    """The torch column labels the run asks for, in the order given."""
    return [a for a in getattr(args, "algorithms", []) if is_label(a)]


def torch_dtype(torch, dtype):
    """The torch dtype of a NumPy ``dtype`` (Unsupported if torch has none)."""
    name = np.dtype(dtype).name
    got = getattr(torch, name, None)
    if not isinstance(got, torch.dtype):
        raise Unsupported(f"torch: no torch dtype for {name}")
    return got


def reduce_op(dist, opname):
    """``dist.ReduceOp`` of the bench's op name (sum, prod, min, max)."""
    attr = _OPS.get(str(opname).lower())
    if attr is None:
        raise Unsupported(f"torch: torch.distributed has no reduction for {opname!r} "
                          f"(it has {', '.join(_OPS)})")
    return getattr(dist.ReduceOp, attr)


class Column:
    """One torch process group; makes the calls of one column's rows."""

    usable = True
    reason = None

    def __init__(self, label, torch, dist, group, am, algorithm=None):
        self.label, self.torch, self.dist, self.group, self.am = label, torch, dist, group, am
        self.algorithm = algorithm
        self.backend = "gloo" if label == "gloo" else "mpicoll"

    def info(self):
        """The column's entry in the provenance record: used, with torch's version and backend."""
        return {"requested": True, "used": True, "reason": None,
                "torch_version": self.torch.__version__, "backend": self.backend,
                "algorithm": self.algorithm, "device": self.am.name == "cupy"}

    def skip_reason(self, spec, op):
        """Why ``spec``'s primitive has no row in this column (None: it has one)."""
        if self.algorithm is not None:
            import mpicoll
            if self.algorithm not in mpicoll.algorithms(spec.name):
                return f"{self.label}: {spec.name} has no algorithm {self.algorithm!r}; skipped"
        fn, device = spec.torch_fn, self.am.name == "cupy"
        if fn is None or (device and fn not in _DEVICE_FNS.get(self.label, (fn,))):
            what = "on CUDA tensors " if fn is not None else ""
            return f"{self.label}: torch.distributed has no {spec.name} call {what}here; skipped"
        return None

    def _fn(self, name):
        newer = getattr(self.dist, _NEWER.get(name, ""), None)
        return newer or getattr(self.dist, name)

    def _t(self, a):
        if a is None:
            return None
        return self.torch.from_dlpack(a) if self.am.name == "cupy" else self.torch.from_numpy(a)

    def call(self, case):
        """A zero-argument callable: one torch collective on ``case``'s buffers, completed."""
        spec = case.spec
        if spec.torch_fn is None:
            raise Unsupported(f"{self.label}: no row for {spec.name}")
        send, recv = self._t(case.send), self._t(case.recv)
        op = reduce_op(self.dist, case.opname) if spec.reduces else None
        run = spec.torch_call(case, self._fn(spec.torch_fn), send, recv, op, self.group)
        if send is None and recv is None:
            return run          # no buffers (barrier): no device work to wait for
        sync = self.am.sync

        def synced():
            run()
            sync()
        return synced

    def close(self):
        """Nothing to release."""
        pass


def _import():
    import torch
    import torch.distributed as dist
    if not dist.is_available():
        raise ImportError("torch.distributed is not available in this torch build")
    import mpicoll.torch  # noqa: F401  (the "mpicoll" backend and the MPI rendezvous)
    return torch, dist


def setup(comm, am, dtype, opname, labels, *, timeout_s=120):
    """The columns for ``labels`` and a closer that destroys the process groups.

    The columns: {label: :class:`Column` or :class:`mpicoll.bench.nccl.Skipped`}.
    Collective over ``comm`` (COMM_WORLD's ranks).
    """
    from datetime import timedelta
    err = mods = None
    try:
        mods = _import()
        torch_dtype(mods[0], dtype)
        reduce_op(mods[1], opname)
        if "gloo" in labels and not mods[1].is_gloo_available():
            raise ImportError("this torch build has no gloo backend")
        if am.name == "cupy":       # the columns view the device arrays through DLPack
            try:
                mods[0].from_dlpack(am.empty(1, np.dtype(dtype)))
            except Exception as exc:  # e.g. a CuPy without DLPack
                raise Unsupported(f"torch cannot view these device arrays (DLPack): "
                                  f"{type(exc).__name__}: {exc}") from None
    except Unsupported as exc:
        err = str(exc)
    except Exception as exc:  # no torch: a reason to skip
        err = f"torch is not usable: {type(exc).__name__}: {exc}"
    errs = comm.allgather(err)
    bad = [(r, e) for r, e in enumerate(errs) if e]
    if bad:
        why = f"{bad[0][1]} (rank {bad[0][0]}); torch columns skipped"
        return {label: Skipped(why) for label in labels}, lambda: None
    torch, dist = mods
    import mpicoll
    import mpicoll.torch as mt
    if comm.Get_size() != mt.MPI.COMM_WORLD.Get_size():
        why = "torch columns need the whole of MPI.COMM_WORLD; skipped"
        return {label: Skipped(why) for label in labels}, lambda: None
    timeout = timedelta(seconds=timeout_s)
    first = "gloo" if "gloo" in labels else "mpicoll"
    if not dist.is_initialized():
        dist.init_process_group(first, init_method="mpi://", timeout=timeout)
    cols = {}
    for label in labels:
        algorithm = label.partition(":")[2] or None
        if label == "gloo":
            group = None if first == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
        else:
            opts = mt.Options(algorithms={p: algorithm for p in _PRIMITIVES
                                          if algorithm in mpicoll.algorithms(p)}
                              if algorithm else None, check="local")
            group = dist.new_group(backend="mpicoll", pg_options=opts, timeout=timeout)
        cols[label] = Column(label, torch, dist, group, am, algorithm)

    def close():
        try:
            dist.destroy_process_group()
        except Exception:  # the run is over either way
            pass
    return cols, close
