"""MPS awareness: ranks sharing a GPU, and whether an MPS control daemon serves them.

Ranks that share one GPU without NVIDIA's Multi-Process Service time-slice
it: each context runs alone for its slice, so a small collective waits
milliseconds for its peers' slices (an 8-byte allreduce on CuPy arrays has
been measured at 0.4-2.5 ms without MPS and ~0.25 ms with it, N = 4, one H200).

- :func:`server_status` (this rank alone, no MPI): an MPS control daemon
  serves this process when its control pipe exists in the pipe directory
  (``CUDA_MPS_PIPE_DIRECTORY``, default ``/tmp/nvidia-mps``) -- and, where
  ``/proc`` shows processes, an ``nvidia-cuda-mps-control`` process runs (a
  pipe without one is a stale directory);
- :func:`mps_status` (collective): every rank's host and GPU PCI bus id,
  gathered, say which ranks share a GPU; with no server, ``advice`` names
  :data:`START`, the command that starts one. The last answer is kept for
  :func:`mpicoll.gpu.device_path`.

Both take their probes as arguments, so they are tested without a GPU.
"""
import os

__all__ = ["START", "STOP", "pipe_dir", "server_status", "gpu_key", "mps_status", "last_status"]

#: Starts the MPS control daemon (as the user who runs the job, or root).
START = "nvidia-cuda-mps-control -d"
#: Stops it.
STOP = "echo quit | nvidia-cuda-mps-control"
DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"
_DAEMON = "nvidia-cuda-mps-control"

_last = None


def pipe_dir(env=None):
    """Where MPS clients look for the control daemon's pipe."""
    env = os.environ if env is None else env
    return env.get("CUDA_MPS_PIPE_DIRECTORY", "").strip() or DEFAULT_PIPE_DIR


def _daemon_pids(proc):
    """Pids of MPS control daemons in ``proc`` (a /proc), or None where it cannot be read."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    pids = []
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(os.path.join(proc, e, "comm")) as f:
                name = f.read().strip()
        except OSError:
            continue
        # /proc/PID/comm keeps 15 characters: the daemon and the server it starts both
        # read "nvidia-cuda-mps"; a server runs only under a daemon.
        if name.startswith("nvidia-cuda-mps"):
            pids.append(int(e))
    return pids


def server_status(pipe=None, proc="/proc"):
    """{"running": bool, "how": why}: whether an MPS control daemon serves this process."""
    pipe = pipe or pipe_dir()
    control = os.path.join(pipe, "control")
    has_pipe = os.path.exists(control)
    pids = _daemon_pids(proc)
    if has_pipe and pids is None:
        return {"running": True, "how": f"MPS control pipe {control} ({proc} unreadable)"}
    if has_pipe and pids:
        return {"running": True,
                "how": f"MPS control daemon pid {pids[0]}, pipe {control}"}
    if has_pipe:
        return {"running": False,
                "how": f"{control} exists but no {_DAEMON} process runs (a stale pipe directory)"}
    if pids:
        return {"running": False,
                "how": f"{_DAEMON} runs (pid {pids[0]}) but not on pipe directory {pipe}: set "
                       f"CUDA_MPS_PIPE_DIRECTORY to the daemon's"}
    return {"running": False, "how": f"no MPS control daemon (no {control})"}


def gpu_key(device=None):
    """This rank's GPU as the PCI bus id of CuPy's current (or the given) device."""
    import cupy
    dev = cupy.cuda.runtime.getDevice() if device is None else device
    return cupy.cuda.runtime.deviceGetPCIBusId(dev)


def mps_status(comm=None, key=None, server=None):
    """Which ranks share this rank's GPU, and whether MPS serves them.

    Collective over ``comm`` (default COMM_WORLD).

    ``key``: this rank's GPU (default :func:`gpu_key`; None where there is none),
    ``server``: :func:`server_status`'s answer (default: probed here). Returns a
    dict: ``gpu``, ``ranks_on_gpu`` (this rank's GPU), ``max_ranks_per_gpu``
    (any GPU of the communicator), ``shared``, ``mps``, ``mps_how`` and
    ``advice`` (None, or what to do: :data:`START`).
    """
    global _last
    from mpi4py import MPI
    comm = comm or MPI.COMM_WORLD
    if key is None:
        try:
            key = gpu_key()
        except Exception:  # no CuPy or no device: this rank shares nothing
            key = None
    host = MPI.Get_processor_name()
    every = comm.allgather((host, key))
    server = server_status() if server is None else server
    per_gpu = {}
    for h, k in every:
        if k is not None:
            per_gpu[(h, k)] = per_gpu.get((h, k), 0) + 1
    mine = per_gpu.get((host, key), 0) if key is not None else 0
    most = max(per_gpu.values(), default=0)
    advice = None
    if mine > 1 and not server["running"]:
        advice = (f"{mine} ranks share GPU {key} without an MPS server: their kernels take turns "
                  f"on the GPU and small collectives wait for each other's time slices. Start "
                  f"one on this node before the job: `{START}` (stop: `{STOP}`; every rank "
                  f"and the daemon need the same CUDA_MPS_PIPE_DIRECTORY)")
    _last = {"gpu": key, "ranks_on_gpu": mine, "max_ranks_per_gpu": most, "shared": mine > 1,
             "mps": server["running"], "mps_how": server["how"], "advice": advice,
             "start": START}
    return dict(_last)


def last_status():
    """The last :func:`mps_status` answer on this rank, or None."""
    return None if _last is None else dict(_last)
