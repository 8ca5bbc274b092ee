"""GPU support probes: whether CuPy is usable, whether the MPI library is CUDA-aware.

mpi4py 4 has no call for CUDA awareness, so :func:`cuda_aware` asks the
loaded MPI library itself:

1. ``MPICOLL_CUDA_AWARE=0|1`` overrides everything (site knowledge wins);
2. ``MPIX_Query_cuda_support()`` looked up with ctypes in the loaded libmpi
   (MPICH and Open MPI export it; it reports what the build supports);
3. the MPI 4.1 info key ``mpi_memory_alloc_kinds`` of COMM_WORLD, which a
   CUDA-aware library lists as ``cuda:...``.

Under the exports of ``python -m mpicoll.gpu env`` (the libucx wheel's UCX
preloaded, MPICH's UCX netmod) the report's ``ucx`` and its ``source`` say
"UCX point-to-point": CUDA-aware in point-to-point only, so the library's
own collectives stay staged (``device_path()["collectives"]``).

The PyPI MPICH and Open MPI wheels are built without CUDA: passing them a
device pointer crashes the process, so there every message of a CuPy buffer
is staged through reusable pinned host memory (``mpicoll.device.arrays``).
Between ranks of one node, the ``ipc`` transport (:mod:`mpicoll.device.ipc`) maps
the peer's device memory through CUDA IPC instead, with any MPI library:
:func:`set_transport` / ``MPICOLL_GPU_TRANSPORT=auto|ipc|aware|staged``
chooses. :func:`device_path` says which path device buffers take, and
``mpicoll.traffic()`` records it per call (``CallTraffic.path``, and per
transport in ``CallTraffic.paths``).

Device selection: :func:`select_device` puts each rank on GPU
``local_rank % device_count`` (local rank from ``SLURM_LOCALID``,
``OMPI_COMM_WORLD_LOCAL_RANK``, ``MPI_LOCALRANKID``, ``PMI_LOCAL_RANK``,
``MV2_COMM_WORLD_LOCAL_RANK`` or an MPI shared-memory split), or on the device
``MPICOLL_DEVICE`` names; several ranks may share one GPU.
"""
import os

from .core.errors import ArgumentError
from .device import arrays as _device
from .device.arrays import release_staging, set_cuda_aware, set_transport, staging_stats
from .device.cuda_probe import cuda_aware_report

__all__ = ["cuda_aware", "cuda_aware_report", "cupy_status", "device_path", "set_cuda_aware",
           "staging_stats", "release_staging", "local_rank", "device_precheck", "no_gpu_reason",
           "select_device", "nccl_status", "set_transport", "ipc_stats", "mps_status"]


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
    except Exception as exc:  # any CUDA error means no usable device
        return False, f"cupy cannot reach a CUDA device: {exc}"
    if n < 1:
        return False, "cupy sees no CUDA device"
    return True, f"{n} CUDA device(s)"


def device_path(buf=None):
    """How device buffers reach MPI: a dict with ``path`` and why.

    ``path`` is ``"cuda-aware"`` (device pointers handed to MPI after a
    stream synchronisation) or ``"staged"`` (copied through pinned host
    memory); with ``buf`` a NumPy array it is ``"host"``. ``source`` names
    what decided (``set_cuda_aware``, ``MPICOLL_CUDA_AWARE`` or a probe). It
    is the decision the collectives use: made once per process and cached
    (``set_cuda_aware(None)`` makes it again). ``collectives`` says the same
    for the MPI library's own collectives (``native``), decided apart: a
    library CUDA-aware in point-to-point only gets them staged.

    ``mps``: whether an MPS control daemon serves this process (``running``,
    ``how``), and, once :func:`mps_status` has run (collective), whether this
    rank shares its GPU (``shared``, ``ranks_on_gpu``) and, when it does with
    no server, ``advice`` naming the command that starts one.

    ``host_copy_max``: calls moving at most this many bytes per rank (blocking,
    nonblocking, persistent) run on host copies of their arrays
    (``MPICOLL_GPU_HOST_COPY``; 0: never).

    ``transport`` is what moves device messages between ranks of this rank's
    node: ``"ipc"`` (CUDA IPC mappings, :mod:`mpicoll.device.ipc`) or ``path``;
    ``path`` stays how device buffers reach MPI (for peers on other nodes,
    and for all of them without IPC). ``transport_choice`` is the choice in
    force (:func:`set_transport`, ``MPICOLL_GPU_TRANSPORT``: auto, ipc,
    aware, staged) and ``transport_source`` what set it; ``ipc_supported``
    and ``ipc_reason`` say whether the array library here can use IPC.
    """
    if buf is not None and _device.adapter_of(buf) is None:
        return {"path": "host", "cuda_aware": None, "source": "NumPy array (host memory)"}
    aware, source = _device.cuda_aware_decision()
    coll, coll_source = _device.collectives_aware()
    choice, choice_source = _device.transport_choice()
    path = "staged" if choice == "staged" or not (aware or choice == "aware") else "cuda-aware"
    ipc_ok, ipc_why = _ipc_support(buf)
    used = choice == "ipc" or (choice == "auto" and ipc_ok)
    if choice == "ipc" and not ipc_ok:
        ipc_why += f"; same-node messages go inline ({path}) after a header"
    try:
        host_copy = _device.host_copy_max()
    except ArgumentError as exc:
        host_copy = str(exc)
    return {"path": path, "cuda_aware": aware, "source": source, "host_copy_max": host_copy,
            "collectives": "cuda-aware" if coll else "staged", "collectives_source": coll_source,
            "transport": "ipc" if used else path, "transport_choice": choice,
            "transport_source": choice_source, "ipc_supported": ipc_ok, "ipc_reason": ipc_why,
            "mps": _mps_info()}


def _mps_info():
    from .device import mps as _mps
    info = _mps.server_status()
    last = _mps.last_status()
    if last is not None:
        info.update({k: last[k] for k in ("gpu", "shared", "ranks_on_gpu", "advice")})
        if last["shared"] and not info["running"] and not last["advice"]:
            info["advice"] = f"start an MPS server: `{_mps.START}`"
    info["start"] = _mps.START
    return info


def mps_status(comm=None):
    """Whether this rank shares its GPU with others, and whether MPS serves them.

    Collective. A dict (see :func:`mpicoll.device.mps.mps_status`): ``shared``,
    ``ranks_on_gpu``, ``mps`` (an MPS control daemon serves this process), ``advice``
    (None, or the command that starts one, ``nvidia-cuda-mps-control -d``). The answer is
    kept: :func:`device_path` reports it from then on.
    """
    from .device import mps as _mps
    return _mps.mps_status(comm)


def _ipc_support(buf=None):
    """(ok, why) for ``buf``'s array library, or CuPy's when no buffer is given."""
    if buf is not None:
        return _device.ipc_support(_device.adapter_of(buf))
    ok, why = cupy_status()
    if not ok:
        return False, why
    from .device.arrays import CupyAdapter
    return _device.ipc_support(CupyAdapter())


def ipc_stats(comm=None):
    """This rank's IPC counters on ``comm`` (default COMM_WORLD).

    ``{(library, device): {opens, closes, hits, invalidated, evicted, fused, nacks,
    sent_ipc, recv_ipc, ..., mappings}}`` -- empty before the first device call on it.
    Messages that fell back count as ``not_exportable`` (sender) or ``open_failed``
    (receiver: its mapping failed or was not the peer's allocation), with the first reason
    of each in ``why_not_exportable`` / ``why_open_failed``; ``unverified``: mappings the
    driver could not check.
    """
    from mpi4py import MPI

    from .device.ipc import ipc_stats as stats
    from .engine.context import existing_private_comm
    pcomm = existing_private_comm(comm if comm is not None else MPI.COMM_WORLD)
    return {} if pcomm is None else stats(pcomm)


_LOCAL_ENV = ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
              "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")


def local_rank(comm=None):
    """(local rank, how it was found): this process's index among the ranks on its node.

    Launcher variables first (no communication); otherwise an
    ``MPI_COMM_TYPE_SHARED`` split of ``comm`` (collective: call it on every rank).
    """
    found = _launcher_local_rank()
    return found if found is not None else (_node_rank_size(comm)[0], "MPI shared-memory split")


def _launcher_local_rank():
    for var in _LOCAL_ENV:
        val = os.environ.get(var, "").strip()
        if val.isdigit():
            return int(val), var
    return None


def _node_rank_size(comm):
    """(rank, size) in an ``MPI_COMM_TYPE_SHARED`` split of ``comm`` (collective)."""
    from mpi4py import MPI
    node = (comm or MPI.COMM_WORLD).Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank(), node.Get_size()
    finally:
        node.Free()


def device_precheck():
    """(usable, reason) for this rank alone, without communicating.

    CuPy, a device, and a valid ``MPICOLL_DEVICE`` -- what entry points check on every rank
    before they agree to run on the GPU.
    """
    ok, why = cupy_status()
    forced = os.environ.get("MPICOLL_DEVICE", "").strip()
    if ok and forced:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
        if not (forced.isdigit() and int(forced) < count):
            return False, (f"MPICOLL_DEVICE={forced!r}: expected a device number in "
                           f"[0, {count - 1}] ({count} CUDA device(s) here)")
    return ok, why


def no_gpu_reason(comm=None):
    """Collective: None when every rank has a usable GPU, else why not.

    The same text on every rank ("no usable GPU on rank 1: ..." / "on any of the 4 ranks:
    ...").

    Every rank runs :func:`device_precheck` on its own and the verdicts are
    exchanged, so an entry point can stop on every rank at the same point
    instead of leaving the ranks with a GPU waiting for the others.
    """
    from mpi4py import MPI
    every = (comm or MPI.COMM_WORLD).allgather(device_precheck())
    bad = [(r, why) for r, (ok, why) in enumerate(every) if not ok]
    if not bad:
        return None
    if len(bad) == len(every):
        where = "this rank" if len(every) == 1 else f"any of the {len(every)} ranks"
    else:
        where = "rank" + ("s " if len(bad) > 1 else " ") + ", ".join(str(r) for r, _ in bad)
    return f"no usable GPU on {where}: {'; '.join(sorted({why for _, why in bad}))}"


def select_device(comm=None, device=None):
    """Make this rank's GPU current; return a dict (device, local rank, how, count).

    ``device`` (or ``MPICOLL_DEVICE``) forces a device id; otherwise rank
    ``local_rank % device_count``, so several ranks share a GPU when there
    are more ranks than GPUs on a node. Raises RuntimeError naming the
    reason when CuPy or a device is missing.
    """
    # The one collective step comes first, so that a rank about to raise
    # below does not leave the others waiting in it.
    node_rank, ranks_on_node = _node_rank_size(comm)
    ok, why = cupy_status()
    if not ok:
        raise RuntimeError(f"no GPU for this rank: {why}")
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
    lrank, how = _launcher_local_rank() or (node_rank, "MPI shared-memory split")
    forced = device if device is not None else os.environ.get("MPICOLL_DEVICE", "").strip() or None
    if forced is not None:
        try:
            dev = int(forced)
        except ValueError:
            raise RuntimeError(f"MPICOLL_DEVICE: expected a device number; got {forced!r}") \
                from None
        if not 0 <= dev < count:
            raise RuntimeError(f"device: expected a number in [0, {count - 1}]; got {dev}")
        how = "MPICOLL_DEVICE" if device is None else "device argument"
    else:
        dev = lrank % count
    cupy.cuda.Device(dev).use()
    try:
        bus = cupy.cuda.runtime.deviceGetPCIBusId(dev)
    except Exception:  # informative only
        bus = None
    return {"device": dev, "local_rank": lrank, "how": how, "device_count": count,
            "ranks_on_node": ranks_on_node, "shared": ranks_on_node > count,
            "pci_bus_id": bus}


def nccl_status():
    """(usable, reason): whether ``cupy.cuda.nccl`` can be imported and is available."""
    ok, why = cupy_status()
    if not ok:
        return False, why
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        return False, f"cupy.cuda.nccl is not importable ({exc})"
    if hasattr(nccl, "available") and not nccl.available:
        return False, "CuPy was built without NCCL (cupy.cuda.nccl.available is False)"
    return True, f"NCCL {nccl.get_version()}"


if __name__ == "__main__":
    import sys

    from .device.gpu_env import main
    raise SystemExit(main(sys.argv[1:]))
