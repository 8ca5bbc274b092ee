"""Fault injection: a rank that fails, stops or never comes ends the job (or raises) with a report.

Each case runs ``tests/support/faulty.py FAULT FACE`` (a loop of allreduces; the last
rank fails at the 5th) under ``python -m mpicoll.run`` with ``MPICOLL_TIMEOUT=2``, and
checks that the job ended by itself -- not by the launcher's limit (``MPIEXEC_TIMEOUT``,
60 s here, only there to turn a hang into a failure) -- with a message that names the
failed or missing rank, and that nothing is left behind: no process of the job, no new
file in ``/dev/shm`` named after its processes (MPICH's own segment, which MPICH leaves
behind whenever a rank is killed or aborts, mpicoll or not, is named otherwise). How long
each case took is recorded in benchmarks/faults.md (no test asserts a duration).
"""
import os
import re
import sys
import time

import pytest
from launch import ROOT, run_mpi, timed_out

# CI's full run only (~2 min of launches that end by fault): python -m pytest --full
pytestmark = pytest.mark.full

SCRIPT = os.path.join(ROOT, "tests", "support", "faulty.py")
LIMIT = 60            # the launcher's limit: a job still running then has hung
TIMEOUT = "2"         # the watchdog's, seconds


def _torch():
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def _shm_files():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def _left(tag):
    """Processes still running this job's script (by its full path and the case's tag)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue              # a zombie: it has ended
        except OSError:
            continue
        if SCRIPT in cmd and tag in cmd:
            out.append((pid, cmd))
    return out


def run_case(n, fault, face, *extra, env=None):
    before = _shm_files()
    tag = f"--case={fault}-{face}-{n}-{os.getpid()}"
    full = {"MPICOLL_TIMEOUT": TIMEOUT, "MPICOLL_NODES": ""}
    full.update(env or {})
    proc = run_mpi(n, [sys.executable, "-m", "mpicoll.run", SCRIPT, fault, face, *extra, tag],
                   timeout=LIMIT, env=full)
    out = proc.stdout + proc.stderr
    assert not timed_out(proc), f"the job hung until the launcher's limit:\n{out}"
    left = _left(tag)
    for _ in range(100):          # ranks the launcher killed may take a moment to be gone
        if not left:
            break
        time.sleep(0.1)
        left = _left(tag)
    assert not left, f"processes left behind: {left}\n{out}"
    # Files named after the job's processes (mpicoll's and its stand-ins' segments). MPICH's own
    # intranode segment (mpich_shm_*, named otherwise) outlives any rank killed or aborted, with
    # or without mpicoll: MPICH unlinks it in MPI_Finalize (benchmarks/faults.md).
    pids = set(re.findall(r"^PID (\d+)$", out, re.M))
    new = {f for f in _shm_files() - before if any(p in f for p in pids)}
    assert not new, f"shared-memory files left behind: {sorted(new)}\n{out}"
    return proc, out


# -- MPI's own end: a rank that exits, is killed or raises ----------------------------------

@pytest.mark.parametrize("fault", ["exit", "kill", "raise"])
@pytest.mark.parametrize("face", ["blocking", "nonblocking"])
def test_a_rank_that_ends_ends_the_job(fault, face):
    proc, out = run_case(3, fault, face)
    assert proc.returncode != 0, out
    assert "rank 0 done" not in out
    if fault == "raise":
        assert "[rank 2] RuntimeError: injected failure in user code on rank 2" in out, out


# -- the watchdog: a rank that stops or never comes --------------------------------------------

@pytest.mark.parametrize("n,face", [(2, "blocking"), (3, "blocking"), (3, "nonblocking"),
                                    (2, "persistent"), (3, "shm"), (2, "p2pcomm"),
                                    (3, "distributed")])
def test_a_stopped_rank_is_reported_and_ends_the_job(n, face):
    proc, out = run_case(n, "stop", face)
    assert proc.returncode != 0, out
    bad = n - 1
    assert "Timed out after" in out, out
    assert f"not heard from (stopped, dead or cut off): rank {bad}" in out, out
    assert "mpicoll watchdog: ending the job (MPI_Abort)" in out, out
    # every rank that waits reports (the first abort may cut the others' output short)
    assert "[rank 0] mpicoll watchdog:" in out, out


@pytest.mark.parametrize("face,where", [
    # a repeated blocking call runs its compiled program: a wait names the messages it
    # completes (a send and a receive together read as a Sendrecv)
    ("blocking", r"waiting in: step \d+ of \d+: (Sendrecv \(send to rank \d, receive from "
                 r"rank \d\)|Waitall \((send to|receive from) rank \d)"),
    ("nonblocking", r"waiting in: step \d+ of \d+: waiting for the messages of this round"),
    ("shm", r"waiting in: a node barrier of a shared-memory algorithm")])
def test_the_report_names_the_step_of_the_algorithm(face, where):
    """With no agreement step (local mode) the ranks wait inside the algorithm itself."""
    proc, out = run_case(3, "stop", face, env={"MPICOLL_CHECK": "local"})
    assert proc.returncode != 0, out
    assert re.search(where, out), out


def test_a_rank_that_never_comes_is_named_with_what_it_does():
    proc, out = run_case(3, "hang", "blocking")
    assert proc.returncode != 0, out
    assert "allreduce (blocking collective #6 on MPI_COMM_WORLD)" in out, out
    assert ("have not entered this call: rank 2 (entered 5 blocking collectives here; "
            "now idle in its own code)") in out, out
    assert "has waited" in out, out           # the warning at half the timeout came first


def test_raise_mode_raises_on_every_waiting_rank_and_refuses_the_communicator():
    proc, out = run_case(3, "hang", "nonblocking", "--raise")
    for r in (0, 1):
        assert f"CAUGHT rank {r}: mpicoll watchdog: wait of iallreduce" in out, out
        assert f"REFUSED rank {r}:" in out and "unusable" in out, out
    assert "rank 2 (now idle in its own code)" in out, out


def test_raise_mode_on_a_blocking_call_ends_the_job_and_says_why():
    proc, out = run_case(2, "hang", "blocking", "--raise")
    assert proc.returncode != 0, out
    assert "cannot be interrupted" in out, out


# -- torch -----------------------------------------------------------------------------

@pytest.mark.skipif(not _torch(), reason="torch is not installed")
@pytest.mark.parametrize("n", [2, 3])
def test_torch_group_timeout_raises_on_every_waiting_rank(n):
    proc, out = run_case(n, "hang", "torch")
    for r in range(n - 1):
        assert f"CAUGHT rank {r}: DistBackendError: mpicoll: Timed out after 2 s waiting for " \
               f"allreduce on process group" in out, out
        assert f"REFUSED rank {r}:" in out and "unusable" in out, out
    assert f"have not entered this call: rank {n - 1} (world rank {n - 1}) (now idle in its " \
           f"own code)" in out, out


@pytest.mark.skipif(not _torch(), reason="torch is not installed")
def test_torch_barrier_alone_times_out_and_the_default_group_still_works():
    """Torch's test_barrier_timeout_global: no rank blocks in the group's set-up."""
    proc, out = run_case(3, "none", "torch-alone")
    assert proc.returncode == 0, out
    assert "CAUGHT rank 0 after" in out and " Timed out " in out, out
    assert "REFUSED rank 0:" in out, out
    for r in range(3):
        assert f"rank {r} done" in out, out


def test_no_fault_no_report():
    proc, out = run_case(3, "none", "blocking")
    assert proc.returncode == 0, out
    assert "watchdog" not in out, out
    for r in range(3):
        assert f"rank {r} done" in out, out


# -- the public entry point and the setting ------------------------------------------------

USER = ("import sys, numpy as np, mpicoll\n"
        "from mpi4py import MPI\n"
        "if MPI.COMM_WORLD.rank == 1:\n"
        "    raise RuntimeError('user error on rank 1 ' + ' '.join(sys.argv[1:]))\n"
        "mpicoll.allreduce(np.ones(2))\n"
        "print('done', MPI.COMM_WORLD.rank)\n")


@pytest.mark.parametrize("form", ["script", "module", "code"])
def test_mpicoll_run_ends_the_job_when_user_code_raises(form, tmp_path):
    """A plain user program, no helper of ours inside: -m mpicoll.run makes it fail fast."""
    (tmp_path / "userprog.py").write_text(USER)
    argv = {"script": [str(tmp_path / "userprog.py"), "a1", "a2"],
            "module": ["-m", "userprog", "a1", "a2"],
            "code": ["-c", USER, "a1", "a2"]}[form]
    proc = run_mpi(3, [sys.executable, "-m", "mpicoll.run", *argv], timeout=LIMIT, cwd=tmp_path,
                   env={"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])})
    out = proc.stdout + proc.stderr
    assert not timed_out(proc), out
    assert proc.returncode != 0, out
    assert "[rank 1] RuntimeError: user error on rank 1 a1 a2" in out, out
    assert "done 0" not in out, out


def test_mpicoll_run_flags():
    proc = run_mpi(1, [sys.executable, "-m", "mpicoll.run", "--timeout", "-3", "x.py"],
                   timeout=LIMIT)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "--timeout: expected a number of seconds > 0" in out, out
    proc = run_mpi(1, [sys.executable, "-m", "mpicoll.run", "--timeout", "5", "-c",
                       "import os, mpicoll; print('T', os.environ['MPICOLL_TIMEOUT'], "
                       "mpicoll.get_timeout())"], timeout=LIMIT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "T 5.0 (5.0, 'abort')" in out, out


def test_set_timeout_refuses_bad_arguments_and_reports_what_is_in_force():
    # (each rank's lines are printed by rank 0: two ranks printing at once may interleave)
    code = ("import mpicoll\n"
            "from mpi4py import MPI\n"
            "lines = []\n"
            "for bad in (-1, 'x', True):\n"
            "    try:\n"
            "        mpicoll.set_timeout(MPI.COMM_WORLD, bad)\n"
            "    except mpicoll.ArgumentError as e:\n"
            "        lines.append(f'REFUSED {e}')\n"
            "try:\n"
            "    mpicoll.set_timeout(MPI.COMM_WORLD, 5, action='explode')\n"
            "except mpicoll.ArgumentError as e:\n"
            "    lines.append(f'REFUSED {e}')\n"
            "lines.append(f'BEFORE {mpicoll.get_timeout()}')\n"
            "lines.append(f'OLD {mpicoll.set_timeout(None, 7, action=\"raise\")}')\n"
            "lines.append(f'AFTER {mpicoll.get_timeout(MPI.COMM_WORLD)}')\n"
            "every = MPI.COMM_WORLD.gather(lines)\n"
            "if every is not None:\n"
            "    print('\\n'.join(line for mine in every for line in mine), flush=True)\n")
    proc = run_mpi(2, [sys.executable, "-c", code], timeout=LIMIT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count("REFUSED seconds: expected a number of seconds >= 0") == 2 * 3, out
    refused = "REFUSED action: expected 'abort', 'raise' or None; got str 'explode'"
    assert out.count(refused) == 2, out
    assert out.count("BEFORE (None, 'abort')") == 2, out
    assert out.count("OLD (None, None)") == 2 and out.count("AFTER (7.0, 'raise')") == 2, out
