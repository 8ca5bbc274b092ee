"""Fail fast: when any rank raises, the whole MPI job ends with a non-zero exit (killed by
MPI_Abort, not by the launcher's timeout) and the failing rank's traceback is printed once.

Every job runs under MPIEXEC_TIMEOUT: a job that hangs is killed by the launcher (hydra or
Open MPI's mpirun) at the limit -- the tests assert that this never happens (launch.timed_out).
"""
import os
import sys

import pytest
from launch import ROOT, run_mpi, timed_out

TIMEOUT = 90          # seconds before the launcher kills a hung job (the jobs end in about one)
SCRIPT = os.path.join(ROOT, "tests", "support", "failing_rank.py")


def run(n, argv, **kw):
    proc = run_mpi(n, argv, timeout=TIMEOUT, **kw)
    out = proc.stdout + proc.stderr
    assert not timed_out(proc), f"the job hung until MPIEXEC_TIMEOUT:\n{out}"
    return proc, out


@pytest.mark.parametrize("n", [2, 4])
def test_raising_rank_ends_the_job(n):
    proc, out = run(n, [sys.executable, SCRIPT, "raise"])
    assert proc.returncode != 0, out
    assert out.count("Traceback (most recent call last)") == 1, out
    assert "[rank 1] RuntimeError: boom from rank 1" in out, out
    assert "done" not in out


@pytest.mark.parametrize("mode", ["shm-raise", "shm-die"])
def test_rank_failing_inside_an_shm_call_ends_the_job(mode):
    """The others are reading the failed rank's memory or waiting in the node barrier."""
    proc, out = run(3, [sys.executable, SCRIPT, mode], env={"MPICOLL_NODES": ""})
    assert proc.returncode != 0, out
    if mode == "shm-raise":
        assert "[rank 1] RuntimeError: boom inside the shm allreduce on rank 1" in out, out
    assert "done" not in out


def test_raising_alone():
    proc, out = run(1, [sys.executable, SCRIPT, "raise"])
    assert proc.returncode != 0 and out.count("Traceback (most recent call last)") == 1, out


def test_failure_after_good_collectives():
    proc, out = run(3, [sys.executable, SCRIPT, "late"])
    assert proc.returncode != 0, out
    assert out.count("Traceback (most recent call last)") == 1, out


def test_sys_exit_nonzero_ends_the_job():
    proc, out = run(3, [sys.executable, SCRIPT, "exit"])
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out


def test_agreed_argument_error_ends_the_job():
    """A bad argument on one rank raises on every rank; the job ends non-zero. Every
    rank raises, so up to N tracebacks are printed (whichever ranks print before the
    first MPI_Abort lands); rarely none survives the abort (hydra kills the proxies
    before they forward the last stderr bytes: reported against mpicoll/_failfast.py).
    """
    n = 3
    proc, out = run(n, [sys.executable, SCRIPT, "agreed"])
    assert proc.returncode != 0, out
    shown = out.count("Traceback (most recent call last)")
    assert shown <= n, out
    if shown:
        assert "root: expected a rank" in out


def test_success_is_exit_zero():
    proc, out = run(3, [sys.executable, SCRIPT, "ok"])
    assert proc.returncode == 0, out
    for r in range(3):
        assert f"rank {r} done 6" in out, out


# -- the real entry points -------------------------------------------------------------

def test_soak_bad_flag_and_bad_value():
    proc, out = run(2, [sys.executable, "-m", "mpicoll.testing.soak", "--bogus"])
    assert proc.returncode != 0 and "unrecognized arguments: --bogus" in out
    proc, out = run(2, [sys.executable, "-m", "mpicoll.testing.soak", "--calls", "0"])
    assert proc.returncode != 0 and "--calls must be >= 1" in out


def test_soak_runs():
    proc, out = run(2, [sys.executable, "-m", "mpicoll.testing.soak", "--calls", "50",
                        "--max-count", "64"])
    assert proc.returncode == 0, out
    assert "[soak] PASS" in out


def _module_exists(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


@pytest.mark.skipif(not _module_exists("mpicoll.demo"), reason="no mpicoll.demo")
def test_demo_bad_flag_and_injected_failure():
    proc, out = run(3, [sys.executable, "-m", "mpicoll.demo", "--bogus"])
    assert proc.returncode != 0 and "--bogus" in out
    # Injected failure: a junk algorithm variable makes every mpicoll call raise.
    proc, out = run(3, [sys.executable, "-m", "mpicoll.demo"],
                    env={"MPICOLL_BCAST_ALGORITHM": "no_such_algorithm", "MPICOLL_CHECK": "1"})
    assert proc.returncode != 0, out
    assert "no_such_algorithm" in out


@pytest.mark.skipif(not _module_exists("mpicoll.bench"), reason="no mpicoll.bench")
def test_bench_bad_flag_and_injected_failure():
    proc, out = run(2, [sys.executable, "-m", "mpicoll.bench", "allreduce", "--bogus"])
    assert proc.returncode != 0 and "--bogus" in out
    proc, out = run(2, [sys.executable, "-m", "mpicoll.bench", "bcast", "-r", "99", "-e", "64"])
    assert proc.returncode != 0 and "-r/--root" in out, out
    # Injected failure: rank 1 raises while importing a plug-in module.
    proc, out = run(2, [sys.executable, "-m", "mpicoll.bench", "allreduce", "-e", "64",
                        "--import", SCRIPT], env={"MPICOLL_TEST_FAIL_ON_IMPORT": "1"})
    assert proc.returncode != 0, out
    assert out.count("injected failure on import, rank 1") >= 1, out


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "examples", "all_reduce.py")),
                    reason="no examples")
def test_example_with_injected_failure():
    proc, out = run(3, [sys.executable, os.path.join(ROOT, "examples", "all_reduce.py")],
                    env={"MPICOLL_ALLREDUCE_ALGORITHM": "no_such_algorithm"},
                    cwd=os.path.join(ROOT, "examples"))
    assert proc.returncode != 0, out
    assert "MPICOLL_ALLREDUCE_ALGORITHM" in out
