"""Launch MPI programs from serial tests: bounded in time, output captured.

``run_mpi(n, [sys.executable, "-m", "mpicoll.demo"], timeout=120)`` runs
``mpiexec -n n ...`` with ``MPIEXEC_TIMEOUT`` so that a hung job is killed by
hydra itself, and returns the CompletedProcess (stdout/stderr as text).
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE_MPI = os.path.join(ROOT, "tests", "mpi")


def mpiexec():
    """The mpiexec next to this Python (the venv's MPICH wheel), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else (shutil.which("mpiexec") or "mpiexec")


def mpi_env(timeout):
    env = dict(os.environ)
    env["MPIEXEC_TIMEOUT"] = str(int(timeout))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_mpi(n, argv, *, timeout=120, cwd=ROOT, env=None):
    """Run ``argv`` on ``n`` ranks; the job is killed after ``timeout`` seconds."""
    full_env = mpi_env(timeout)
    if env:
        full_env.update(env)
    cmd = [mpiexec(), "-n", str(n)] + list(argv)
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout + 30, stdin=subprocess.DEVNULL)
