"""The fault matrix: how long a job takes to end after one rank fails, and what it says.

    python scripts/fault_matrix.py [--netns] > matrix.md

Runs tests/support/faulty.py (a loop of allreduces; the last rank fails at the 5th) for
each fault and face of tests/test_faults.py, under ``python -m mpicoll.run`` with
``MPICOLL_TIMEOUT=2``, and prints one markdown row per case: seconds from the fault (the
failing rank's clock, printed just before it fails) to the launcher's exit, the exit
code, and the first line that names a rank. ``--netns`` adds the two-node link-down case
(root, network namespaces; brings scripts/netns_cluster.sh up and down).
"""
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from launch import run_mpi  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "support", "faulty.py")
FAILING = os.path.join(ROOT, "tests", "support", "failing_rank.py")
CASES = [
    (3, "exit", "blocking", ()), (3, "kill", "blocking", ()), (3, "raise", "blocking", ()),
    (3, "exit", "nonblocking", ()), (3, "kill", "nonblocking", ()),
    (3, "raise", "nonblocking", ()),
    (2, "stop", "blocking", ()), (3, "stop", "blocking", ()), (3, "stop", "nonblocking", ()),
    (2, "stop", "persistent", ()), (3, "stop", "persistent", ()), (3, "stop", "shm", ()),
    (2, "stop", "p2pcomm", ()), (3, "stop", "distributed", ()), (3, "hang", "blocking", ()),
    (3, "hang", "nonblocking", ("--raise",)), (2, "hang", "blocking", ("--raise",)),
    (2, "hang", "torch", ()), (3, "hang", "torch", ()), (3, "stop", "torch", ()),
    (3, "none", "torch-alone", ()),
]
KEYS = ("not heard from", "have not entered", "CAUGHT", "RuntimeError:",
        "BAD TERMINATION", "Killed", "EXIT CODE")


def _summary(out):
    for key in KEYS:
        for line in out.splitlines():
            if key in line:
                return line.strip().replace("|", "/")[:160]
    return ""


def row(n, fault, face, extra, proc, t_end):
    """One markdown row of a case that ended at ``t_end`` (epoch seconds)."""
    out = proc.stdout + proc.stderr
    m = re.search(r"^FAULT ([0-9.]+)$", out, re.M)
    after = f"{t_end - float(m.group(1)):.1f}" if m else "-"
    return (f"| {fault} | {face}{' ' + ' '.join(extra) if extra else ''} | {n} | {after} | "
            f"{proc.elapsed:.1f} | {proc.returncode} | {_summary(out)} |")


def main():
    """Run every case; print the table."""
    print("| fault | face | N | s after the fault | s in all | exit | what it says |")
    print("|---|---|---|---|---|---|---|")
    env = {"MPICOLL_TIMEOUT": "2", "MPICOLL_NODES": ""}
    for n, fault, face, extra in CASES:
        proc = run_mpi(n, [sys.executable, "-m", "mpicoll.run", SCRIPT, fault, face, *extra],
                       timeout=60, env=env)
        print(row(n, fault, face, extra, proc, time.time()), flush=True)
    for mode in ("shm-die", "shm-raise"):      # a rank dies while the others read its memory
        t0 = time.time()
        proc = run_mpi(3, [sys.executable, FAILING, mode], timeout=60, env=env)
        print(f"| {mode} (tests/support/failing_rank.py) | shm | 3 | - | {time.time() - t0:.1f} |"
              f" {proc.returncode} | {_summary(proc.stdout + proc.stderr)} |", flush=True)
    if "--netns" in sys.argv:
        netns()


def netns():
    """The two-node link-down case on a namespace cluster of two hosts."""
    sh = os.path.join(ROOT, "scripts", "netns_cluster.sh")
    subprocess.run(["bash", sh, "up", "2"], check=True, capture_output=True)
    try:
        from launch import mpi_env, run_bounded
        full = mpi_env(60)
        full.update({"MPICOLL_TIMEOUT": "2", "MPICOLL_NODES": ""})
        cmd = ["bash", sh, "mpiexec", "-hosts", "mpc-h1:1,mpc-h2:1", "-n", "2", sys.executable,
               "-m", "mpicoll.run", SCRIPT, "linkdown", "blocking"]
        proc = run_bounded(cmd, 60, full, ROOT)
        t_end = time.time()
        left_at = None
        for _ in range(200):
            r = subprocess.run(["ip", "netns", "pids", "mpc-h2"], capture_output=True, text=True)
            if not r.stdout.split():
                left_at = time.time()
                break
            time.sleep(0.1)
        print(row(2, "linkdown", "blocking (2 netns nodes)", (), proc, t_end)
              + f" cut-off rank gone {left_at - t_end if left_at else float('nan'):+.1f} s "
                f"after the launcher |")
    finally:
        subprocess.run(["bash", sh, "down"], capture_output=True)


if __name__ == "__main__":
    main()
