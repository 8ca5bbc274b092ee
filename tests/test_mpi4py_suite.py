"""mpi4py's own collective test modules, unchanged, on ``P2PComm(MPI.COMM_WORLD)``.

The test modules come from mpi4py's source distribution for the installed
version, fetched with pip into ``build/mpi4py-tests/`` on first use (they are
not kept in this repository); ``tests/support/mpi4py_suite.py`` runs them under
mpiexec with the world communicator replaced by the drop-in (see its
docstring). A failed download skips with the reason, except under ``CI=true``,
where it fails.

In the full run only (``python -m pytest --full``, CI; it downloads mpi4py's sdist): four
bounded launches, sized for a 2-core machine:

- N=2: everything — every module (blocking, nonblocking, persistent,
  zero-length, pickle), the ``...World`` classes and their ``...WorldDup``
  twins (``P2PComm.Dup``), every type code of every array backend
  (array.array, NumPy, DLPack-only and CAI-only objects): ~30 s;
- N=3 (ranks > cores, a non-power of two): every module and class, with
  the type codes limited to ``i`` (int) and ``G`` (complex long double:
  32-byte elements, which DLPack carries as 2 lanes of long double);
- N=3 again with the same type codes and the ``shm`` algorithms chosen for
  every primitive that has one (the report must show them run);

on MPICH (this venv), and N=2 with those two type codes on Open MPI (the
venv of ``tests/support/mpifamily.py``; skipped with the reason where it cannot be
built).

``MPICOLL_MPI4PY_FULL=1`` (with ``--full``; ~1 h): every module, class and type code at N = 1..5 on
both families (MPICH on the 2-core VM, 2026-12-01: 12, 28, 232, 234 and
668 s; benchmarks/mpi4py_suite/README.md has the recorded runs).
``MPICOLL_MPI4PY_TIMEOUT`` overrides the per-launch limit.
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import pytest
from launch import ROOT, run_mpi, timed_out

pytestmark = pytest.mark.full

RUNNER = os.path.join(ROOT, "tests", "support", "mpi4py_suite.py")
CACHE = os.path.join(ROOT, "build", "mpi4py-tests")
FULL = os.environ.get("MPICOLL_MPI4PY_FULL", "") not in ("", "0")
ON_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")

ALL = "cco_buf,cco_vec,cco_nb_buf,cco_nb_vec,cco_pr_buf,cco_pr_vec,msgzero,cco_obj"
SHM = ("allreduce", "reduce_scatter", "reduce", "bcast", "gather", "scatter", "allgather",
       "alltoall", "barrier")
if FULL:
    LAUNCHES = {("mpich", n): [] for n in (1, 2, 3, 4, 5)}
    LAUNCHES.update({("openmpi", n): [] for n in (1, 2, 3, 4, 5)})
    TIMEOUT = 3600
else:
    LAUNCHES = {
        ("mpich", 2): ["--modules", ALL],
        ("mpich", 3): ["--modules", ALL, "--typecodes", "i,G"],
        ("openmpi", 2): ["--modules", ALL, "--typecodes", "i,G"],
        # the shared-memory algorithms forced wherever there is one (N=3: more ranks than cores)
        ("mpich", 3, "shm"): ["--modules", ALL, "--typecodes", "i,G",
                              *[a for p in SHM for a in ("--choose", f"{p}=shm")]],
    }
    TIMEOUT = 600
TIMEOUT = int(os.environ.get("MPICOLL_MPI4PY_TIMEOUT", TIMEOUT))
DOWNLOAD_TIMEOUT = 600


def _unavailable(why):
    if ON_CI:
        pytest.fail(f"CI=true and mpi4py's test modules could not be fetched: {why}")
    pytest.skip(f"mpi4py's test modules could not be fetched: {why}")


def _version():
    import mpi4py
    return mpi4py.__version__


@pytest.fixture(scope="session")
def mpi4py_tests():
    """mpi4py's test/ directory for the installed version (fetched once into build/)."""
    version = _version()
    top = os.path.join(CACHE, f"mpi4py-{version}")
    testdir = os.path.join(top, "test")
    if os.path.exists(os.path.join(testdir, "test_cco_buf.py")):
        return testdir
    os.makedirs(CACHE, exist_ok=True)
    sdist = os.path.join(CACHE, f"mpi4py-{version}.tar.gz")
    if not os.path.exists(sdist):
        # --no-binary mpi4py (not :all:): only mpi4py as an sdist; its build requirements
        # (for pip's metadata step) come as wheels, in seconds rather than minutes.
        cmd = [sys.executable, "-m", "pip", "download", f"mpi4py=={version}", "--no-deps",
               "--no-binary", "mpi4py", "--disable-pip-version-check", "--retries", "10",
               "--timeout", "60", "-d", CACHE]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            _unavailable(f"pip download took over {DOWNLOAD_TIMEOUT} s")
        if proc.returncode != 0 or not os.path.exists(sdist):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
            _unavailable(f"`{' '.join(cmd[2:])}` failed (exit {proc.returncode}):\n{tail}")
    # Only the test/ directory, through a temporary directory so that a half-written
    # extraction is never taken for a cached one.
    prefix = f"mpi4py-{version}/test/"
    with tarfile.open(sdist) as tar, tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        if not members:
            _unavailable(f"{sdist} has no {prefix} directory")
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp, members=members, **kwargs)
        os.makedirs(top, exist_ok=True)
        try:
            os.replace(os.path.join(tmp, prefix.rstrip("/")), testdir)
        except OSError:
            if not os.path.exists(os.path.join(testdir, "test_cco_buf.py")):
                raise
    return testdir


def _expected_faces(names, modules):
    """The overridden methods the chosen modules must call: blocking ones (cco_buf,
    cco_vec), I... ones (cco_nb_*), ..._init ones (cco_pr_*).
    """
    def face(name):
        if name.endswith("_init"):
            return "persistent"
        if name[0] == "I" and name[1:2].islower():
            return "nonblocking"
        return "blocking"
    mods = set(modules.split(","))
    want = set()
    if mods & {"cco_buf", "cco_vec"}:
        want.add("blocking")
    if mods & {"cco_nb_buf", "cco_nb_vec"}:
        want.add("nonblocking")
    if mods & {"cco_pr_buf", "cco_pr_vec"}:
        want.add("persistent")
    return [n for n in names if face(n) in want]


@pytest.mark.parametrize("case", sorted(LAUNCHES, key=str), ids=lambda c: "-".join(map(str, c)))
def test_mpi4py_collective_tests_on_p2pcomm(case, mpi4py_tests, family_python, tmp_path):
    family, n = case[:2]
    python, why = family_python(family)
    if python is None:
        pytest.skip(f"no {family} environment: {why}")
    extra = LAUNCHES[case]
    out_json = tmp_path / "report.json"
    argv = [python, "-m", "mpi4py", RUNNER, mpi4py_tests, "--failfast",
            "--json", str(out_json), *extra]
    proc = run_mpi(n, argv, timeout=TIMEOUT, python=python)
    out = proc.stdout + proc.stderr
    assert not timed_out(proc), (
        f"mpi4py's tests on P2PComm at N={n} hung until the {TIMEOUT} s limit "
        f"({proc.elapsed:.0f} s):\n{out[-20000:]}")
    assert proc.returncode == 0 and out_json.exists(), (
        f"mpi4py's tests on P2PComm at N={n} failed (exit {proc.returncode}):\n{out[-20000:]}")
    rep = json.loads(out_json.read_text())
    bad = {t: v for t, v in rep["tests"].items() if v["status"] in ("fail", "error")}
    assert not bad and rep["failures"] == rep["errors"] == 0, out[-20000:]
    modules = extra[extra.index("--modules") + 1] if "--modules" in extra else ALL
    for m in modules.split(","):
        info = rep["modules"][m]
        assert info["classes"] and info.get("pass", 0) > 0, (m, info)
    # The drop-in was used, not bypassed: every overridden method these modules exercise
    # was called on the P2PComm, and ran a hand-written algorithm.
    uncalled = [name for name in _expected_faces(sorted(rep["calls"]), modules)
                if not rep["calls"][name]]
    assert not uncalled, f"overridden methods never called at N={n}: {uncalled}"
    assert rep["native_algorithm_calls"] == 0, rep["algorithms"]
    if n > 1:
        assert rep["sent_msgs"] > 0, rep
    chosen = dict(extra[i + 1].split("=") for i, a in enumerate(extra) if a == "--choose")
    for prim, algo in chosen.items():
        assert rep["algorithms"].get(f"{prim}/{algo}"), (prim, algo, rep["algorithms"])
    secs = ", ".join(f"{m} {rep['modules'][m]['seconds']} s" for m in modules.split(","))
    print(f"{family} N={n}: {rep['passed']} passed, {rep['skipped']} skipped, "
          f"in {proc.elapsed:.1f} s "
          f"({secs})")
