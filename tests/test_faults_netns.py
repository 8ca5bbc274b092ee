"""Fault injection across two network-namespace "nodes": a node loses its link mid-job.

Needs what tests/test_netns_cluster.py needs (root, network namespaces, MPICH's hydra; skipped
with its reason otherwise) and uses its cluster. One rank per node runs
tests/support/faulty.py; at the loop's 5th iteration the last rank takes its node's link down
(``ip link set eth0 down`` inside its namespace). With ``MPICOLL_TIMEOUT=2`` the rank left
behind reports the other as not heard from and aborts; the cut-off rank, which can no longer
reach the launcher, ends itself once its own watchdog fires. Nothing may be left running in
either namespace.
"""
import os
import subprocess
import sys
import time

import pytest
from launch import ROOT
from test_netns_cluster import cluster, run_across  # noqa: F401  (the fixture)

SCRIPT = os.path.join(ROOT, "tests", "support", "faulty.py")


def _pids_in(ns):
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
    return [p for p in r.stdout.split() if p.strip()]


@pytest.mark.full
def test_a_node_that_loses_its_link_is_reported_and_ends_itself(cluster):  # noqa: F811
    r = run_across("mpc-h1:1,mpc-h2:1",
                   [sys.executable, "-m", "mpicoll.run", SCRIPT, "linkdown", "blocking"],
                   timeout=60, env={"MPICOLL_TIMEOUT": "2", "MPICOLL_NODES": ""})
    out = r.stdout + r.stderr
    try:
        assert not r.timed_out, f"the job hung until the launcher's limit:\n{out[-8000:]}"
        assert r.returncode != 0, out[-8000:]
        assert "[rank 0] mpicoll watchdog: allreduce" in out, out[-8000:]
        assert "not heard from (stopped, dead or cut off): rank 1" in out, out[-8000:]
        left = []
        for _ in range(150):                   # the cut-off rank ends itself (15 s at most)
            left = _pids_in("mpc-h2") + _pids_in("mpc-h1")
            if not left:
                break
            time.sleep(0.1)
        assert not left, f"processes left in the namespaces: {left}\n{out[-8000:]}"
    finally:
        subprocess.run(["ip", "netns", "exec", "mpc-h2", "ip", "link", "set", "eth0", "up"],
                       capture_output=True, timeout=30)
