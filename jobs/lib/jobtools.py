"""Helpers for the Slurm job scripts in jobs/ (called by jobs/env.sh).

Standard library and mpi4py, mpicoll where present.

jobtools.py provenance OUT.json          versions of Python, packages, MPI (no MPI init)
jobtools.py mpi-check NTASKS OUT.json    under the launcher: one world of NTASKS ranks? device path
jobtools.py gpu-check OUT.json           CuPy sees GPUs? NCCL? (before any launch)
jobtools.py junit-summary DIR NTASKS     the per-rank JUnit files of test.sh -> tests.json
jobtools.py check-jsonl FILE [MIN]       every line parses, at least MIN records
jobtools.py summary DIR RC               summary.json: steps, files (JSON ones parsed), status
"""
import glob
import json
import os
import platform
import socket
import sys
import time


def _write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)


def _version(mod):
    try:
        m = __import__(mod)
        return getattr(m, "__version__", "?")
    except Exception as exc:  # report, never fail
        return f"not available ({type(exc).__name__})"


def _libmpi_path(MPI):
    """The libmpi that mpi4py loaded (as `python -m mpi4py --mpi-library`)."""
    try:
        import ctypes

        class DLInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

        libc = ctypes.CDLL(None)
        libc.dladdr.restype = ctypes.c_int
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DLInfo)]
        info = DLInfo()
        sym = ctypes.cast(ctypes.CDLL(MPI.__file__).MPI_Init, ctypes.c_void_p)
        return os.fsdecode(info.dli_fname) if libc.dladdr(sym, ctypes.byref(info)) else None
    except Exception as exc:
        return f"unknown ({exc})"


def provenance(out):
    """Print the job's provenance (host, packages, MPI) and write it as JSON to ``out``."""
    import mpi4py
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI
    info = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "virtual_env": os.environ.get("VIRTUAL_ENV"),
        "packages": {m: _version(m) for m in ("mpicoll", "mpi4py", "numpy")},
        "mpi_library_version": MPI.Get_library_version().strip(),
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "mpi_vendor": f"{MPI.get_vendor()[0]} {'.'.join(map(str, MPI.get_vendor()[1]))}",
        "libmpi": _libmpi_path(MPI),
        "MPI4PY_LIBMPI": os.environ.get("MPI4PY_LIBMPI"),
        "slurm": {k: v for k, v in sorted(os.environ.items()) if k.startswith("SLURM_")},
        "settings": {k: v for k, v in sorted(os.environ.items())
                     if k.startswith(("MPICOLL_", "MPI4PY_", "MPIR_CVAR_", "OMPI_MCA_", "UCX_",
                                      "NCCL_", "CUDA_VISIBLE_DEVICES"))},
    }
    for m in ("cupy", "matplotlib"):
        if m in sys.modules or _importable(m):
            info["packages"][m] = _version(m)
    print("packages    : " + "  ".join(f"{k}={v}" for k, v in info["packages"].items()))
    print(f"MPI         : {info['mpi_vendor']} (MPI {info['mpi_standard']}), "
          f"libmpi={info['libmpi']}"
          f"{'  MPI4PY_LIBMPI=' + info['MPI4PY_LIBMPI'] if info['MPI4PY_LIBMPI'] else ''}")
    print(f"MPI library : {info['mpi_library_version'].splitlines()[0]}")
    _write_json(out, info)
    return 0


def _importable(mod):
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def mpi_check(ntasks, out):
    """Every rank: is this one world of ``ntasks`` ranks? Rank 0 writes what it found."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != ntasks:
        # srun without the right --mpi plugin starts ``ntasks`` singletons: each is a world of 1.
        print(f"mpi-check: rank {rank} sees a world of {size} ranks, expected {ntasks}",
              flush=True)
        return 1
    # The Slurm node name where there is one (several slurmd may share a machine), else the host.
    hosts = comm.gather(os.environ.get("SLURMD_NODENAME") or MPI.Get_processor_name(), root=0)
    cuda = None
    try:
        import ctypes
        f = ctypes.CDLL(MPI.__file__).MPIX_Query_cuda_support
        f.restype = ctypes.c_int
        cuda = bool(f())
    except Exception:  # not every MPI has it
        pass
    kinds = None
    try:
        kinds = comm.Get_info().Get("mpi_memory_alloc_kinds")
    except Exception:
        pass
    path = _device_path()
    if rank == 0:
        per_host = {}
        for h in hosts:
            per_host[h] = per_host.get(h, 0) + 1
        info = {"size": size, "ranks_per_node": per_host, "nodes_by_rank": hosts,
                "library": MPI.Get_library_version().strip().splitlines()[0],
                "cuda_aware": cuda, "memory_alloc_kinds": kinds, "device_path": path}
        _write_json(out, info)
        print(f"mpi-check: one world of {size} ranks on {len(per_host)} node(s) {per_host}; "
              f"CUDA-aware MPI: {cuda}; alloc kinds: {kinds}", flush=True)
        if path.get("path"):
            print(f"mpi-check: device (CuPy) buffers take the {path['path']} path "
                  f"(decided by {path['source']})", flush=True)
    return 0


def _device_path():
    """Mpicoll's decision for device buffers: {"path": "cuda-aware"|"staged", "source": ...}.

    Needs no GPU (it asks the MPI library); {"error": ...} where mpicoll cannot say.
    """
    try:
        from mpicoll.gpu import device_path
        got = device_path()
        return {"path": got["path"], "source": got["source"]}
    except Exception as exc:  # provenance, never a failure
        return {"path": None, "error": f"{type(exc).__name__}: {exc}"}


def gpu_check(out):
    """Check that CuPy finds a CUDA device; write what it found to ``out``; the exit status."""
    info = {"host": socket.gethostname(),
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        import cupy
    except Exception as exc:
        print(f"gpu-check: CuPy is not importable ({type(exc).__name__}: {exc}); "
              "install cupy-cuda12x (or the build for your CUDA) in the job's venv", flush=True)
        return 4
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        print(f"gpu-check: CuPy finds no usable CUDA device ({type(exc).__name__}: {exc})",
              flush=True)
        return 3
    info["cupy"] = cupy.__version__
    for key, call in (("cuda_runtime", cupy.cuda.runtime.runtimeGetVersion),
                      ("cuda_driver", cupy.cuda.runtime.driverGetVersion)):
        try:
            v = call()
            info[key] = f"{v // 1000}.{v % 1000 // 10}"
        except Exception as exc:
            info[key] = f"unknown ({type(exc).__name__})"
    info["devices"] = n
    info["names"] = [cupy.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(n)]
    try:
        from cupy.cuda import nccl
        info["nccl"] = nccl.get_version()
    except Exception as exc:
        info["nccl"] = None
        info["nccl_error"] = f"{type(exc).__name__}: {exc}"
    print(f"gpu-check: {n} device(s) {info['names']}; CuPy {info['cupy']} (CUDA runtime "
          f"{info['cuda_runtime']}, driver {info['cuda_driver']}); NCCL {info['nccl']}",
          flush=True)
    _write_json(out, info)
    return 0 if n > 0 else 3


def junit_summary(d, ntasks):
    """Sum the ranks' JUnit files in ``d`` into tests.json; the exit status."""
    import xml.etree.ElementTree as ET
    files = sorted(glob.glob(os.path.join(d, "junit-rank*.xml")))
    ranks, ok = {}, True
    for path in files:
        rank = os.path.basename(path)[len("junit-rank"):-len(".xml")]
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            ranks[rank] = {"error": f"unparsable: {exc}"}
            ok = False
            continue
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        c = {k: sum(int(s.get(k, 0)) for s in suites)
             for k in ("tests", "failures", "errors", "skipped")}
        c["passed"] = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
        ranks[rank] = c
        ok &= c["failures"] == 0 and c["errors"] == 0 and c["passed"] > 0
    if len(files) != ntasks:
        print(f"junit-summary: {len(files)} JUnit files for {ntasks} ranks")
        ok = False
    total = {k: sum(r.get(k, 0) for r in ranks.values())
             for k in ("tests", "passed", "failures", "errors", "skipped")}
    _write_json(os.path.join(d, "tests.json"),
                {"ntasks": ntasks, "ok": ok, "total": total, "ranks": ranks})
    print(f"junit-summary: {len(files)} rank(s); total {total}; {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


def _read_jsonl(path):
    n = 0
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{i}: {exc}") from None
                n += 1
    return n


def check_jsonl(path, minimum=1):
    """Check that ``path`` holds at least ``minimum`` JSON lines; the exit status."""
    try:
        n = _read_jsonl(path)
    except (OSError, ValueError) as exc:
        print(f"check-jsonl: {exc}")
        return 1
    print(f"check-jsonl: {path}: {n} records")
    if n < minimum:
        print(f"check-jsonl: expected at least {minimum}")
        return 1
    return 0


def summary(d, rc):
    """Print the job's steps and their exit statuses from ``d``, ending with ``rc``."""
    steps = []
    sp = os.path.join(d, "steps.jsonl")
    if os.path.exists(sp):
        with open(sp) as f:
            steps = [json.loads(x) for x in f if x.strip()]
    files, bad = {}, []
    for path in sorted(glob.glob(os.path.join(d, "**", "*"), recursive=True)):
        if not os.path.isfile(path):
            continue
        rel = os.path.relpath(path, d)
        if rel in ("summary.json", "job.log"):
            continue
        entry = {"bytes": os.path.getsize(path)}
        try:
            if path.endswith(".jsonl"):
                entry["records"] = _read_jsonl(path)
            elif path.endswith(".json"):
                with open(path) as f:
                    json.load(f)
        except (OSError, ValueError) as exc:
            entry["error"] = str(exc)
            bad.append(rel)
        files[rel] = entry
    failed = [s["step"] for s in steps if s.get("rc")]
    status = "ok" if rc == 0 and not failed and not bad else "failed"
    _write_json(os.path.join(d, "summary.json"), {
        "job_name": os.environ.get("MPICOLL_JOB_NAME"), "job_id": os.environ.get("MPICOLL_JOB_ID"),
        "status": status, "failed_steps": failed, "unparsable_files": bad,
        "seconds": round(time.time() - float(os.environ.get("MPICOLL_T0", time.time())), 2),
        "steps": steps, "files": files})
    if bad:
        print(f"summary: unparsable result files: {bad}")
    return 0 if not bad else 1


def main(argv):
    """Run the subcommand ``argv[0]`` with its arguments; the exit status."""
    if not argv:
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "provenance":
        return provenance(args[0])
    if cmd == "mpi-check":
        return mpi_check(int(args[0]), args[1])
    if cmd == "gpu-check":
        return gpu_check(args[0])
    if cmd == "junit-summary":
        return junit_summary(args[0], int(args[1]))
    if cmd == "check-jsonl":
        return check_jsonl(args[0], int(args[1]) if len(args) > 1 else 1)
    if cmd == "summary":
        return summary(args[0], int(args[1]))
    print(f"unknown command {cmd!r}\n{__doc__}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
