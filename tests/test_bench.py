"""mpicoll.bench: tiny sweeps under mpiexec, result files, report/plot/trace/fit/predict/tune.

Serial pytest; MPI jobs go through ``launch.run_mpi`` (bounded by
MPIEXEC_TIMEOUT). No timing thresholds anywhere: only the shape and the
correctness of what the bench writes.
"""
import csv
import importlib.util
import json
import os
import re
import sys

import numpy as np
import pytest
from bench_cases import every_rank
from launch import run_mpi

import mpicoll
from mpicoll.bench import specs, units
from mpicoll.bench.formula_prices import COSTS

PY = sys.executable
BENCH = [PY, "-m", "mpicoll.bench"]
TIMEOUT = 300
HAS_MPL = importlib.util.find_spec("matplotlib") is not None
HAND_WRITTEN = {p: [a for a in mpicoll.algorithms(p) if a != "native"] for p in mpicoll.PRIMITIVES}

BROKEN = '''
from mpicoll.core.registry import register, lookup
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
            assert "raw" in algs, (prim, size, algs)      # all includes the raw mpi4py call
            raw = next(r for r in mine if r["bytes"] == size and r["algorithm"] == "raw")
            assert all(r["vs_raw"] == pytest.approx(raw["time_us"]["avg"] / r["time_us"]["avg"])
                       for r in mine if r["bytes"] == size)
        for r in mine:
            assert r["wrong"] == 0 and r["checked"], r
            assert r["nranks"] == n and r["iters"] == 2 and r["warmup"] == 1
            # What moved the checked call's messages: ours on the host path, none for the
            # library's collective, nothing recorded for the raw mpi4py call.
            moved = r["moved_by"]
            if r["algorithm"] == "raw":
                assert moved is None, r
            elif r["algorithm"].startswith("native"):          # native[ring]: forced
                assert moved == {"host": {"msgs": 0, "bytes": 0}}, r
            elif r["algorithm"] == "shm":       # reads of peers' memory, no message
                assert all(c["msgs"] == 0 for c in moved.values()), r
                if prim != "barrier":
                    (path, c), = moved.items()
                    assert path in ("shm-cma", "shm-segment", "shm-mailbox"), r
                    assert (c.get("read_bytes", 0) > 0) is (n > 1), r
            else:
                assert set(moved) == {"host"} and moved["host"]["msgs"] > 0, r
                assert (moved["host"]["bytes"] > 0) is (r["bytes"] > 0), r
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
    assert "| raw time (µs) | winner vs raw | hand-written vs raw | native vs raw |" in text
    if not HAS_MPL:
        pytest.skip("matplotlib is not installed: plot not tested (pip install 'mpicoll[plot]')")
    proc = serial(["plot"] + files + ["-o", tmp_path / "p.png"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_writes_a_model(tmp_path):
    args = ["fit", "-b", "8", "-e", "512", "-f", "64", "-n", "2", "-w", "1",
            "--primitive", "allreduce,barrier", "--fit-maxbytes", "16K", "-o", "model.json"]
    proc = run_mpi(2, BENCH + args, timeout=TIMEOUT, cwd=str(tmp_path),
                   env={"MPICOLL_NODES": ""})         # one node, whatever the caller set
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    with open(tmp_path / "model.json") as f:
        model = json.load(f)
    for key in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte", "overhead_s"):
        assert model[key] >= 0
    got = {(r["primitive"], r["algorithm"]) for r in model["comparison"]}
    assert got == {("allreduce", a) for a in HAND_WRITTEN["allreduce"]} | \
        {("barrier", a) for a in HAND_WRITTEN["barrier"]}
    assert all(r["model"] == "formula" for r in model["comparison"]
               if r["algorithm"] in COSTS[r["primitive"]])
    # The shm algorithms read peers' memory: the message model (α, β, γ) does not price them.
    assert all(r["measured_us"] > 0 and (r["error"] is not None) is (r["algorithm"] != "shm")
               for r in model["comparison"])
    assert "predicted(us)" in text
    # One node (no MPICOLL_NODES): both levels written, inter = intra, and the file says so.
    assert model["layout"]["n_nodes"] == 1
    assert model["levels"]["inter"].startswith("not measured")
    assert (model["alpha_inter_s"], model["beta_inter_s_per_byte"]) == \
        (model["alpha_intra_s"], model["beta_intra_s_per_byte"]) == \
        (model["alpha_s"], model["beta_s_per_byte"])


@pytest.mark.full
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


def test_predict_past_the_plans_says_nothing_is_priced(tmp_path):
    """Gatherv's algorithms have no formula: past PLAN_MAX_RANKS predict says none is priced."""
    from mpicoll.bench.predict import PLAN_MAX_RANKS
    n = PLAN_MAX_RANKS + 236
    proc = serial(["predict", "--primitive", "gatherv", "--ranks", f"2..{n}", "--bytes",
                   "8..1M", "--json", "pred.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "pred.json") as f:
        by_bytes = json.load(f)["primitives"]["gatherv"]["by_bytes"]
    last = by_bytes[-1]
    assert last["nranks"] == n and last["segments"] == [] and last["crossovers"] == []
    assert by_bytes[0]["segments"]                        # small N: priced from its plans
    assert f"N = {n}: no algorithm priced" in proc.stdout


def test_tune_table_drives_auto(tmp_path, monkeypatch):
    proc, text = bench(2, ["tune", "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-w", "1",
                           "--primitive", "allreduce,bcast", "-o", "table.json"], tmp_path)
    assert proc.returncode == 0, text[-4000:]
    with open(tmp_path / "table.json") as f:
        table = json.load(f)
    assert table["format"] == "mpicoll-tuning/1" and table["label"]
    from mpicoll.core import defaults as _defaults
    monkeypatch.setenv("MPICOLL_TUNING", str(tmp_path / "table.json"))
    for prim in ("allreduce", "bcast"):
        for m in table["measurements"][prim]["2"]:
            assert _defaults.default_algorithm(prim, size=2, nbytes=m["nbytes"]) == m["algorithm"]
            assert m["median_us"][m["algorithm"]] <= 1.05 * m["median_us"][m["fastest"]]
            assert m["algorithm"] != "native"      # hand-written only unless --include-native
            assert "raw" not in m["median_us"]       # the raw mpi4py call is no algorithm=


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


def test_explicit_sizes_replace_the_sweep(tmp_path):
    """--sizes 64K,8,1K: exactly those sizes, in order, whatever -b/-e/-f say."""
    proc, text = bench(1, ["allreduce", "--algorithm", "ring", "--sizes", "64K,8,1K", "-b", "2",
                           "-e", "4", "-n", "1", "-w", "0", "-J", "out.jsonl"], tmp_path)
    assert proc.returncode == 0, text[-3000:]
    got = [r["bytes"] for r in records(tmp_path / "out.jsonl", "result")]
    assert got == [8, 1024, 65536], got
    bad = serial(["allreduce", "--sizes", "1..8"], tmp_path)
    assert bad.returncode == 2 and "--sizes: expected a comma list of sizes" in bad.stderr


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "float32", "int64"])
@pytest.mark.parametrize("opname", ["sum", "prod", "min", "max"])
def test_reduction_check_data_are_exact(dtype, opname):
    """The closed-form expected result equals the reduction of every rank's input."""
    ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[opname]
    for n in (1, 2, 3, 5, 8, 13):
        cases = every_rank("allreduce", n, 4096, dtype, opname)
        g = np.arange(cases[0].count, dtype=np.int64)
        acc = cases[0].red_input(g)
        for c in cases[1:]:
            acc = ufunc(acc, c.red_input(g), dtype=acc.dtype)
        want = cases[0].red_expected(g)
        assert np.array_equal(acc, want), (n, dtype, opname)
        if opname == "sum" and n > 1:
            assert len(np.unique(want)) > 1


@pytest.mark.parametrize("prim", [p for p, s in specs.SPECS.items() if s is not None
                                  and p != "barrier"])
def test_the_check_counts_each_wrong_element(prim):
    """An output holding the spec's expected values passes; one changed element is counted.

    That those values are the primitive's meaning is tests/test_specs_agree.py's: the
    symbolic spec evaluated on the same input gives them.
    """
    n, root = 3, 1
    for c in every_rank(prim, n, 4096, "float32", "sum", root):
        c.prepare_check()
        inp, out = specs.SPECS[prim].io(c)
        if out is not None and out is not inp:
            assert c.wrong() == out.size        # the sentinel: never an expected value
            out[...] = specs.SPECS[prim].output_fn(c)(np.arange(out.size, dtype=np.int64))
        assert c.wrong() == 0, (prim, c.rank)
        for buf in (out, inp):
            if buf is not None and buf.size:
                buf[0] += 1
                assert c.wrong() == 1, (prim, c.rank)
                buf[0] -= 1


def _write_table(path, rules):
    path.write_text(json.dumps({"format": "mpicoll-tuning/1", "label": "test", "rules": rules}))
    return str(path)


def test_auto_reads_the_tuning_table(tmp_path, monkeypatch):
    from mpi4py import MPI

    from mpicoll.core import defaults as _defaults
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
    from mpicoll.core import defaults as _defaults
    monkeypatch.delenv("MPICOLL_TUNING", raising=False)
    with open(_defaults.DEFAULT_TUNING_PATH) as f:
        table = json.load(f)
    assert table["format"] == _defaults.TABLE_FORMAT
    assert "2-core" in table["label"]
    for prim, sizes in table["rules"].items():
        for ranges in sizes.values():
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
    # the reference columns are never picked, however fast, --include-native or not
    for ref in ("raw", "nccl"):
        for inc in (False, True):
            rules_r, ev_r = build_rules(recs + [rec(8, ref, 0.1), rec(65536, ref, 0.1)],
                                        include_native=inc)
            assert all(r["algorithm"] != ref for r in rules_r["allreduce"])
            assert all(ref not in e["median_us"] for e in ev_r["allreduce"])
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

    from mpicoll.device import reduce as _ops
    from mpicoll.engine import context as _context
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


# -- shared-memory buffers ------------------------------------------------------

@pytest.mark.parametrize("shared", [False, True], ids=["symmetric", "shared-result"])
def test_symmetric_buffers(tmp_path, shared):
    """--xp shm: every row on arrays in the node's shared memory, checked; the shm rows read
    them in place (shm-view); with --shared-result the shm rows of allreduce and allgather
    write one result for the node and read nothing back for it.
    """
    args = ["all", "--sizes", "8,200000", "-n", "2", "-w", "1", "--xp", "shm", "-J", "out.jsonl",
            "--csv", "out.csv", "--algorithm", "raw,native,shm,ring"]
    proc, text = bench(3, args + (["--shared-result"] if shared else []), tmp_path)
    assert proc.returncode == 0, text[-4000:]
    recs = records(tmp_path / "out.jsonl")
    prov = recs[0]
    assert prov["xp"] == "shm" and prov["shm"]["nodes"][0]["ranks"] == 3
    assert "# shm algorithms: peers' ordinary buffers read" in text
    res = [r for r in recs if r["type"] == "result"]
    assert res and all(r["wrong"] == 0 and r["checked"] for r in res)
    assert {r["algorithm"] for r in res if r["primitive"] == "allreduce"} == \
        {"raw", "native", "shm", "ring"}
    for r in res:
        if r["algorithm"] != "shm" or r["primitive"] == "barrier":
            continue
        (path, c), = r["moved_by"].items()
        # small calls go through the mailbox, except into a node-shared result
        nothing_back = shared and r["primitive"] in ("allgather", "allreduce")
        small = r["bytes"] <= 16384 and not nothing_back
        assert path == ("shm-mailbox" if small else "shm-view") and c["msgs"] == 0, r
        assert ("read_bytes" in c) is not (nothing_back and r["primitive"] == "allgather"), r


# -- GPU options and the nccl column (CPU-only: no CuPy, a fake NCCL) -------------

HAS_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed: --xp cupy does not fail here")
def test_xp_cupy_without_cupy_names_the_reason(tmp_path):
    proc, text = bench(2, ["allreduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0",
                           "--xp", "cupy", "--no-memcpy"], tmp_path, timeout=60)
    assert proc.returncode != 0, text[-4000:]
    assert "--xp cupy: no usable GPU on rank 0: cupy is not installed" in text, text[-4000:]
    assert "Traceback" not in text


def test_nccl_with_numpy_is_skipped_with_the_reason(tmp_path):
    proc, text = bench(2, ["allreduce", "-b", "8", "-e", "64", "-f", "8", "-n", "2", "-w", "1",
                           "--algorithm", "ring,native,nccl", "-J", "out.jsonl",
                           "--csv", "out.csv", "--no-memcpy"], tmp_path)
    assert proc.returncode == 0, text[-4000:]
    why = "nccl: --xp numpy: NCCL runs on CuPy device buffers only (use --xp cupy)"
    assert text.count(why) == 1, text[-4000:]           # once, from rank 0
    recs = records(tmp_path / "out.jsonl")
    assert recs[0]["nccl"] == {"requested": True, "used": False, "reason": why}
    assert recs[-1]["nccl"]["reason"] == why
    res = [r for r in recs if r["type"] == "result"]
    assert {r["algorithm"] for r in res} == {"ring", "native"}
    assert all(r["wrong"] == 0 and r["xp"] == "numpy" and r["path"] == "host" for r in res)
    assert "gpu" not in recs[0] and "device_path" not in recs[0]   # cupy runs only
    with open(tmp_path / "out.csv") as f:
        rows = list(csv.DictReader(f))
    assert {row["path"] for row in rows} == {"host"}
    # moved_by as path:msgs:bytes, the same as the JSON record's.
    for row, rec in zip(rows, res, strict=False):
        want = " ".join(f"{p}:{c['msgs']}:{c['bytes']}" for p, c in rec["moved_by"].items())
        assert row["moved_by"] == want and row["algorithm"] == rec["algorithm"], (row, rec)
        assert want == "host:0:0" if rec["algorithm"] == "native" else \
            re.fullmatch(r"host:[1-9]\d*:[1-9]\d*", want), want


class _FakeNccl:
    """A stand-in for ``cupy.cuda.nccl``: NCCL's type and op codes, a recording communicator.

    There is no NCCL_INT16, as in NCCL.
    """

    NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32 = 0, 1, 2, 3
    NCCL_INT64, NCCL_UINT64, NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = 4, 5, 6, 7, 8
    NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN = 0, 1, 2, 3

    def __init__(self, fail_init=None, fail_uid=False, version=22005):
        self.fail_init, self.fail_uid, self.version = fail_init, fail_uid, version
        self.comms = []

    def get_unique_id(self):
        if self.fail_uid:
            raise RuntimeError("NCCL_ERROR_SYSTEM_ERROR: no network")
        return tuple(range(128))

    def get_version(self):
        return self.version

    def NcclCommunicator(self, ndev, uid, rank):
        if self.fail_init is not None:
            raise RuntimeError(self.fail_init)
        comm = _FakeNcclComm(ndev, uid, rank)
        self.comms.append(comm)
        return comm


class _FakeNcclComm:
    def __init__(self, ndev, uid, rank):
        self.ndev, self.uid, self.rank = ndev, uid, rank
        self.calls, self.destroyed = [], False

    def destroy(self):
        self.destroyed = True

    def __getattr__(self, name):
        if name not in ("allReduce", "reduce", "bcast", "allGather", "reduceScatter"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, args))


class _GatherComm:
    """mpi4py stand-in for one rank of ``size``: ``peer(x, r)`` is rank r's contribution."""

    def __init__(self, size, rank=0, peer=lambda x, r: x):
        self.size, self.rank, self.peer = size, rank, peer

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return self.rank

    def allgather(self, x):
        return [x if r == self.rank else self.peer(x, r) for r in range(self.size)]

    def bcast(self, x, root=0):
        return x if root == self.rank else self.peer(x, root)


class _FakeAM:
    name = "cupy"

    def __init__(self, gpu_id="node1 0000:3B:00.0"):
        self.gpu_id, self.syncs = gpu_id, 0

    def stream_ptr(self):
        return 4242

    def sync(self):
        self.syncs += 1


def _other_gpu(x, r):
    """Rank r's (ok, why, gpu id): its own GPU on the same node."""
    return (x[0], x[1], f"node1 0000:{r:02X}:00.0") if isinstance(x, tuple) else x


def test_nccl_dtype_and_op_codes():
    from mpi4py import MPI

    from mpicoll.bench import nccl
    f = _FakeNccl()
    assert nccl.dtype_code(f, np.float32) == f.NCCL_FLOAT32
    assert nccl.dtype_code(f, "float16") == f.NCCL_FLOAT16
    assert nccl.dtype_code(f, np.dtype("uint64")) == f.NCCL_UINT64
    assert nccl.dtype_code(f, "int8") == f.NCCL_INT8 and nccl.dtype_code(f, "int64") == 4
    for bad in ("int16", "bool", "complex64"):
        with pytest.raises(nccl.Unsupported, match=f"NCCL has no {bad} type"):
            nccl.dtype_code(f, bad)
    assert [nccl.op_code(f, op) for op in (MPI.SUM, MPI.PROD, MPI.MIN, MPI.MAX)] == [0, 1, 3, 2]
    assert nccl.op_code(f, "max") == f.NCCL_MAX
    with pytest.raises(nccl.Unsupported, match="no reduction"):
        nccl.op_code(f, MPI.BAND)
    user = MPI.Op.Create(lambda a, b, t: None, commute=True)
    try:
        with pytest.raises(nccl.Unsupported, match="user-defined op"):
            nccl.op_code(f, user)
    finally:
        user.Free()


def test_nccl_skips_shared_gpus_and_failures():
    from mpicoll.bench import nccl
    assert nccl.shared_gpu_reason(["a 01", "a 02", "b 01"]) is None    # same bus, other node
    why = nccl.shared_gpu_reason(["a 01", "a 02", "a 01"])
    assert why.startswith("nccl: ranks 0 and 2 share one GPU (a 01)")
    ok = lambda: (True, "NCCL 22005")                                   # noqa: E731
    # one GPU for every rank (e.g. 4 ranks on a 1-GPU node): skipped before NCCL is touched
    f = _FakeNccl()
    col = nccl.setup(_GatherComm(4), _FakeAM(), np.float32, nccl=f, status=ok)
    assert not col.usable and "ranks 0 and 1 share one GPU" in col.reason and not f.comms
    # NCCL missing on one rank: every rank skips, naming it
    peer = lambda x, r: (False, "no NCCL here", x[2]) if r == 2 else _other_gpu(x, r)  # noqa
    col = nccl.setup(_GatherComm(3, peer=peer), _FakeAM(), np.float32, nccl=f, status=ok)
    assert col.reason == "nccl: not usable on rank 2: no NCCL here"
    col = nccl.setup(_GatherComm(2, peer=_other_gpu), _FakeAM(), np.int16, nccl=f, status=ok)
    assert "NCCL has no int16 type" in col.reason
    col = nccl.setup(_GatherComm(2, peer=_other_gpu), _FakeAM(), np.float32,
                     nccl=_FakeNccl(fail_uid=True), status=ok)
    assert "get_unique_id() failed on rank 0" in col.reason
    col = nccl.setup(_GatherComm(2, peer=_other_gpu), _FakeAM(), np.float32,
                     nccl=_FakeNccl(fail_init="NCCL_ERROR_INVALID_USAGE"), status=ok)
    assert col.reason == ("nccl: NcclCommunicator failed on rank 0: "
                          "RuntimeError: NCCL_ERROR_INVALID_USAGE")
    # another rank's failure: this rank's communicator is freed, the reason names that rank
    peer = lambda x, r: "NcclError: boom" if x is None else _other_gpu(x, r)  # noqa: E731
    col = nccl.setup(_GatherComm(2, peer=peer), _FakeAM(), np.float32, nccl=f, status=ok)
    assert col.reason == "nccl: NcclCommunicator failed on rank 1: NcclError: boom"
    assert f.comms[-1].destroyed
    # numpy buffers: no communication at all
    col = nccl.setup(None, specs.ArrayModule("numpy"), np.float32, nccl=f, status=ok)
    assert "--xp numpy" in col.reason
    # all well: a communicator of the world's size, this rank, rank 0's unique id
    uid = tuple(range(128))
    peer = lambda x, r: (uid, None) if x == (None, None) else _other_gpu(x, r)  # noqa: E731
    col = nccl.setup(_GatherComm(3, rank=1, peer=peer), _FakeAM("node1 0000:01:00.0"),
                     np.float32, nccl=f, status=ok)
    assert col.usable and col.info()["nccl_version"] == 22005
    assert col.info()["multi_rank_gpu"] is False
    c = f.comms[-1]
    assert (c.ndev, c.rank, c.uid) == (3, 1, uid)
    col.close()
    assert c.destroyed


def test_nccl_tries_multi_rank_mode_on_a_shared_gpu_from_2_30(monkeypatch):
    """Ranks on one GPU: skipped before NCCL 2.30 (the reason says what would work); from 2.30
    the communicator is tried with NCCL_MULTI_RANK_GPU_ENABLE=1, a failure naming that.
    """
    from mpicoll.bench import nccl
    assert [nccl.version_text(v) for v in (22805, 23000, 2708, None)] == [
        "2.28.5", "2.30.0", "2.7.8", "unknown"]
    monkeypatch.delenv(nccl.MULTI_RANK_GPU_VAR, raising=False)
    ok = lambda: (True, "NCCL")                                         # noqa: E731
    old = _FakeNccl(version=22805)
    col = nccl.setup(_GatherComm(2), _FakeAM(), np.float32, nccl=old, status=ok)
    assert not col.usable and not old.comms
    assert "share one GPU" in col.reason and "NCCL 2.28.5 here: NCCL >= 2.30.0" in col.reason
    assert nccl.MULTI_RANK_GPU_VAR not in os.environ
    # one rank with an older NCCL: the oldest decides, on every rank
    peer = lambda x, r: 22900 if isinstance(x, int) else x              # noqa: E731
    col = nccl.setup(_GatherComm(2, peer=peer), _FakeAM(), np.float32,
                     nccl=_FakeNccl(version=23100), status=ok)
    assert not col.usable and "NCCL 2.29.0 here" in col.reason
    new = _FakeNccl(version=23100)
    uid = tuple(range(128))
    peer = lambda x, r: (uid, None) if x == (None, None) else x        # noqa: E731
    col = nccl.setup(_GatherComm(2, peer=peer), _FakeAM(), np.float32, nccl=new, status=ok)
    assert col.usable and new.comms and col.info()["multi_rank_gpu"] is True
    assert os.environ[nccl.MULTI_RANK_GPU_VAR] == "1"
    monkeypatch.setenv(nccl.MULTI_RANK_GPU_VAR, "0")                     # the user's setting stays
    col = nccl.setup(_GatherComm(2, peer=peer), _FakeAM(), np.float32,
                     nccl=_FakeNccl(version=23100, fail_init="NCCL_ERROR_INVALID_USAGE"),
                     status=ok)
    assert not col.usable and os.environ[nccl.MULTI_RANK_GPU_VAR] == "0"
    assert col.reason.endswith("(ranks share a GPU; tried NCCL 2.31.0's multi-rank mode, "
                               "NCCL_MULTI_RANK_GPU_ENABLE=0)")


def _simulate(calls, n, fake, cases):
    """Run each rank's recorded NCCL call with NCCL's semantics on host memory."""
    import ctypes
    sizes = {a.ctypes.data: a.nbytes for c in cases for a in (c.send, c.recv) if a is not None}
    dtypes = {v: np.dtype(k[5:].lower()) for k, v in vars(type(fake)).items()
              if k.startswith("NCCL_") and k[5:] not in ("SUM", "PROD", "MAX", "MIN")}
    ufuncs = {fake.NCCL_SUM: np.add, fake.NCCL_PROD: np.multiply, fake.NCCL_MAX: np.maximum,
              fake.NCCL_MIN: np.minimum}

    def view(ptr, count, dt):
        # a wrong pointer or count must fail here, not read past a buffer
        assert count * dtypes[dt].itemsize <= sizes.get(ptr, -1), (ptr, count, dt)
        buf = (ctypes.c_char * (count * dtypes[dt].itemsize)).from_address(ptr)
        return np.frombuffer(buf, dtype=dtypes[dt])
    method = calls[0][0]
    assert all(c[0] == method for c in calls)
    args = [c[1] for c in calls]
    assert all(a[-1] == 4242 for a in args)            # the current stream, last
    if method == "bcast":
        buf, count, dt, root, _ = args[0]
        src = view(args[root][0], count, dt).copy()
        for a in args:
            view(a[0], count, dt)[:] = src
    elif method in ("allReduce", "reduce"):
        count, dt, op = args[0][2:5]
        total = ufuncs[op].reduce([view(a[0], count, dt) for a in args], dtype=dtypes[dt])
        roots = range(n) if method == "allReduce" else [args[0][5]]
        for r in roots:
            view(args[r][1], count, dt)[:] = total
    elif method == "allGather":
        count, dt = args[0][2:4]
        full = np.concatenate([view(a[0], count, dt) for a in args])
        for a in args:
            view(a[1], n * count, dt)[:] = full
    else:                                              # reduceScatter: count = recvcount
        count, dt, op = args[0][2:5]
        total = ufuncs[op].reduce([view(a[0], n * count, dt) for a in args], dtype=dtypes[dt])
        for r, a in enumerate(args):
            view(a[1], count, dt)[:] = total[r * count:(r + 1) * count]


@pytest.mark.parametrize("prim", ["bcast", "reduce", "allreduce", "allgather", "reduce_scatter"])
@pytest.mark.parametrize("dtype,opname", [("float32", "sum"), ("int64", "max"),
                                          ("uint8", "prod")])
def test_nccl_calls_give_the_checked_result(prim, dtype, opname):
    """The calls the column makes, run with NCCL's semantics, pass the bench's own check."""
    from mpicoll.bench import nccl
    n, root = 3, 1
    cases = every_rank(prim, n, 4096, dtype, opname, root)
    fake, am = _FakeNccl(), _FakeAM()
    comms = [_FakeNcclComm(n, (), r) for r in range(n)]
    for c, ncomm in zip(cases, comms, strict=True):
        c.prepare_check()
        nccl.Column(fake, ncomm, dtype, am).call(c)()
    assert am.syncs == n                               # every call waits for its stream
    _simulate([ncomm.calls[0] for ncomm in comms], n, fake, cases)
    for r, c in enumerate(cases):
        assert c.wrong() == 0, (prim, r)
    name, args = comms[0].calls[0]
    assert name == nccl.METHODS[prim]
    if prim == "reduce":              # the receive buffer exists on the root only
        assert args[1] == 0 and comms[root].calls[0][1][1] != 0


def test_nccl_column_skips_primitives_without_a_collective():
    from mpi4py import MPI

    from mpicoll.bench import nccl
    col = nccl.Column(_FakeNccl(), _FakeNcclComm(2, (), 0), "float32", _FakeAM())
    for prim in ("gather", "scatter", "alltoall", "barrier"):
        assert col.skip_reason(specs.SPECS[prim], MPI.SUM) == \
            f"nccl: no NCCL collective for {prim}; skipped"
        with pytest.raises(nccl.Unsupported):
            nccl.call_args(every_rank(prim, 2, 64, "float32", "sum")[0], 7, 0, 0)
    assert col.skip_reason(specs.SPECS["allreduce"], MPI.SUM) is None
    assert col.skip_reason(specs.SPECS["bcast"], MPI.BAND) is None     # no reduction
    assert "allreduce skipped" in col.skip_reason(specs.SPECS["allreduce"], MPI.BAND)


def test_nccl_calls_are_the_primitives_own():
    """A spec subclassed for its layout (scan from allreduce, allgatherv from allgather) has
    no NCCL call of its parent's.
    """
    from mpicoll.bench import nccl
    assert dict(nccl.METHODS) == {"bcast": "bcast", "reduce": "reduce",
                                  "allreduce": "allReduce", "allgather": "allGather",
                                  "reduce_scatter": "reduceScatter"}
    for prim in ("scan", "exscan", "gatherv", "scatterv", "allgatherv", "alltoallv"):
        with pytest.raises(nccl.Unsupported, match=f"no NCCL collective for {prim}"):
            nccl.call_args(every_rank(prim, 2, 64, "float32", "sum")[0], 7, 0, 0)


def test_nccl_is_wanted_when_listed_or_all_on_gpus():
    from types import SimpleNamespace as NS

    from mpicoll.bench import nccl
    assert nccl.wanted(NS(algorithms=["ring", "nccl"], xp="numpy"))
    assert nccl.wanted(NS(algorithms=["all"], xp="cupy"))
    assert not nccl.wanted(NS(algorithms=["all"], xp="numpy"))
    assert not nccl.wanted(NS(algorithms=["ring", "native"], xp="cupy"))


def test_report_keeps_nccl_out_of_hand_written():
    from mpicoll.bench import report

    def rec(alg, t):
        return {"primitive": "allreduce", "nranks": 2, "dtype": "float32", "op": "sum",
                "bytes": 1024, "algorithm": alg, "wrong": 0, "busbw_GBps": 1.0,
                "time_us": {"avg": t}}
    text = report.render([], [rec("nccl", 1.0), rec("native", 4.0), rec("ring", 2.0)], [],
                         with_targets=False)
    row = [ln for ln in text.splitlines() if ln.startswith("| 1 KiB")]
    assert row and row[0].split("|")[2].strip() == "nccl"          # the winner
    assert row[0].split("|")[6].strip() == "ring"                  # best hand-written
    assert row[0].split("|")[5].strip() == "4.00x"                 # nccl's speedup over native
    assert "`nccl`: NCCL's own collective" in text


class _RunNccl(_FakeNcclComm):
    """A one-rank NCCL communicator that does the work (N = 1: every collective is a copy)."""

    def __init__(self, fake, lazy=False):
        super().__init__(1, (), 0)
        self.fake, self.lazy = fake, lazy

    def __getattr__(self, name):
        record = super().__getattr__(name)

        def run(*args):
            import ctypes
            record(*args)
            if self.lazy or name == "bcast":            # bcast on one rank: nothing moves
                return
            send, recv, count, dt = args[:4]
            size = {v: np.dtype(k[5:].lower()).itemsize for k, v in vars(_FakeNccl).items()
                    if k.startswith("NCCL_") and k[5:] not in ("SUM", "PROD", "MAX", "MIN")}
            ctypes.memmove(recv, send, count * size[dt])
        return run


@pytest.mark.parametrize("lazy", [False, True])
def test_sweep_runs_and_checks_the_nccl_column(lazy):
    """In-process, one rank: nccl rows beside the others, checked; skips said once each."""
    from mpicoll.bench import cli, nccl, run
    from mpicoll.bench.harness import Sweep
    from mpicoll.bench.results import Sink
    args = cli.build_parser().parse_args(["all", "-b", "8", "-e", "64", "-f", "8", "-n", "1",
                                          "-w", "0", "--algorithm", "native,nccl",
                                          "--no-memcpy"])
    comm = run.prepare(args)
    assert mpicoll.get_check(comm) == "local"      # the bench's own communicator only
    fake = _FakeNccl()
    col = nccl.Column(fake, _RunNccl(fake, lazy), args.dtype, args.array_module)
    out = []
    sweep = Sweep(args, comm, Sink(1), echo=out.append, nccl=col)
    wrong = sweep.run(list(mpicoll.PRIMITIVES))
    comm.Free()
    rows = [r for r in sweep.records if r["algorithm"] == "nccl"]
    assert {r["primitive"] for r in rows} == set(nccl.METHODS)
    assert all(r["path"] == "nccl" and r["checked"] for r in rows)
    native = [r for r in sweep.records if r["algorithm"] == "native"]
    assert {r["primitive"] for r in native} == set(mpicoll.PRIMITIVES)
    assert all(r["wrong"] == 0 for r in native)
    for prim in ("gather", "scatter", "alltoall", "barrier"):
        assert out.count(f"# nccl: no NCCL collective for {prim}; skipped") == 1
    if lazy:    # an NCCL that never writes is caught by the check pass, as any algorithm
        assert wrong > 0
        assert all(r["wrong"] > 0 for r in rows if r["primitive"] != "bcast")
    else:
        assert wrong == 0 and all(r["wrong"] == 0 for r in rows)


@pytest.fixture
def fake_cupy(monkeypatch):
    """A NumPy-backed ``cupy`` module with one 'GPU': enough for ArrayModule's device setup."""
    import types
    cp = types.ModuleType("cupy")
    cp.__version__ = "0.0-fake"
    stream = types.SimpleNamespace(ptr=99, synchronize=lambda: None)

    class Device:
        def __init__(self, d=0):
            self.id = d
            self.pci_bus_id = f"0000:{d + 1:02X}:00.0"

        def use(self):
            pass
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1, getDeviceProperties=lambda d: {"name": b"Fake GPU"},
        runtimeGetVersion=lambda: 12040, driverGetVersion=lambda: 12080)
    cp.cuda = types.SimpleNamespace(runtime=runtime, Device=Device,
                                    get_current_stream=lambda: stream)
    cp.empty, cp.asarray, cp.asnumpy = np.empty, np.asarray, np.asarray
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.delenv("MPICOLL_DEVICE", raising=False)
    return cp


def test_xp_cupy_selects_a_device_and_records_it(fake_cupy):
    from mpi4py import MPI

    from mpicoll.bench import provenance
    am = specs.ArrayModule("cupy", MPI.COMM_SELF)
    assert am.xp is fake_cupy and am.stream_ptr() == 99 and am.path in ("staged", "cuda-aware")
    assert am.selection["device"] == 0 and am.gpu_id.endswith(" 0000:01:00.0")
    prov = am.provenance()
    assert prov["xp"] == "cupy" and prov["device_path"]["path"] == am.path
    assert "cuda_aware" in prov["cuda_aware_report"]
    gpu = prov["gpu"]
    assert (gpu["cupy"], gpu["cuda_runtime"], gpu["cuda_driver"]) == ("0.0-fake", "12.4", "12.8")
    (mine,) = gpu["ranks"]
    assert (mine["rank"], mine["device"], mine["name"], mine["pci_bus_id"]) == \
        (0, 0, "Fake GPU", "0000:01:00.0")
    assert {"local_rank", "how", "shared", "host"} <= set(mine)
    lines = provenance.gpu_lines(dict(prov, nccl={"used": False, "reason": "nccl: why"}))
    assert lines[0].startswith(f"# device path: {am.path} (") and "CuPy 0.0-fake" in lines[0]
    assert lines[1].startswith("# rank 0: GPU 0 Fake GPU (0000:01:00.0)")
    assert lines[-1] == "# nccl: why; nccl column skipped"
    # MPS on or off is recorded (one rank: nothing shares its GPU, so no advice).
    assert prov["mps"]["mps"] in (True, False) and prov["mps"]["advice"] is None
    assert any(line.startswith("# MPS: ") for line in lines), lines
    shared = dict(prov["mps"], mps=False, advice="2 ranks share GPU x without an MPS server")
    lines = provenance.gpu_lines(dict(prov, mps=shared))
    assert "# 2 ranks share GPU x without an MPS server" in lines
    with pytest.raises(SystemExit, match=r"--device 3: .*\[0, 0\]; got 3"):
        specs.ArrayModule("cupy", MPI.COMM_SELF, device=3)


# -- the torch columns (gloo and torch-mpicoll), on the real torch ------------------------

TORCH_PRIMITIVES = ["allgather", "allreduce", "alltoall", "alltoallv", "barrier", "bcast",
                    "gather", "reduce", "reduce_scatter", "scatter"]


def _need_torch():
    return pytest.importorskip("torch",
                               reason="torch is not installed (pip install torch==2.13.0)")


@pytest.mark.parametrize("n", [2, 3])
def test_torch_columns_rows_skips_and_provenance(tmp_path, n):
    """Gloo and torch-mpicoll rows for every primitive torch has a call for (checked like
    every row, path = the column), a skip record with the reason for the others, both
    columns in the provenance and the end record.
    """
    torch = _need_torch()
    proc = run_mpi(n, BENCH + ["all", "--algorithm", "ring,gloo,torch-mpicoll", "--sizes",
                               "8,4K", "-n", "2", "-w", "1", "-r", str(n - 1), "-J", "out.jsonl"],
                   timeout=TIMEOUT, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = records(tmp_path / "out.jsonl")
    for label in ("gloo", "torch-mpicoll"):
        rows = [r for r in recs if r["type"] == "result" and r["algorithm"] == label]
        assert sorted({r["primitive"] for r in rows}) == TORCH_PRIMITIVES, label
        assert all(r["wrong"] == 0 and r["checked"] and r["path"] == label for r in rows)
        # The same cases as the mpicoll rows (sizes rounded to whole blocks alike).
        for prim in ("allreduce", "allgather", "reduce_scatter"):
            assert {r["bytes"] for r in rows if r["primitive"] == prim} == \
                {r["bytes"] for r in recs if r["type"] == "result" and r["algorithm"] == "ring"
                 and r["primitive"] == prim}
        skipped = {r["primitive"] for r in recs if r["type"] == "skip" and r["algorithm"] == label}
        assert skipped == {"gatherv", "scatterv", "allgatherv", "scan", "exscan"}, skipped
        prov = recs[0]
        assert prov["type"] == "provenance" and prov[label]["used"] is True
        assert prov[label]["torch_version"] == torch.__version__
        end = [r for r in recs if r["type"] == "end"][0]
        assert "scan" in end[label]["primitives_skipped"]
        assert f"# {label}: torch {torch.__version__}, one " in proc.stdout


def test_torch_mpicoll_column_with_an_algorithm_runs_it(tmp_path):
    """torch-mpicoll:ring runs ring through torch (its traffic is ring's) and skips the
    primitives that have no ring.
    """
    _need_torch()
    proc = run_mpi(3, BENCH + ["all", "--algorithm", "torch-mpicoll:ring", "--sizes", "64",
                               "-n", "1", "-w", "0", "-J", "out.jsonl"],
                   timeout=TIMEOUT, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = records(tmp_path / "out.jsonl")
    rows = {r["primitive"] for r in recs if r["type"] == "result"}
    assert rows == {p for p in TORCH_PRIMITIVES if "ring" in mpicoll.algorithms(p)}
    assert recs[0]["torch-mpicoll:ring"]["algorithm"] == "ring"


WRONG_GLOO = (
    "import sys, runpy, torch.distributed as d\n"
    "d.all_reduce = lambda *a, **k: None\n"          # gloo computes nothing
    "sys.argv = ['mpicoll.bench'] + sys.argv[1:]\n"
    "runpy.run_module('mpicoll.bench', run_name='__main__')\n")
NO_TORCH_ON_RANK_1 = (
    "import sys, runpy\n"
    "from mpi4py import MPI\n"
    "if MPI.COMM_WORLD.Get_rank() == 1: sys.modules['torch'] = None\n"   # import torch fails
    "sys.argv = ['mpicoll.bench'] + sys.argv[1:]\n"
    "runpy.run_module('mpicoll.bench', run_name='__main__')\n")


def test_torch_column_wrong_results_are_caught_and_missing_torch_skips(tmp_path):
    """A gloo all_reduce that computes nothing fails the check (#wrong, exit 1); torch
    missing on one rank skips the torch columns on every rank, naming that rank.
    """
    _need_torch()
    args = ["allreduce", "--algorithm", "ring,gloo", "--sizes", "64", "-n", "1", "-w", "0"]
    proc = run_mpi(2, [PY, "-c", WRONG_GLOO, *args, "-J", "wrong.jsonl"], timeout=TIMEOUT,
                   cwd=str(tmp_path))
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-4000:]
    rows = {r["algorithm"]: r for r in records(tmp_path / "wrong.jsonl", "result")}
    assert rows["gloo"]["wrong"] > 0 and rows["ring"]["wrong"] == 0
    proc = run_mpi(2, [PY, "-c", NO_TORCH_ON_RANK_1, *args, "-J", "skip.jsonl"],
                   timeout=TIMEOUT, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    recs = records(tmp_path / "skip.jsonl")
    assert [r["algorithm"] for r in recs if r["type"] == "result"] == ["ring"]
    reason = recs[0]["gloo"]["reason"]
    assert recs[0]["gloo"]["used"] is False and "(rank 1)" in reason and "torch" in reason
    assert reason in proc.stdout


def test_torch_columns_skip_what_torch_has_no_call_for():
    """The specs name torch's calls; gloo on CUDA tensors has all_reduce and broadcast only."""
    from types import SimpleNamespace as NS

    from mpicoll.bench import torchdist
    assert sorted(torchdist._PRIMITIVES) == TORCH_PRIMITIVES
    for label, xp in (("gloo", "numpy"), ("torch-mpicoll", "numpy"), ("gloo", "cupy"),
                      ("torch-mpicoll", "cupy")):
        col = torchdist.Column(label, None, None, None, NS(name=xp))
        runs = {p for p in mpicoll.PRIMITIVES if col.skip_reason(specs.SPECS[p], None) is None}
        want = {"allreduce", "bcast"} if (label, xp) == ("gloo", "cupy") else \
            set(TORCH_PRIMITIVES)
        assert runs == want, (label, xp)
        assert col.skip_reason(specs.SPECS["scan"], None) == \
            f"{label}: torch.distributed has no scan call here; skipped"
    col = torchdist.Column("gloo", None, None, None, NS(name="cupy"))
    assert col.skip_reason(specs.SPECS["reduce"], None) == \
        "gloo: torch.distributed has no reduce call on CUDA tensors here; skipped"
