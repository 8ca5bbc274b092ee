"""mpicoll.bench: tiny sweeps under mpiexec, result files, report/plot/trace/fit/predict/tune.

Serial pytest; MPI jobs go through ``launch.run_mpi`` (bounded by
MPIEXEC_TIMEOUT). No timing thresholds anywhere: only the shape and the
correctness of what the bench writes.
"""
import csv
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from launch import run_mpi

import mpicoll
from mpicoll.bench import specs, units
from mpicoll.bench.costs import COSTS

PY = sys.executable
BENCH = [PY, "-m", "mpicoll.bench"]
TIMEOUT = 300
HAS_MPL = importlib.util.find_spec("matplotlib") is not None
HAND_WRITTEN = {p: [a for a in mpicoll.algorithms(p) if a != "native"] for p in mpicoll.PRIMITIVES}

BROKEN = '''
from mpicoll._registry import register, lookup
_ring = lookup("allreduce", "ring")

@register("allreduce", "broken", commutative_only=True)
def broken(ctx, sendbuf, recvbuf, op):
    """Test only: the ring, then one wrong element on rank 1."""
    _ring(ctx, sendbuf, recvbuf, op)
    if ctx.rank == 1 and recvbuf.size:
        recvbuf[recvbuf.size // 2] += 1

@register("allreduce", "lazy")
def lazy(ctx, sendbuf, recvbuf, op):
    """Test only: never writes recvbuf."""
'''


def bench(n, args, tmp, timeout=TIMEOUT):
    proc = run_mpi(n, BENCH + [str(a) for a in args], timeout=timeout, cwd=str(tmp))
    return proc, proc.stdout + proc.stderr


def serial(args, tmp):
    import subprocess
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(BENCH + [str(a) for a in args], cwd=str(tmp), env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)


def records(path, kind=None):
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [r for r in recs if kind is None or r["type"] == kind]


# -- one sweep of every primitive at N = 2 and N = 3, shared by several tests ------

@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    out = {}
    for n, extra in ((2, ["--trace", "trace.json", "--trace-bytes", "4K",
                          "--native-algorithm", "allreduce=ring"]),
                     (3, ["-r", "1", "-d", "double"])):
        tmp = tmp_path_factory.mktemp(f"sweep{n}")
        proc, text = bench(n, ["all", "-b", "8", "-e", "4K", "-f", "16", "-n", "2", "-w", "1",
                               "-c", "1", "--algorithm", "all", "-J", "out.jsonl",
                               "--csv", "out.csv"] + extra, tmp)
        assert proc.returncode == 0, text[-6000:]
        out[n] = (tmp, text)
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_sweep_is_complete_and_correct(sweeps, n):
    tmp, text = sweeps[n]
    res = records(tmp / "out.jsonl", "result")
    for prim in mpicoll.PRIMITIVES:
        mine = [r for r in res if r["primitive"] == prim]
        sizes = sorted({r["bytes"] for r in mine})
        assert sizes == [0] if prim == "barrier" else (sizes and sizes[0] > 0), (prim, sizes)
        for size in sizes:
            algs = {r["algorithm"] for r in mine if r["bytes"] == size}
            assert set(mpicoll.algorithms(prim)) <= algs, (prim, size, algs)
        for r in mine:
            assert r["wrong"] == 0 and r["checked"], r
            assert r["nranks"] == n and r["iters"] == 2 and r["warmup"] == 1
            t = r["time_us"]
            assert 0 < t["min"] <= t["avg"] <= t["max"], r
            factor = specs.busbw_factor(prim, n)
            assert r["busbw_factor"] == factor
            if prim == "barrier":
                assert r["algbw_GBps"] is None and r["busbw_GBps"] is None
            else:
                assert r["algbw_GBps"] == pytest.approx(r["bytes"] / t["avg"] / 1e3)
                assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * factor)
            if specs.SPECS[prim].blocked:
                assert r["bytes"] % (n * np.dtype(r["dtype"]).itemsize) == 0
    assert "Out of bounds values : 0 OK" in text
    assert all(m["bw_GBps"] > 0 for m in records(tmp / "out.jsonl", "memcpy"))


def test_busbw_factors_are_nccl_tests():
    for n in (2, 3, 4, 8):
        assert specs.busbw_factor("allreduce", n) == 2 * (n - 1) / n
        for p in ("allgather", "reduce_scatter", "alltoall", "gather", "scatter"):
            assert specs.busbw_factor(p, n) == (n - 1) / n
        assert specs.busbw_factor("bcast", n) == specs.busbw_factor("reduce", n) == 1
        assert specs.busbw_factor("barrier", n) is None


def test_provenance_csv_and_native_forcing(sweeps):
    tmp, _ = sweeps[2]
    recs = records(tmp / "out.jsonl")
    prov = recs[0]
    assert prov["type"] == "provenance"
    for key in ("mpi_library", "mpi4py", "numpy", "world_size", "hosts", "ranks_per_host",
                "slurm_job_id", "mpi_env", "command", "date", "mpicoll_check"):
        assert key in prov, key
    assert prov["world_size"] == 2 and sum(prov["hosts"].values()) == 2
    assert prov["command"].startswith("python -m mpicoll.bench all ")
    assert recs[-1]["type"] == "end" and recs[-1]["total_wrong"] == 0
    with open(tmp / "out.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records(tmp / "out.jsonl", "result"))
    assert {"time_avg_us", "busbw_GBps", "wrong", "memcpy_GBps"} <= set(rows[0])
    forced = [r for r in recs if r.get("algorithm") == "native[ring]"]
    assert forced and all(r["primitive"] == "allreduce" and r["wrong"] == 0 for r in forced)
    if prov["mpi_family"] == "mpich":
        s = forced[0]["native_forced"]
        assert s["variable"] == "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM" and s["name"] == "ring"
        assert s["method"] == "MPI_T"


def test_trace_is_a_chrome_trace(sweeps):
    tmp, _ = sweeps[2]
    with open(tmp / "trace.json") as f:
        trace = json.load(f)
    ev = trace["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    for prim, algs in HAND_WRITTEN.items():
        for alg in algs:
            assert any(t.startswith(f"{prim} {alg}:") for t in names), (prim, alg)
    slices = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["tid"] in (0, 1) for e in slices)
    kinds = {e["name"].split()[0] for e in slices}
    assert {"send", "recv", "sendrecv", "reduce"} <= kinds
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    assert starts and starts == {e["id"] for e in ev if e["ph"] == "f"}


def test_broken_algorithm_is_caught(tmp_path):
    (tmp_path / "broken.py").write_text(BROKEN)
    proc, text = bench(2, ["-p", "allreduce", "-b", "8", "-e", "1K", "-f", "8", "-n", "2",
                           "-w", "1", "--import", "broken.py", "--algorithm",
                           "ring,broken,lazy", "-J", "bad.jsonl", "--no-memcpy"], tmp_path)
    assert proc.returncode != 0, text[-4000:]
    res = records(tmp_path / "bad.jsonl", "result")
    by = {}
    for r in res:
        by.setdefault(r["algorithm"], []).append(r)
        assert r["time_us"]["avg"] > 0 and r["checked"]
    assert all(r["wrong"] == 0 for r in by["ring"])
    assert all(r["wrong"] == 1 for r in by["broken"])
    assert all(r["wrong"] == 2 * r["count"] for r in by["lazy"])   # sentinel never overwritten
    assert "FAILED" in text


def test_report_and_plot(sweeps, tmp_path):
    files = [sweeps[2][0] / "out.jsonl", sweeps[3][0] / "out.jsonl"]
    proc = serial(["report"] + files + ["-o", tmp_path / "report.md"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "report.md").read_text()
    for prim in mpicoll.PRIMITIVES:
        assert f"### {prim}, N = 2" in text and f"### {prim}, N = 3" in text
    assert "| size | winner |" in text and "speedup over native" in text
    if not HAS_MPL:
        pytest.skip("matplotlib is not installed: plot not tested (pip install 'mpicoll[plot]')")
    proc = serial(["plot"] + files + ["-o", tmp_path / "p.png"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_writes_a_model(tmp_path):
    proc, text = bench(2, ["fit", "-b", "8", "-e", "512", "-f", "64", "-n", "2", "-w", "1",
                           "--primitive", "allreduce,barrier", "--fit-maxbytes", "16K",
                           "-o", "model.json"], tmp_path)
    assert proc.returncode == 0, text[-4000:]
    with open(tmp_path / "model.json") as f:
        model = json.load(f)
    for key in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte", "overhead_s"):
        assert model[key] >= 0
    got = {(r["primitive"], r["algorithm"]) for r in model["comparison"]}
    assert got == {("allreduce", a) for a in COSTS["allreduce"]} | \
        {("barrier", a) for a in COSTS["barrier"]}
    assert all(r["measured_us"] > 0 and r["error"] is not None for r in model["comparison"])
    assert "predicted(us)" in text


def test_predict_names_crossovers(tmp_path):
    args = ["predict", "--ranks", "2..64", "--bytes", "8..1M", "--alpha", "2e-6",
            "--beta", "1e-10", "--gamma", "2e-10", "--json", "pred.json"]
    if HAS_MPL:
        args += ["-o", "pred.png"]
    proc = serial(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "pred.json") as f:
        out = json.load(f)
    ar = out["primitives"]["allreduce"]
    small, large = ar["by_ranks"][0], ar["by_ranks"][-1]
    assert small["pow2"]["segments"][0][2] == "recursive_doubling"
    assert any(s[2] in ("ring", "rabenseifner") for s in large["pow2"]["segments"])
    assert ar["by_bytes"] and "crossovers" in proc.stdout
    if HAS_MPL:
        assert (tmp_path / "pred.png").stat().st_size > 0


def test_tune_table_drives_auto(tmp_path, monkeypatch):
    proc, text = bench(2, ["tune", "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-w", "1",
                           "--primitive", "allreduce,bcast", "-o", "table.json"], tmp_path)
    assert proc.returncode == 0, text[-4000:]
    with open(tmp_path / "table.json") as f:
        table = json.load(f)
    assert table["format"] == "mpicoll-tuning/1" and table["label"]
    from mpicoll import _defaults
    monkeypatch.setenv("MPICOLL_TUNING", str(tmp_path / "table.json"))
    for prim in ("allreduce", "bcast"):
        for m in table["measurements"][prim]["2"]:
            assert _defaults.default_algorithm(prim, size=2, nbytes=m["nbytes"]) == m["algorithm"]
            assert m["median_us"][m["algorithm"]] <= 1.05 * m["median_us"][m["fastest"]]
            assert m["algorithm"] != "native"      # hand-written only unless --include-native


# -- serial units ------------------------------------------------------------

def test_sizes_and_iterations():
    assert units.parse_size("8") == 8 and units.parse_size("4K") == 4096
    assert units.parse_size("1M") == units.parse_size("1MiB") == 1 << 20
    assert units.parse_size("2G") == 2 << 30
    with pytest.raises(ValueError):
        units.parse_size("1.5")
    assert units.size_sweep(8, 1 << 20, 4)[:3] == [8, 32, 128]
    assert units.size_sweep(8, 1 << 20, 4)[-1] == 1 << 19
    assert units.iterations(1024, 20, 5, 1 << 20) == (20, 5)
    it, w = units.iterations(64 << 20, 20, 5, 1 << 20)
    assert it == 5 and w == 1
    assert units.parse_range("2..10000") == (2, 10000)
    assert units.parse_range("8,1K", sizes=True) == [8, 1024]


class _FakeComm:
    def __init__(self, n, rank):
        self.n, self.rank = n, rank

    def Get_size(self):
        return self.n

    def Get_rank(self):
        return self.rank


def _cases(prim, n, nbytes, dtype, opname, root=0):
    from mpi4py import MPI
    am = specs.ArrayModule("numpy")
    op = getattr(MPI, opname.upper())
    return [specs.Case(specs.SPECS[prim], nbytes, dtype=dtype, op=op, opname=opname, root=root,
                       comm=_FakeComm(n, r), am=am) for r in range(n)]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "float32", "int64"])
@pytest.mark.parametrize("opname", ["sum", "prod", "min", "max"])
def test_reduction_check_data_are_exact(dtype, opname):
    """The closed-form expected result equals the reduction of every rank's input."""
    ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[opname]
    for n in (1, 2, 3, 5, 8, 13):
        cases = _cases("allreduce", n, 4096, dtype, opname)
        g = np.arange(cases[0].count, dtype=np.int64)
        acc = cases[0].red_input(g)
        for c in cases[1:]:
            acc = ufunc(acc, c.red_input(g), dtype=acc.dtype)
        want = cases[0].red_expected(g)
        assert np.array_equal(acc, want), (n, dtype, opname)
        if opname == "sum" and n > 1:
            assert len(np.unique(want)) > 1


@pytest.mark.parametrize("prim", ["bcast", "gather", "allgather", "scatter", "alltoall",
                                  "reduce", "allreduce", "reduce_scatter"])
def test_check_layouts_match_the_primitive(prim):
    """Simulate the collective on every rank's check input: the outputs match output_fn."""
    n, root = 3, 1
    cases = _cases(prim, n, 4096, "float32", "sum", root)
    for c in cases:
        c.prepare_check()
    ins = [specs.SPECS[prim].io(c)[0] for c in cases]
    c0 = cases[0]
    if prim == "bcast":
        outs = [ins[root]] * n
    elif prim == "gather":
        outs = {root: np.concatenate(ins)}
    elif prim == "allgather":
        outs = [np.concatenate(ins)] * n
    elif prim == "scatter":
        outs = [ins[root][r * c0.block:(r + 1) * c0.block] for r in range(n)]
    elif prim == "alltoall":
        outs = [np.concatenate([ins[s][r * c0.block:(r + 1) * c0.block] for s in range(n)])
                for r in range(n)]
    else:
        total = np.sum(ins, axis=0, dtype=np.float32)
        if prim == "reduce":
            outs = {root: total}
        elif prim == "allreduce":
            outs = [total] * n
        else:
            outs = [total[r * c0.block:(r + 1) * c0.block] for r in range(n)]
    outs = dict(enumerate(outs)) if isinstance(outs, list) else outs
    outs = {r: np.array(v, copy=True) for r, v in outs.items()}   # before any is modified
    for r, c in enumerate(cases):
        out = specs.SPECS[prim].io(c)[1]
        if r in outs:
            out[...] = outs[r]
        assert c.wrong() == 0, (prim, r)
        if out is not None and out.size:
            out[0] += 1
            assert c.wrong() == 1


def _write_table(path, rules):
    path.write_text(json.dumps({"format": "mpicoll-tuning/1", "label": "test", "rules": rules}))
    return str(path)


def test_auto_reads_the_tuning_table(tmp_path, monkeypatch):
    from mpi4py import MPI
    from mpicoll import _defaults
    rules_only = {}
    monkeypatch.setenv("MPICOLL_TUNING", "none")
    for nb in (8, 4096, 1 << 20):
        rules_only[nb] = _defaults.default_algorithm("allreduce", size=2, nbytes=nb)
    path = _write_table(tmp_path / "t.json", {"allreduce": {"2": [
        {"max_nbytes": 100, "algorithm": "reduce_bcast"},
        {"max_nbytes": 5000, "algorithm": "ring"},
        {"max_nbytes": None, "algorithm": "no_such_algorithm"}]}})
    monkeypatch.setenv("MPICOLL_TUNING", path)
    d = _defaults.default_algorithm
    assert d("allreduce", size=2, nbytes=8) == "reduce_bcast"
    assert d("allreduce", size=2, nbytes=4096) == "ring"
    # ring needs a commutative op: a non-commutative one falls back to the rules
    assert d("allreduce", size=2, nbytes=4096, commutative=False) == "recursive_doubling"
    assert d("allreduce", size=2, nbytes=1 << 20) == rules_only[1 << 20]   # unknown name
    assert d("allreduce", size=3, nbytes=8) == "recursive_doubling"          # no entry: rules
    assert mpicoll.allreduce(np.ones(2), algorithm="auto", comm=MPI.COMM_SELF)[0] == 1
    monkeypatch.setenv("MPICOLL_TUNING", str(tmp_path / "missing.json"))
    with pytest.raises(mpicoll.ArgumentError, match="MPICOLL_TUNING"):
        d("allreduce", size=2, nbytes=8)
    (tmp_path / "junk.json").write_text("{}")
    monkeypatch.setenv("MPICOLL_TUNING", str(tmp_path / "junk.json"))
    with pytest.raises(mpicoll.ArgumentError, match="mpicoll-tuning/1"):
        d("allreduce", size=2, nbytes=8)


def test_default_table_is_shipped_and_labelled(monkeypatch):
    from mpicoll import _defaults
    monkeypatch.delenv("MPICOLL_TUNING", raising=False)
    with open(_defaults.DEFAULT_TUNING_PATH) as f:
        table = json.load(f)
    assert table["format"] == _defaults.TABLE_FORMAT
    assert "2-core" in table["label"]
    for prim, sizes in table["rules"].items():
        for n, ranges in sizes.items():
            assert ranges[-1]["max_nbytes"] is None
            for r in ranges:     # auto stays hand-written (P2PComm promises mpicoll's algorithms)
                assert r["algorithm"] in mpicoll.algorithms(prim) and r["algorithm"] != "native"
    assert _defaults.tuning_table() == table["rules"]


def test_build_rules_picks_measured_best():
    from mpicoll.bench.tune import build_rules

    def rec(nb, alg, t, wrong=0):
        return {"primitive": "allreduce", "algorithm": alg, "call_nbytes": nb, "wrong": wrong,
                "time_us": {"avg": t, "median": t}}
    recs = [rec(8, "ring", 5), rec(8, "recursive_doubling", 3), rec(8, "broken", 1),
            rec(1024, "ring", 9), rec(1024, "recursive_doubling", 10),
            rec(1024, "rabenseifner", 1, wrong=4), rec(65536, "ring", 1), rec(65536, "native", 2)]
    rules, ev = build_rules(recs)
    assert rules["allreduce"] == [{"max_nbytes": 90, "algorithm": "recursive_doubling"},
                                  {"max_nbytes": None, "algorithm": "ring"}]
    rules_n, _ = build_rules(recs + [rec(65536, "native", 0.5)], include_native=True)
    assert rules_n["allreduce"][-1] == {"max_nbytes": None, "algorithm": "native"}
    assert [e["algorithm"] for e in ev["allreduce"]] == ["recursive_doubling", "ring", "ring"]
    # within the tolerance the previous range's algorithm keeps a size
    recs.append(rec(4096, "ring", 10.3))
    recs.append(rec(4096, "recursive_doubling", 10))
    rules, _ = build_rules(recs, tolerance=0.05)
    assert rules["allreduce"][-1] == {"max_nbytes": None, "algorithm": "ring"}
    rules, _ = build_rules(recs, tolerance=0.0)
    assert [r["algorithm"] for r in rules["allreduce"]] == [
        "recursive_doubling", "ring", "recursive_doubling", "ring"]


def test_trace_hooks_cost_nothing_when_unset():
    from mpi4py import MPI
    from mpicoll import _context, _ops
    assert _context.trace_hook is None and _ops.trace_hook is None
    pcomm = _context.private_comm(MPI.COMM_SELF)
    assert type(_context.Ctx(pcomm, "allreduce", "ring")) is _context.Ctx
    seen = []
    _context.trace_hook = _ops.trace_hook = lambda *a: seen.append(a)
    try:
        ctx = _context.Ctx(pcomm, "allreduce", "ring")
        assert isinstance(ctx, _context._TracedCtx)
        a, b = np.ones(3), np.ones(3)
        _ops.combine(MPI.SUM, a, b, b)
    finally:
        _context.trace_hook = _ops.trace_hook = None
    assert b.tolist() == [2, 2, 2] and seen[0][0] == "reduce"
