"""``mpicoll.bench latency`` and ``overlap``: they run, check results and record every face.

Short runs under mpiexec; the figures are not judged (no timing thresholds),
only that every face/algorithm row is there, positive and written to JSON.
"""
import json
import sys

import pytest

from launch import run_mpi

import mpicoll

BENCH = [sys.executable, "-m", "mpicoll.bench"]


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("primitive", ["allreduce", "bcast", "barrier"])
def test_latency_records_every_face(tmp_path, primitive):
    proc = run_mpi(2, BENCH + ["latency", "--primitive", primitive, "--bytes", "8,1024",
                               "-n", "20", "--repeats", "2", "-J", "lat.jsonl"],
                   timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = _jsonl(tmp_path / "lat.jsonl")
    algos = [a for a in mpicoll.algorithms(primitive) if a != "native"]
    assert {(r["bytes"], r["algorithm"]) for r in recs} == {(b, a) for b in (8, 1024) for a in algos}
    for r in recs:
        assert set(r["us_per_call"]) == {"raw", "agree", "p2pcomm", "local", "persistent",
                                         "nonblocking"}
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
