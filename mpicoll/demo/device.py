"""``--device gpu``: every rank on a GPU (or all stopped at once), and header lines saying so."""
from mpi4py import MPI

from .. import gpu
from ..device.arrays import host_copy_max

__all__ = ["NoDevice", "use_device", "device_header"]


class NoDevice(Exception):
    """``--device gpu`` without a usable GPU (exit status 3)."""


def _cuda_version(v):
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else "unknown"


def _gpu_facts(cupy, dev):
    """CuPy/CUDA versions and the device's name (each 'unknown' where CuPy cannot say)."""
    facts = {"cupy": getattr(cupy, "__version__", "unknown"), "runtime": "unknown",
             "driver": "unknown", "name": "unknown"}
    rt = getattr(getattr(cupy, "cuda", None), "runtime", None)
    for key, call in (("runtime", lambda: _cuda_version(rt.runtimeGetVersion())),
                      ("driver", lambda: _cuda_version(rt.driverGetVersion())),
                      ("name", lambda: _text(rt.getDeviceProperties(dev)["name"]))):
        try:
            facts[key] = call()
        except Exception:  # a header fact, never a reason to fail
            pass
    return facts


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def use_device(comm, device):
    """``--device``: None for cpu; for gpu a dict (dev: host -> CuPy array, what each rank uses).

    Collective. Every rank checks CuPy on its own first and the verdicts are
    exchanged, so without a usable GPU anywhere every rank raises
    :class:`NoDevice` at the same point (rank 0 prints it) before any
    device work starts.
    """
    if device != "gpu":
        return None
    why = gpu.no_gpu_reason(comm)
    if why:
        raise NoDevice(f"--device gpu: {why}", True)
    try:
        sel = gpu.select_device(comm)          # collective: every rank gets here
    except RuntimeError as exc:
        raise NoDevice(f"--device gpu: rank {comm.Get_rank()}: {exc}", False) from None
    import cupy
    path = gpu.device_path()
    mps = gpu.mps_status(comm)              # collective: ranks sharing a GPU, MPS on or off
    mine = dict(sel, host=MPI.Get_processor_name(), path=path["path"], source=path["source"],
                transport=path.get("transport", path["path"]), mps=mps,
                **_gpu_facts(cupy, sel["device"]))
    return {"dev": cupy.asarray, "ranks": comm.gather(mine, 0)}


def _ranks_text(ranks):
    """0,1,2,5 -> '0-2,5'."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


def device_header(out, ranks):
    """Rank 0: CuPy/CUDA versions, which GPU each rank uses (grouped), the device path."""
    first = ranks[0]
    versions = sorted({(r["cupy"], r["runtime"], r["driver"]) for r in ranks})
    out.say("device: --device gpu (CuPy arrays); " + "; ".join(
        f"CuPy {c}, CUDA runtime {rt}, driver {d}" for c, rt, d in versions))
    groups = {}
    for rank, r in enumerate(ranks):
        groups.setdefault((r["host"], r["device"], r["name"]), []).append(rank)
    hows = sorted({r["how"] for r in ranks})
    lines = [f"GPU {dev} ({name}) on {h}: rank{'s' if len(rs) > 1 else ''} {_ranks_text(rs)}"
             for (h, dev, name), rs in sorted(groups.items(), key=lambda kv: kv[1][0])]
    shared = [len(rs) for rs in groups.values() if len(rs) > 1]
    forced = any(h in ("MPICOLL_DEVICE", "device argument") for h in hows)
    how = ("forced by " + ", ".join(hows) if forced
           else f"local rank % GPUs per node, local rank from {', '.join(hows)}")
    out.say(f"GPUs ({how}; {first['device_count']} visible per node"
            + (f"; {max(shared)} ranks share a GPU" if shared else "") + "):")
    for line in lines:
        out.say(f"  {line}")
    paths = sorted({(r["path"], r["source"]) for r in ranks})
    for path, source in paths:
        what = ("device buffers handed to MPI directly" if path == "cuda-aware"
                else "every message copied through reusable pinned host buffers")
        who = "" if len(paths) == 1 else " on ranks " + _ranks_text(
            [i for i, r in enumerate(ranks) if (r["path"], r["source"]) == (path, source)])
        out.say(f"device path: {path}{who}: {what} (decided by {source}); "
                f"the native reference runs on host copies of the same data")
    limit = host_copy_max()
    if limit:
        out.say(f"small calls (at most {limit} bytes per rank, MPICOLL_GPU_HOST_COPY) run their "
                f"algorithm on host copies: one copy each way instead of one per message "
                f"(traffic lines say 'host-copy path')")
    transports = sorted({r.get("transport", r["path"]) for r in ranks})
    if "ipc" in transports:
        out.say("transport: ipc between ranks of one node (CUDA IPC: the receiver reads the "
                "sender's memory; reductions fused), the device path above to other nodes")
    advice = next((r["mps"]["advice"] for r in ranks if r.get("mps") and r["mps"].get("advice")),
                  None)
    if any(r.get("mps") for r in ranks):
        state = "on" if all(r["mps"]["mps"] for r in ranks if r.get("mps")) else "off"
        out.say(f"MPS: {state}" + (f" — {advice}" if advice else ""))
