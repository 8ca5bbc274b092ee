"""tests/ mirrors the package: test modules here (serial, and those launching MPI jobs) and
in tests/mpi/ (run under mpiexec); their helpers and stand-ins (launch, mpifamily, refdata,
fakedevice, fake_cupy, plans_by_hand, ...) live in tests/support/, put on the path here so
that ``from launch import run_mpi`` works from any test module.

Two runs: ``python -m pytest`` is the quick check (the serial tests and the MPI suite at
small N on MPICH); ``python -m pytest --full`` is CI's full matrix (``.ci/run``): the MPI
suite at every size on MPICH and Open MPI, with the round-robin placements, the system MPI,
mpi4py's and torch's suites. A test that belongs to the full run only is marked
``@pytest.mark.full`` (skipped with the reason otherwise); a module that sizes itself at
import reads :func:`support.fullrun.full` (``--full`` sets ``MPICOLL_TEST_FULL=1`` before
collection, so ``MPICOLL_TEST_FULL=1 python -m pytest`` is the same run).
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "support"))

# tests/mpi runs under mpiexec (see test_mpi_suite.py); a plain pytest skips it.
collect_ignore = [] if "--with-mpi" in sys.argv else ["mpi"]


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="mpicoll: CI's full matrix (every MPI suite size on MPICH and Open "
                          "MPI, the system MPI, mpi4py's and torch's suites), not the quick check")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "full: only in the full run (python -m pytest --full), CI's matrix")
    if config.getoption("--full"):
        os.environ["MPICOLL_TEST_FULL"] = "1"


def pytest_collection_modifyitems(config, items):
    from fullrun import full
    if full():
        return
    skip = pytest.mark.skip(reason="the full run only: python -m pytest --full")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def family_python():
    """MPI family -> (python, None) or (None, reason): an interpreter whose mpi4py uses that MPI
    family (this one, or a venv with the family's wheel, built once:
    tests/support/mpifamily.py).
    """
    import mpifamily
    found = {}

    def get(family):
        if family not in found:
            found[family] = mpifamily.python_for(family)
        return found[family]
    return get
