"""``mpicoll.bench latency`` and ``overlap``: they run, check results and record every face.

Short runs under mpiexec; the figures are not judged (no timing thresholds),
only that every face/algorithm row is there, positive and written to JSON.
"""
import json
import os
import sys

import numpy as np
import pytest
from launch import ROOT, run_mpi

import mpicoll

BENCH = [sys.executable, "-m", "mpicoll.bench"]


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("primitive", ["allreduce", "bcast", "allgatherv", "barrier"])
def test_latency_records_every_face(tmp_path, primitive):
    proc = run_mpi(2, BENCH + ["latency", "--primitive", primitive, "--bytes", "8,1024",
                               "-n", "20", "--repeats", "2", "-J", "lat.jsonl"],
                   timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = _jsonl(tmp_path / "lat.jsonl")
    algos = [a for a in mpicoll.algorithms(primitive) if a != "native"]
    assert ({(r["bytes"], r["algorithm"]) for r in recs}
            == {(b, a) for b in (8, 1024) for a in algos})
    for r in recs:
        assert set(r["us_per_call"]) == {"raw", "agree", "p2pcomm", "local", "persistent",
                                         "raw_nb", "nonblocking"}
        assert all(v > 0 for v in r["us_per_call"].values()) and r["ranks"] == 2
    assert "x raw" in proc.stdout


def test_overlap_reports_osu_columns(tmp_path):
    proc = run_mpi(2, BENCH + ["overlap", "--bytes", "64K", "--algorithm", "ring,raw",
                               "--repeats", "2", "-J", "ov.jsonl"],
                   timeout=300, cwd=str(tmp_path), env={"MPICOLL_PROGRESS": "thread"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = _jsonl(tmp_path / "ov.jsonl")
    assert [r["algorithm"] for r in recs] == ["ring", "raw"]
    for r in recs:
        assert r["progress"] == "thread" and 0 <= r["overlap_pct"] <= 100
        assert r["pure_s"] > 0 and r["compute_s"] > 0 and r["overall_s"] > 0


def test_latency_on_device_arrays_stages_the_raw_face(tmp_path, capsys):
    """``table`` on device buffers (here a counting stand-in of ArrayModule, staged path):
    raw copies to the host and back around each mpi4py call, every face is recorded with
    the buffers it ran on, and the result check reads the device result through to_host.
    """
    from mpi4py import MPI

    from mpicoll.bench.latency import FACES, table

    class Counting:
        name, path = "stand-in", "staged"          # device buffers, not CUDA-aware
        collectives = "staged"
        copies = {"to_host": 0, "put": 0}

        @staticmethod
        def empty(n, dtype):
            return np.empty(n, dtype)

        @classmethod
        def to_host(cls, a):
            cls.copies["to_host"] += 1
            return a.copy()

        @classmethod
        def put(cls, dst, lo, host):
            cls.copies["put"] += 1
            dst[lo:lo + host.size] = host

        @staticmethod
        def sync():
            pass

    out = tmp_path / "lat.jsonl"
    table(MPI.COMM_SELF, "allreduce", ["ring"], [8], 3, 2, Counting, "stand-in", str(out))
    (rec,) = _jsonl(out)
    assert rec["buffers"] == "stand-in" and set(rec["us_per_call"]) == set(FACES)
    # raw and raw_nb: 2 blocks x 3 calls each, each one to_host of x and one put of y;
    # plus the setup's put of x, each raw face's one to_host of y and the result check's.
    assert Counting.copies == {"to_host": 2 * 6 + 2 + 1, "put": 2 * 6 + 1}
    assert "stand-in" in capsys.readouterr().out
    Counting.copies.update(to_host=0, put=0)            # a barrier stages nothing
    table(MPI.COMM_SELF, "barrier", ["dissemination"], [8], 3, 2, Counting, "stand-in")
    assert Counting.copies == {"to_host": 0, "put": 1}


def test_standin_device_latency_script_runs(tmp_path):
    script = os.path.join(ROOT, "benchmarks", "standin", "device_latency.py")
    proc = run_mpi(2, [sys.executable, script,
                       "--transport", "staged,ipc", "-n", "5", "--repeats", "1",
                       "-J", str(tmp_path / "d.jsonl")], timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = _jsonl(tmp_path / "d.jsonl")
    assert [r["buffers"].rsplit(" ", 1)[1] for r in recs] == ["staged"] * 2 + ["ipc"] * 2
