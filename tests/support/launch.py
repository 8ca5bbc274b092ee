"""Launch MPI programs from serial tests: bounded in time, output captured.

``run_mpi(n, [sys.executable, "-m", "mpicoll.demo"], timeout=120)`` runs
``mpiexec -n n ...`` with ``MPIEXEC_TIMEOUT`` so that a hung job is killed by
the launcher itself (MPICH's hydra and Open MPI's mpirun both honour it), and
returns the CompletedProcess (stdout/stderr as text) with ``elapsed`` (seconds)
and ``timed_out`` (the launcher's time limit ended it) added. ``python=``
picks another environment's interpreter and the ``mpiexec`` beside it (an Open
MPI venv, a system MPI); ``mpicoll`` is then imported from this checkout.

The environment also carries what Open MPI needs on a small machine as root
(allow root, oversubscribe: 8 ranks on 2 cores); MPICH ignores those variables.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE_MPI = os.path.join(ROOT, "tests", "mpi")
#: Test helpers and stand-ins (this module among them): tests/support.
SUPPORT = os.path.join(ROOT, "tests", "support")

#: Open MPI on a 2-core machine as root: allowed, oversubscribed. Open MPI 5 (PRRTE)
#: reads the PRTE_ variable, Open MPI 4 the OMPI_ one; MPICH reads neither.
OPENMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
               "OMPI_MCA_rmaps_base_oversubscribe": "1"}

#: What launchers print when their time limit (MPIEXEC_TIMEOUT) ends a job.
TIMEOUT_TEXTS = ("APPLICATION TIMED OUT",                               # MPICH hydra
                 "time limit for job execution has been reached")       # Open MPI 4 and 5


def mpiexec(python=None):
    """The mpiexec next to ``python`` (default: this one; the venv's MPI wheel), else on PATH."""
    here = os.path.join(os.path.dirname(python or sys.executable), "mpiexec")
    return here if os.path.exists(here) else (shutil.which("mpiexec") or "mpiexec")


def mpi_env(timeout, python=None):
    env = dict(os.environ)
    env["MPIEXEC_TIMEOUT"] = str(int(timeout))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("PYTEST_ADDOPTS", None)
    for k, v in OPENMPI_ENV.items():
        env.setdefault(k, v)
    # abspath, not realpath: a venv's python is a symlink to the same interpreter binary.
    if python and os.path.abspath(python) != os.path.abspath(sys.executable):
        # Another environment: this checkout's mpicoll, that environment's everything else.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        env["PATH"] = os.pathsep.join((os.path.dirname(python), env.get("PATH", "")))
        env.pop("VIRTUAL_ENV", None)
    return env


def timed_out(proc):
    """Whether the launcher's time limit (or ours) ended the job: any launcher, no output format
    needed (the elapsed time says it), the known texts as well.
    """
    if getattr(proc, "timed_out", False):
        return True
    out = (proc.stdout or "") + (proc.stderr or "")
    return any(t in out for t in TIMEOUT_TEXTS)


def run_mpi(n, argv, *, timeout=120, cwd=ROOT, env=None, python=None, launcher=None,
            mpiexec_args=()):
    """Run ``argv`` on ``n`` ranks; the job is killed after ``timeout`` seconds.

    ``launcher`` names the mpiexec/mpirun to use (default: the one beside ``python``).

    The launcher's own limit ends a hung job first; 30 s later the whole process
    group (launcher and ranks) is killed, so nothing outlives the test.
    """
    full_env = mpi_env(timeout, python)
    if env:
        full_env.update(env)
    cmd = [launcher or mpiexec(python), "-n", str(n), *mpiexec_args] + list(argv)
    return run_bounded(cmd, timeout, full_env, cwd)


def run_bounded(cmd, timeout, env, cwd=ROOT):
    """Run a launcher command whose own limit is ``timeout`` (``MPIEXEC_TIMEOUT`` in ``env``).

    30 s past it the whole process group is killed. Returns the CompletedProcess
    (text output) with ``elapsed`` and ``timed_out`` added.
    """
    t0 = time.monotonic()
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                          start_new_session=True) as p:
        killed = False
        try:
            out, err = p.communicate(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            killed = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
    proc = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    proc.elapsed = time.monotonic() - t0
    # Ended at (or past) the limit: the launcher's timeout, whatever it printed.
    proc.timed_out = killed or (proc.returncode != 0 and proc.elapsed >= timeout - 0.5)
    return proc
