"""mpicoll.bench's ``raw`` column: the plain mpi4py call, no mpicoll layer, beside native.

Short sweeps under mpiexec at N = 2 and 3 (raw rows exist for every primitive
and size, #wrong == 0), in-process checks that ``raw`` never reaches mpicoll
and that the check pass catches a raw call that does nothing, and that
``tune`` neither measures nor picks it. No timing thresholds.
"""
import csv
import json
import subprocess
import sys
from types import SimpleNamespace as NS

import numpy as np
import pytest
from launch import run_mpi

import mpicoll
from mpicoll.bench import raw as rawcol

BENCH = [sys.executable, "-m", "mpicoll.bench"]
TIMEOUT = 300


def records(path, kind=None):
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [r for r in recs if kind is None or r["type"] == kind]


@pytest.mark.parametrize("n", [2, 3])
def test_raw_rows_under_mpiexec(tmp_path, n):
    extra = ["-r", "1", "-d", "double"] if n == 3 else []
    proc = run_mpi(n, BENCH + ["all", "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-w", "1",
                               "--algorithm", "raw,native,ring", "-J", "out.jsonl",
                               "--csv", "out.csv", "--no-memcpy"] + extra,
                   timeout=TIMEOUT, cwd=str(tmp_path))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-6000:]
    assert "Out of bounds values : 0 OK" in text
    res = records(tmp_path / "out.jsonl", "result")
    for prim in mpicoll.PRIMITIVES:
        mine = [r for r in res if r["primitive"] == prim]
        sizes = sorted({r["bytes"] for r in mine})
        assert len(sizes) == (1 if prim == "barrier" else 2), (prim, sizes)
        want = {"raw", "native"} | ({"ring"} if "ring" in mpicoll.algorithms(prim) else set())
        for size in sizes:
            rows = {r["algorithm"]: r for r in mine if r["bytes"] == size}
            assert set(rows) == want, (prim, size, set(rows))
            raw = rows["raw"]
            assert raw["wrong"] == 0 and raw["checked"] and raw["nranks"] == n, raw
            assert raw["mpi_call"] == rawcol.CALLS[prim] and raw["vs_raw"] == 1.0
            assert 0 < raw["time_us"]["min"] <= raw["time_us"]["avg"] <= raw["time_us"]["max"]
            for r in rows.values():
                assert r["wrong"] == 0, r
                assert r["vs_raw"] == pytest.approx(raw["time_us"]["avg"] / r["time_us"]["avg"])
            # raw rows come first at each size (so the others can record vs_raw)
            assert [r["algorithm"] for r in mine if r["bytes"] == size][0] == "raw"
    with open(tmp_path / "out.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["algorithm"] for r in rows} >= {"raw", "native"}
    assert all(r["vs_raw"] for r in rows)
    # report: vs-raw columns; raw is a reference, never the best hand-written
    rep = subprocess.run(BENCH + ["report", "out.jsonl", "--no-targets"], cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert rep.returncode == 0, rep.stderr[-4000:]
    assert "| raw time (µs) | winner vs raw | hand-written vs raw | native vs raw |" in rep.stdout
    table = [ln for ln in rep.stdout.splitlines()
             if ln.startswith("| ") and not ln.startswith("| size")]
    assert len(table) == sum(1 if p == "barrier" else 2 for p in mpicoll.PRIMITIVES)
    for line in table:          # column 6: best hand-written; 9-12: the vs-raw columns
        cols = [c.strip() for c in line.split("|")]
        assert cols[6] != "raw" and cols[9] != "-" and cols[12].endswith("x"), line


def _in_process_sweep(monkeypatch, algorithms, primitives=None):
    """One rank, in this process: the Sweep of ``algorithms`` over every primitive."""
    from mpicoll.bench import cli, run
    from mpicoll.bench.harness import Sweep
    from mpicoll.bench.results import Sink
    monkeypatch.setenv("MPICOLL_CHECK", "local")            # prepare() sets it
    args = cli.build_parser().parse_args(["all", "-b", "8", "-e", "64", "-f", "8", "-n", "1",
                                          "-w", "0", "--algorithm", algorithms, "--no-memcpy"])
    comm = run.prepare(args)
    out = []
    try:
        sweep = Sweep(args, comm, Sink(1), echo=out.append)
        wrong = sweep.run(list(primitives or mpicoll.PRIMITIVES))
    finally:
        comm.Free()
    return sweep, wrong, out


@pytest.fixture
def mpicoll_calls(monkeypatch):
    """Every call of mpicoll's collectives, as (primitive, algorithm)."""
    seen = []
    names = {"bcast": "bcast", "reduce": "reduce", "allreduce": "allreduce",
             "gather": "gather", "allgather": "allgather", "scatter": "scatter",
             "reduce_scatter": "reduce_scatter_block", "alltoall": "alltoall",
             "barrier": "barrier"}
    for prim, fname in names.items():
        orig = getattr(mpicoll, fname)

        def wrapper(*a, _orig=orig, _prim=prim, **kw):
            seen.append((_prim, kw.get("algorithm")))
            return _orig(*a, **kw)
        monkeypatch.setattr(mpicoll, fname, wrapper)
    return seen


def test_raw_never_reaches_mpicoll(monkeypatch, mpicoll_calls):
    sweep, wrong, _ = _in_process_sweep(monkeypatch, "raw")
    assert wrong == 0
    assert mpicoll_calls == []                       # raw alone: mpicoll is never called
    rows = sweep.records
    assert {r["algorithm"] for r in rows} == {"raw"}
    assert {r["primitive"] for r in rows} == set(mpicoll.PRIMITIVES)
    assert all(r["wrong"] == 0 and r["checked"] for r in rows)
    sweep, wrong, _ = _in_process_sweep(monkeypatch, "raw,native")
    assert wrong == 0 and mpicoll_calls
    assert {alg for _, alg in mpicoll_calls} == {"native"}     # "raw" is never passed on
    assert {(r["primitive"], r["algorithm"]) for r in sweep.records} == \
        {(p, a) for p in mpicoll.PRIMITIVES for a in ("raw", "native")}
    with pytest.raises(mpicoll.ArgumentError, match="no algorithm 'raw'"):
        from mpi4py import MPI
        mpicoll.allreduce(np.ones(2), np.empty(2), algorithm="raw", comm=MPI.COMM_SELF)


def test_check_pass_catches_a_raw_call_that_does_nothing(monkeypatch):
    monkeypatch.setattr(rawcol, "call", lambda case, comm, am=None: (lambda: None))
    sweep, wrong, _ = _in_process_sweep(monkeypatch, "raw,native")
    assert wrong > 0
    by = {(r["primitive"], r["algorithm"]): r for r in sweep.records if r["bytes"] == 8 or
          r["primitive"] == "barrier"}
    for prim in ("reduce", "allreduce", "gather", "allgather", "scatter", "reduce_scatter",
                 "alltoall"):     # outputs still hold the sentinel
        assert by[(prim, "raw")]["wrong"] > 0, prim
        assert by[(prim, "native")]["wrong"] == 0, prim


def test_raw_is_wanted_with_all_or_listed_never_in_fit_or_tune():
    assert rawcol.wanted(NS(algorithms=["all"], command="allreduce"))
    assert rawcol.wanted(NS(algorithms=["all"], command="all"))
    assert rawcol.wanted(NS(algorithms=["ring", "raw"], command="bcast"))
    assert not rawcol.wanted(NS(algorithms=["ring", "native"], command="allreduce"))
    assert not rawcol.wanted(NS(algorithms=["all"], command="tune"))
    assert not rawcol.wanted(NS(algorithms=["all"], command="fit"))
    assert set(rawcol.CALLS) == set(mpicoll.PRIMITIVES)


def test_raw_skips_device_buffers_without_cuda_aware_collectives():
    assert rawcol.skip_reason(NS(name="numpy", path="host", collectives="host")) is None
    aware = NS(name="cupy", path="cuda-aware", collectives="cuda-aware")
    assert rawcol.skip_reason(aware) is None
    why = rawcol.skip_reason(NS(name="cupy", path="staged", collectives="staged"))
    assert why.startswith("raw: --xp cupy on the staged device path") and "skipped" in why
    # MPICH + CUDA UCX: point-to-point takes device pointers, the collectives do not.
    why = rawcol.skip_reason(NS(name="cupy", path="cuda-aware", collectives="staged"))
    assert "collectives are not CUDA-aware" in why


def test_raw_call_synchronises_device_work_first():
    from mpicoll.bench import specs
    order = []

    class Comm:
        def Allreduce(self, s, r, op):
            order.append("Allreduce")

    am = NS(name="cupy", sync=lambda: order.append("sync"))
    case = NS(spec=specs.SPECS["allreduce"], send=1, recv=2, op=None)
    rawcol.call(case, Comm(), am)()
    assert order == ["sync", "Allreduce"]
    order.clear()
    rawcol.call(case, Comm(), NS(name="numpy"))()
    assert order == ["Allreduce"]


def test_tune_neither_measures_nor_picks_raw(tmp_path, monkeypatch):
    from mpicoll.bench import cli
    monkeypatch.setenv("MPICOLL_CHECK", "local")
    monkeypatch.setenv("MPICOLL_TUNING", "none")     # tune sets it; restored afterwards
    table = tmp_path / "table.json"
    rc = cli.main(["tune", "-b", "8", "-e", "64", "-f", "8", "-n", "1", "-w", "0",
                   "--primitive", "allreduce,barrier", "--include-native",
                   "-o", str(table), "-J", str(tmp_path / "t.jsonl")])
    assert rc == 0
    res = records(tmp_path / "t.jsonl", "result")
    assert res and "raw" not in {r["algorithm"] for r in res}
    got = json.loads(table.read_text())
    for prim, sizes in got["rules"].items():
        for ranges in sizes.values():
            assert all(r["algorithm"] in mpicoll.algorithms(prim) for r in ranges)


def test_report_vs_raw_columns():
    from mpicoll.bench import report

    def rec(alg, t, wrong=0):
        return {"primitive": "allreduce", "nranks": 2, "dtype": "float32", "op": "sum",
                "bytes": 1024, "algorithm": alg, "wrong": wrong, "busbw_GBps": 1.0,
                "time_us": {"avg": t}}
    text = report.render([], [rec("raw", 2.0), rec("native", 4.0), rec("ring", 1.0)], [],
                         with_targets=False)
    head = [ln for ln in text.splitlines() if ln.startswith("| size")][0]
    cols = [c.strip() for c in head.split("|")]
    row = [c.strip() for c in
           [ln for ln in text.splitlines() if ln.startswith("| 1 KiB")][0].split("|")]
    assert row[cols.index("winner")] == "ring" and row[cols.index("best hand-written")] == "ring"
    assert row[cols.index("raw time (µs)")] == "2.00"
    assert row[cols.index("winner vs raw")] == "2.00x"
    assert row[cols.index("hand-written vs raw")] == "2.00x"
    assert row[cols.index("native vs raw")] == "0.50x"
    assert "`raw`: the plain mpi4py call" in text
    # raw may win, but is never the best hand-written
    text = report.render([], [rec("raw", 0.5), rec("native", 4.0), rec("ring", 1.0)], [],
                         with_targets=False)
    row = [c.strip() for c in
           [ln for ln in text.splitlines() if ln.startswith("| 1 KiB")][0].split("|")]
    assert row[cols.index("winner")] == "raw" and row[cols.index("best hand-written")] == "ring"
    assert row[cols.index("hand-written vs raw")] == "0.50x"
    # a raw row with #wrong > 0 is no reference; results without raw keep the old table
    text = report.render([], [rec("raw", 0.5, wrong=3), rec("ring", 1.0)], [],
                         with_targets=False)
    assert "| - | - | - |" in text
    text = report.render([], [rec("native", 4.0), rec("ring", 1.0)], [], with_targets=False)
    assert "vs raw" not in text


def test_the_docstring_table_is_what_the_specs_declare():
    table = {}
    for line in rawcol.__doc__.splitlines():
        prim, _, text = line.strip().partition(" ")
        if line.startswith("    ") and prim in mpicoll.PRIMITIVES:
            table[prim] = text.split("#")[0].strip()
    assert table == dict(rawcol.CALLS)
    assert set(table) == set(mpicoll.PRIMITIVES)


def test_a_spec_subclassed_for_its_layout_declares_its_own_call():
    from mpicoll.calls.allgather import AllgatherSpec

    class Twin(AllgatherSpec):      # another primitive with allgather's layout
        pass
    assert Twin.raw is None and Twin.busbw is AllgatherSpec.busbw
    with pytest.raises(NotImplementedError, match="declares no plain mpi4py call"):
        Twin().raw_call(None, None)
    with pytest.raises(ValueError, match="raw: no mpi4py call"):
        rawcol.call(NS(spec=Twin()), None)
