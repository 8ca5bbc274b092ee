"""Run the MPI test suite (tests/mpi) at every world size, on MPICH and Open MPI, from pytest.

Each (family, size) is one ``mpiexec -n N python -m mpi4py -m pytest --with-mpi``
launch with that family's interpreter and launcher: this one's for its own MPI,
otherwise a venv with the other family's PyPI wheel, built on first use
(``tests/support/mpifamily.py``; skipped with the reason where it cannot be built).
Nothing may hang: ``python -m mpi4py`` turns a failing rank into MPI_Abort,
tests/mpi/conftest.py stops a rank at its first failure (the others may be
waiting in that test's collectives) and aborts the job, ``MPIEXEC_TIMEOUT``
(hydra and Open MPI's mpirun alike) kills a deadlocked job, and pytest-timeout
(thread method) dumps the stacks of a hung test. The launch must exit 0 with
every rank reporting a pass.

The quick check (``python -m pytest``) runs this venv's MPI (MPICH from the ``mpich``
extra) at N = 3; the full run
(``python -m pytest --full``, CI) runs MPICH at N = 1, 2, 3, 4, 5, 8 and Open MPI at
N = 2, 3, 4, with simulated nodes at some sizes (NODES: round robin, uneven blocks, one rank
per node).

Settings:
  MPICOLL_TEST_MPI             mpich | openmpi | all (default: all in the full run, this
                               venv's own in the quick one): the families to run
  MPICOLL_TEST_SIZES           sizes for MPICH (default: see FULL_SIZES, QUICK_SIZES)
  MPICOLL_TEST_SIZES_OPENMPI   sizes for Open MPI (each launch costs ~1.5 s more, and 8
                               oversubscribed ranks are slow under it)
  MPICOLL_NODES                simulated nodes for every launch (default: per size, see NODES)
  MPICOLL_TEST_JOB_TIMEOUT     seconds before a launch is killed (default 900)
  MPICOLL_OPENMPI_VENV / MPICOLL_MPICH_VENV   where the other family's venv lives
"""
import os
import re

import fullrun
import mpifamily
import pytest
from launch import HERE_MPI, run_mpi, timed_out

# The full run: MPICH at the sizes the standards name and N = 4 (a power of two with a
# round-robin placement), Open MPI at the small odd and even ones (each launch of the suite
# costs 1-5 minutes on 2 cores). The quick check: MPICH at N = 3 (more ranks than this
# machine's cores, not a power of two); every plan is checked at every N up to 1,024 by
# python -m mpicoll.verify either way.
FULL_SIZES = {"mpich": "1,2,3,4,5,8", "openmpi": "2,3,4"}
QUICK_SIZES = {"mpich": "3", "openmpi": "3"}
DEFAULT_SIZES = FULL_SIZES if fullrun.full() else QUICK_SIZES
SIZE_VARS = {"mpich": "MPICOLL_TEST_SIZES", "openmpi": "MPICOLL_TEST_SIZES_OPENMPI"}
# Generous bounds: 8 ranks share 2 cores. A hang ends the run, it never blocks it.
JOB_TIMEOUT = int(os.environ.get("MPICOLL_TEST_JOB_TIMEOUT", "900"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def families():
    try:
        return fullrun.families()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def sizes(family):
    text = os.environ.get(SIZE_VARS[family], DEFAULT_SIZES[family])
    return [int(s) for s in text.split(",") if s.strip()]


CASES = [pytest.param(f, n, id=f"{f}-{n}") for f in families() for n in sizes(f)]

# Simulated nodes (MPICOLL_NODES, mpicoll.core.topology) at some sizes, so that the generated
# matrix runs the node-aware algorithms across nodes too: round robin (cyclic), uneven blocks,
# one rank per node (round-robin placements also run in tests/mpi/test_hierarchical.py, at
# every size, and across netns hosts). Other sizes run as one node, as this machine is.
NODES = {("mpich", 4): "cyclic:2", ("mpich", 5): "2,1,2", ("mpich", 8): "3",
         ("openmpi", 3): "1", ("openmpi", 4): "cyclic:2"}


@pytest.mark.parametrize("family, n", CASES)
def test_mpi_suite(family, n, family_python):
    python, why = family_python(family)
    if python is None:
        pytest.skip(f"no {family} environment: {why}")
    # --color=no: Open MPI gives ranks a terminal, so pytest would colour its summaries.
    argv = [python, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q", "--color=no",
            "-p", "no:cacheprovider", "--timeout=600", "--timeout-method=thread", HERE_MPI]
    spec = os.environ.get("MPICOLL_NODES", NODES.get((family, n), ""))
    proc = run_mpi(n, argv, timeout=JOB_TIMEOUT, python=python, env={"MPICOLL_NODES": spec})
    out = ANSI.sub("", proc.stdout + proc.stderr)
    lib = mpifamily.library_of(python)
    assert not timed_out(proc), (
        f"MPI suite on {lib} at N={n} hung until the {JOB_TIMEOUT} s limit "
        f"({proc.elapsed:.0f} s):\n{out[-20000:]}")
    # Ranks share stdout, so summary lines can run together: count, don't anchor.
    summaries = re.findall(r"(\d+) passed(?:, \d+ \w+)* in ", out)
    assert proc.returncode == 0 and len(summaries) == n, (
        f"MPI suite on {lib} at N={n} failed (exit {proc.returncode}):\n{out[-20000:]}")
    assert not re.search(r"\b\d+ (failed|errors?)\b", out), out[-20000:]
    assert mpifamily.family_of_version(lib) == family, lib
    print(f"{family} N={n}: {summaries[0]} passed per rank in {proc.elapsed:.1f} s ({lib}; "
          f"MPICOLL_NODES={spec or '(one node)'})")


ONE_RANK_FAILS = os.path.join(HERE_MPI, "one_rank_fails.py")


@pytest.mark.parametrize("mpi4py_main", [True, False], ids=["mpi4py-main", "plain-pytest"])
@pytest.mark.parametrize("family", families())
def test_one_rank_failing_ends_the_job(family, mpi4py_main, family_python):
    """A test that fails on one rank while the others pass and wait in the next test's
    collective: the job ends at once with a failure (with or without ``python -m mpi4py``),
    it is not left to the time limit.
    """
    python, why = family_python(family)
    if python is None:
        pytest.skip(f"no {family} environment: {why}")
    limit = 180
    head = [python, "-m", "mpi4py", "-m", "pytest"] if mpi4py_main else [python, "-m", "pytest"]
    proc = run_mpi(3, head + ["--with-mpi", "-q", "--color=no", "-p", "no:cacheprovider",
                              "--timeout=600", "--timeout-method=thread", ONE_RANK_FAILS],
                   timeout=limit, python=python)
    out = ANSI.sub("", proc.stdout + proc.stderr)
    assert not timed_out(proc), f"hung until the {limit} s limit:\n{out[-8000:]}"
    assert proc.returncode != 0, out[-8000:]
    assert "deliberate failure on the last rank only" in out, out[-8000:]
    # Ended by the failing rank's abort, not by the launcher's limit (a hang ends there).
    assert proc.elapsed < limit - 30, (proc.elapsed, out[-8000:])
