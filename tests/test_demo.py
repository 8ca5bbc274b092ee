"""Run ``python -m mpicoll.demo`` under mpiexec at N = 1..5 and check what it prints, parsed.

The printed arrays are compared with NumPy expectations for that N, the
traffic table's per-rank numbers with closed forms computed here, and the
exit status with what the run should give (0 ok, 1 a failed check, 2 bad
flags). Faults are injected through a ``python -c`` wrapper that patches a
module before running the demo.
"""
import math
import re
import sys

import numpy as np
import pytest
from launch import ROOT, SUPPORT, run_mpi, timed_out

import mpicoll
import mpicoll.gpu

TIMEOUT = 120
FAST = ["--sleep-scale", "0.05"]

# -- parsing ------------------------------------------------------------------

_LINE = re.compile(r"^(Before|After) (.+?) on rank (\d+): (.*)$")
# the traffic table: a primitive's line, then per algorithm its figures and its textbook line
_PRIM = re.compile(r"^  (\S+), K=(\d+)$")
_ROW = re.compile(r"^    (\S+)\s+exact (?:read )?([\d ]+?)\s*"
                  r"\| measured (read )?([\d ]+?)\s*\| msgs ([\d ]+?)\s*\| (\S+)$")


def parse_array(text):
    """``[ 6. 12.]`` -> array([6., 12.])."""
    text = text.strip().rstrip(",")
    assert text.startswith("[") and text.endswith("]"), text
    return np.array([float(x) for x in text[1:-1].split()])


def _value(lines, i, rest):
    """The array (or list of arrays, laid out over several lines) starting on line i."""
    if rest.strip() != "[":
        return parse_array(rest), i + 1
    items, i = [], i + 1
    while lines[i].strip() != "]":
        items.append(parse_array(lines[i]))
        i += 1
    return items, i + 1


def parse_printed(out):
    """Every 'Before/After X on rank r: ...' line: a list of (when, what, rank, value) in order."""
    lines, found, i = out.splitlines(), [], 0
    while i < len(lines):
        m = _LINE.match(lines[i])
        if m:
            value, i = _value(lines, i, m.group(4))
            found.append((m.group(1), m.group(2), int(m.group(3)), value))
        else:
            i += 1
    return found


def parse_lead(out, rank=0):
    """The seed's 'Rank 0: Tensor to scatter: [...]' list."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"Rank {rank}: Tensor to scatter: "):
            return _value(lines, i, line.split(": ", 2)[2])[0]
    raise AssertionError("no 'Tensor to scatter' line")


def by_rank(found, when, what):
    """{rank: value} of one kind of line, asserting the ranks come in rank order."""
    hits = [(r, v) for w, x, r, v in found if w == when and x == what]
    ranks = [r for r, _ in hits]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks), (when, what, ranks)
    return dict(hits)


def parse_table(out):
    """Traffic rows: {(primitive, algorithm): dict(k, claim, exact, measured, msgs, status,
    reads)}; ``reads``: the figures are elements read from peers' memory, not sent.
    """
    rows, prim, k, lines = {}, None, None, out.splitlines()
    for i, line in enumerate(lines):
        p = _PRIM.match(line)
        if p:
            prim, k = p.group(1), int(p.group(2))
            continue
        m = _ROW.match(line)
        if m and prim is not None:
            ints = [list(map(int, m.group(g).split())) for g in (2, 4, 5)]
            claim = lines[i + 1].strip() if i + 1 < len(lines) else ""
            rows[(prim, m.group(1))] = dict(
                k=k, claim=claim, exact=ints[0], measured=ints[1],
                msgs=ints[2], status=m.group(6), reads=bool(m.group(3)))
    return rows


def same_values(got, want):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            same_values(g, w) for g, w in zip(got, want, strict=True))
    return np.array_equal(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


# -- expectations -------------------------------------------------------------

def split(k, n):
    return [k // n + (1 if i < k % n else 0) for i in range(n)]


def seed_powers(rank, n):
    return [np.array([(rank + 1) * 1, (rank + 1) * 2], dtype=float) ** (j + 1) for j in range(n)]


def expected_walk(n, k=5, root=0):
    """{(when, what): {rank: value}} of the seed's walkthrough at N = n."""
    ones = {r: np.full(k, r + 1.0) for r in range(n)}
    total = np.full(k, n * (n + 1) / 2)
    seq = np.arange(1.0, k + 1)
    gathered = [np.full(k, r + 1.0) for r in range(n)]
    rs_after = {j: sum(seed_powers(r, n)[j] for r in range(n)) for j in range(n)}
    return {
        ("Before", "broadcast"): {r: seq if r == root else np.zeros(k) for r in range(n)},
        ("After", "broadcast"): {r: seq for r in range(n)},
        ("Before", "reduce"): ones,
        ("After", "reduce"): {r: total if r == root else ones[r] for r in range(n)},
        ("Before", "all_reduce"): ones,
        ("After", "all_reduce"): {r: total for r in range(n)},
        ("Before", "gather"): ones,
        ("After", "gather"): {root: gathered},
        ("Before", "all_gather"): ones,
        ("After", "all_gather"): {r: gathered for r in range(n)},
        ("Before", "scatter"): {r: np.zeros(k) for r in range(n)},
        ("After", "scatter"): ones,
        ("Before", "ReduceScatter"): {r: seed_powers(r, n) for r in range(n)},
        ("After", "ReduceScatter"): rs_after,
        ("Before", "ring all_reduce"): ones,
        ("After", "ring all_reduce"): {r: total for r in range(n)},
    }


def check_walk(out, n, k=5, root=0):
    found = parse_printed(out)
    for (when, what), want in expected_walk(n, k, root).items():
        got = by_rank(found, when, what)
        assert sorted(got) == sorted(want), (when, what, sorted(got))
        for r in want:
            assert same_values(got[r], want[r]), (when, what, r, got[r], want[r])
    assert same_values(parse_lead(out, root), [np.full(k, i + 1.0) for i in range(n)])


def ceil_log2(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


def check_table(out, n, k=5, root=0, algos=None, device=False):
    """Every row agrees; the key algorithms' per-rank numbers match closed forms computed here.
    ``device``: the table ran on device arrays (the host-only shm algorithms are left out).
    """
    rows = parse_table(out)
    if algos is None:
        algos = {p: [a for a in mpicoll.algorithms(p) if a != "native" and not (
                     device and getattr(mpicoll.algorithm_info(p, a), "host_only", False))]
                 for p in ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
                           "reduce_scatter", "alltoall", "barrier")}
    want_keys = {(p, a) for p, names in algos.items() for a in names}
    assert set(rows) == want_keys, sorted(set(rows) ^ want_keys)
    b = -(-k // n)
    for (p, a), row in rows.items():
        assert row["status"] == "ok", (p, a, row)
        assert row["exact"] == row["measured"], (p, a, row)
        assert len(row["measured"]) == len(row["msgs"]) == n, (p, a, row)
        kk = (n * b if p in ("gather", "allgather", "scatter", "alltoall")
              else 0 if p == "barrier" else k)
        assert row["k"] == kk, (p, a, row)
        if n == 1:
            assert row["measured"] == [0] and row["msgs"] == [0], (p, a, row)
    c = split(k, n)
    closed = {
        ("bcast", "linear"): [(n - 1) * k if r == root else 0 for r in range(n)],
        ("allreduce", "ring"): [0] * n if n == 1 else
        [2 * k - c[(r + 1) % n] - c[(r + 2) % n] for r in range(n)],
        ("reduce_scatter", "ring"): [0] * n if n == 1 else [k - c[r] for r in range(n)],
        ("reduce_scatter", "pairwise"): [k - c[r] for r in range(n)],
        ("allgather", "ring"): [(n - 1) * b] * n,
        ("allgather", "bruck"): [(n - 1) * b] * n,
        ("gather", "linear"): [0 if r == root else b for r in range(n)],
        ("scatter", "linear"): [(n - 1) * b if r == root else 0 for r in range(n)],
        ("alltoall", "pairwise"): [(n - 1) * b] * n,
        ("reduce", "linear"): [0 if r == root else k for r in range(n)],
        ("reduce", "binomial"): [0 if r == root else k for r in range(n)],
    }
    if n & (n - 1) == 0:
        closed[("allreduce", "recursive_doubling")] = [k * ceil_log2(n)] * n
    # The shm algorithms read what they need from their peers' memory and send nothing:
    # elements each rank reads, from what each rank's result needs that it does not hold.
    closed_reads = {
        "bcast": [0 if r == root else k for r in range(n)],
        # K elements are a small call (the mailbox): each reducing rank reads every peer's
        "allreduce": [(n - 1) * k] * n,
        "reduce": [(n - 1) * k if r == root else 0 for r in range(n)],
        "reduce_scatter": [(n - 1) * c[r] for r in range(n)],
        "gather": [(n - 1) * b if r == root else 0 for r in range(n)],
        "scatter": [0 if r == root else b for r in range(n)],
        "allgather": [(n - 1) * b] * n, "alltoall": [(n - 1) * b] * n, "barrier": [0] * n,
    }
    for p, want in closed_reads.items():
        if (p, "shm") in rows:
            row = rows[(p, "shm")]
            assert row["reads"] and row["measured"] == want and row["msgs"] == [0] * n, (p, row)
    for key, want in closed.items():
        if key in rows:
            assert rows[key]["measured"] == want, (key, rows[key], want)
    if ("bcast", "binomial") in rows:
        got = rows[("bcast", "binomial")]["measured"]
        assert got[root] == ceil_log2(n) * k and sum(got) == (n - 1) * k, got
    if ("barrier", "dissemination") in rows:
        assert rows[("barrier", "dissemination")]["msgs"] == [ceil_log2(n)] * n
    if ("allreduce", "ring") in rows:
        row = rows[("allreduce", "ring")]
        assert row["msgs"] == [2 * (n - 1)] * n
        value = 2 * (n - 1) * k / n
        assert re.search(r"each rank sends 2\(N-1\)K/N = ([\d.]+)", row["claim"]), row
        assert math.isclose(float(re.search(r"= ([\d.]+)", row["claim"]).group(1)), value,
                            rel_tol=1e-3), row
        assert ("mean" in row["claim"]) == (k % n != 0), row
    return rows


def check_barrier(out, n, scale):
    sleeps = re.findall(r"^Rank (\d+) sleeps ([\d.e+-]+) seconds\.$", out, re.M)
    assert [int(r) for r, _ in sleeps] == list(range(n))
    assert all(math.isclose(float(s), r * scale) for r, s in ((int(r), s) for r, s in sleeps))
    deltas = re.findall(r"^Rank (\d+) after barrier time delta: ([\d.]+)$", out, re.M)
    assert [int(r) for r, _ in deltas] == list(range(n))
    waits = re.findall(r"^Rank (\d+) entered at \+([\d.]+) s, waited ([\d.]+) s in the barrier, "
                       r"left at \+([\d.]+) s$", out, re.M)
    assert [int(w[0]) for w in waits] == list(range(n))
    # Ordering, not timing: nobody leaves before the last rank has entered.
    assert min(float(w[3]) for w in waits) >= max(float(w[1]) for w in waits)
    assert "everyone left together" in out


def demo(n, *args, env=None):
    return run_mpi(n, [sys.executable, "-m", "mpicoll.demo", *args], timeout=TIMEOUT, env=env)


def ok(proc):
    assert proc.returncode == 0, \
        f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


# -- the demo at every N ------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_demo_default(n):
    out = ok(demo(n, *FAST))
    assert f"N = {n} rank" in out
    assert ("N = 1: a single rank" in out) == (n == 1)
    check_walk(out, n)
    check_table(out, n)
    check_barrier(out, n, 0.05)
    assert f"step {2 * (n - 1)}/{2 * (n - 1)}: allgather" in out or n == 1
    assert "\x1b[" not in out                       # plain when not on a terminal
    assert out.rstrip().endswith("all checks passed ok")
    if n == 3:   # the seed's printed reduce_scatter results
        after = by_rank(parse_printed(out), "After", "ReduceScatter")
        assert [list(after[r]) for r in range(3)] == [[6, 12], [14, 56], [36, 288]]


def test_demo_on_simulated_nodes():
    """Two nodes of two: the node-aware plans are recorded on the communicator's nodes (their
    counts agree with the run's), and the shm algorithms, which need one node, are left out.
    """
    out = ok(demo(4, *FAST, env={"MPICOLL_NODES": "2"}))
    prims = ("bcast", "reduce", "allreduce", "gather", "allgather", "scatter", "reduce_scatter",
             "alltoall", "barrier")
    rows = check_table(out, 4, algos={p: [a for a in mpicoll.algorithms(p)
                                          if a not in ("native", "shm")] for p in prims})
    # allgather: gather in the node (1 block of 2), blocks of 4 between heads, then the
    # whole result (8) to the node's other rank
    assert rows[("allgather", "hierarchical")]["measured"] == [12, 2, 12, 2]


def test_demo_ring_grid_n4():
    out = ok(demo(4, "--only", "ring"))
    assert "chunks c0..c3 of 2,1,1,1 elements" in out
    # Step 1: rank r sends chunk r and adds chunk r-1 from its left neighbour.
    rows = re.findall(r"^    rank (\d)\s+sends c(\d) -> (\d), gets c(\d) <- (\d)\s+(.*)$", out,
                      re.M)
    assert len(rows) == 6 * 4
    for r, sc, dst, rc, src, cells in rows[:4]:
        r, sc, rc = int(r), int(sc), int(rc)
        assert (sc, int(dst), rc, int(src)) == (r, (r + 1) % 4, (r - 1) % 4, (r - 1) % 4)
        assert cells.split()[rc] == "2+" and cells.split()[sc] == "1>"
    # After the last allgather step every chunk is complete everywhere.
    assert all(c.rstrip("+=>") == "4" for *_, cells in rows[-4:] for c in cells.split())
    assert "after reduce-scatter each rank holds one complete chunk (rank 0: c1" in out


def test_demo_singleton_without_mpiexec():
    import subprocess
    proc = subprocess.run([sys.executable, "-m", "mpicoll.demo", "--sleep-scale", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    out = ok(proc)
    assert "N = 1: a single rank" in out
    check_walk(out, 1)
    check_table(out, 1)


def test_demo_root_count_dtype():
    out = ok(demo(5, "--root", "3", "--count", "12", "--dtype", "int32", "--sleep-scale", "0"))
    check_walk(out, 5, k=12, root=3)
    line = re.search(r"^After broadcast on rank 0: (.*)$", out, re.M).group(1)
    assert "." not in line and line.split()[-1] == "12]"      # int32: no decimal points
    check_table(out, 5, k=12, root=3)


def test_demo_even_chunks_match_textbook_exactly():
    out = ok(demo(4, "--count", "12", "--only", "allreduce,reduce_scatter,allgather"))
    rows = parse_table(out)
    assert rows[("allreduce", "ring")]["measured"] == [18] * 4
    assert "each rank sends 2(N-1)K/N = 18" in rows[("allreduce", "ring")]["claim"]
    assert "mean" not in rows[("allreduce", "ring")]["claim"]
    assert rows[("reduce_scatter", "ring")]["measured"] == [9] * 4
    assert rows[("allgather", "ring")]["measured"] == [9] * 4


def test_demo_only_and_per_primitive_algorithm():
    out = ok(demo(3, "--only", "broadcast,all_reduce",
                  "--algorithm", "allreduce=ring,bcast=pipeline"))
    headings = re.findall(r"^== (.*) ==$", out, re.M)
    assert len(headings) == 3, headings
    assert headings[0].startswith("broadcast") and headings[0].endswith("algorithm pipeline")
    assert headings[1].startswith("all_reduce") and headings[1].endswith("algorithm ring")
    check_table(out, 3, algos={"bcast": ["pipeline"], "allreduce": ["ring"]})


def test_demo_global_algorithm():
    out = ok(demo(4, "--algorithm", "ring", "--only", "allreduce,allgather,reduce_scatter,bcast"))
    algos = {p: ["ring"] for p in ("allreduce", "allgather", "reduce_scatter")}
    algos["bcast"] = [a for a in mpicoll.algorithms("bcast") if a != "native"]
    check_table(out, 4, algos=algos)


def test_demo_impl_native():
    out = ok(demo(3, "--impl", "native", "--sleep-scale", "0"))
    check_walk(out, 3)
    headings = re.findall(r"^== (.*) ==$", out, re.M)
    assert all(h.endswith("algorithm native") for h in headings[:7]), headings
    assert parse_table(out) == {}
    assert "mpicoll's counters see none of it" in out


@pytest.mark.parametrize("args, message", [
    (["--only", "bogus"], "--only: unknown primitive 'bogus'"),
    (["--algorithm", "allreduce=bogus"], "allreduce has no algorithm 'bogus'; choose from"),
    (["--root", "9"], "--root: expected a rank in [0, 1]"),
    (["--dtype", "complex64"], "--dtype: expected a float or integer dtype"),
    (["--impl", "native", "--algorithm", "ring"], "does not combine with --impl native"),
    (["--count", "0"], "--count: expected K >= 1"),
])
def test_demo_usage_errors(args, message):
    proc = demo(2, *args)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert proc.stderr.count("error:") == 1          # printed once, by rank 0


def test_demo_help():
    proc = demo(2, "--help")
    out = ok(proc)
    assert out.count("usage:") == 1
    for flag in ("--only", "--algorithm", "--import", "--impl", "--device", "--count", "--dtype",
                 "--root", "--sleep-scale", "--plot", "--color"):
        assert flag in out
    assert "{cpu,gpu}" in out and "MPICOLL_DEVICE" in out and "staged" in out
    assert "3 --device gpu without a usable GPU" in " ".join(out.split())


def test_demo_color_always():
    out = ok(demo(2, "--only", "bcast", "--color", "always"))
    assert "\x1b[1m== broadcast" in out and "✓" in out


# -- the ring picture -----------------------------------------------------------

def test_demo_plot(tmp_path):
    pytest.importorskip("matplotlib",
                        reason="matplotlib is not installed (pip install matplotlib)")
    png = tmp_path / "ring.png"
    out = ok(demo(3, "--only", "ring", "--plot", str(png)))
    assert f"ring steps drawn into {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _wrapped(n, prelude, args):
    """Run the demo after ``prelude`` (Python code) in every rank."""
    code = (prelude + "\nimport runpy, sys\nsys.argv = ['mpicoll.demo'] + " + repr(list(args))
            + "\nrunpy.run_module('mpicoll.demo', run_name='__main__')\n")
    return run_mpi(n, [sys.executable, "-c", code], timeout=TIMEOUT)


def test_demo_plot_without_matplotlib(tmp_path):
    png = tmp_path / "ring.png"
    proc = _wrapped(2, "import sys; sys.modules['matplotlib'] = None", ["--plot", str(png)])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--plot needs matplotlib, which is not installed: pip install matplotlib" in proc.stderr
    assert not png.exists()


# -- checks that must fail ------------------------------------------------------

def test_demo_wrong_result_is_an_error():
    prelude = """
from mpi4py import MPI
import mpicoll.distributed as d
_orig = d.all_reduce
def _bad(tensor, op=d.ReduceOp.SUM):
    _orig(tensor, op)
    if MPI.COMM_WORLD.Get_rank() == 1:
        tensor += 1
d.all_reduce = _bad
"""
    proc = _wrapped(3, prelude, ["--only", "reduce,allreduce,gather"])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert ("CHECK FAILED: rank 1: all_reduce: got [7. 7. 7. 7. 7.], "
            "native MPI gives [6. 6. 6. 6. 6.]") in proc.stderr
    assert "== gather" not in proc.stdout             # stopped at the first failure


def test_demo_plan_disagreeing_with_the_counters_is_an_error():
    prelude = """
from mpicoll.demo import table as t
_orig = t.plan_traffic
def _short(prim, algo, n, rank, *args):
    got = _orig(prim, algo, n, rank, *args)
    if (prim, algo, rank) == ('allreduce', 'ring', 0):
        got = (got[0] - 1,) + got[1:]          # one element fewer than the run sent
    return got
t.plan_traffic = _short
"""
    proc = _wrapped(3, prelude, ["--only", "allreduce"])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "CHECK FAILED: allreduce/ring: measured" in proc.stderr
    assert parse_table(proc.stdout)[("allreduce", "ring")]["status"] == "MISMATCH", proc.stdout


def test_demo_wrong_textbook_value_is_an_error():
    prelude = """
from fractions import Fraction
from mpicoll.demo import textbook as t
t.TEXTBOOK['allgather/ring'].value = lambda n, k: Fraction(k)
"""
    proc = _wrapped(3, prelude, ["--only", "allgather"])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert ("allgather/ring: exact [4, 4, 4] disagrees with the textbook (N-1)K/N = 6"
            in proc.stderr)


# -- --device gpu ------------------------------------------------------------------

def _gpu_here():
    return mpicoll.gpu.cupy_status()[0]


def test_demo_device_gpu_without_gpu_fails_fast():
    if _gpu_here():
        pytest.skip("this machine has a usable GPU")
    proc = run_mpi(2, [sys.executable, "-m", "mpicoll.demo", "--device", "gpu"], timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, (proc.returncode, out)
    assert not timed_out(proc) and "Traceback" not in out, out
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, proc.stderr                    # one line, by rank 0, for every rank
    assert lines[0].startswith("python -m mpicoll.demo: error: --device gpu: no usable GPU on any "
                               "of the 2 ranks: "), lines
    assert "cupy" in lines[0].lower()                       # names why: CuPy missing / no device
    assert "== " not in proc.stdout                         # nothing ran


#: Runs the demo with ``cupy`` replaced by a CPU stand-in (tests/support/fakedevice.py): device
#: arrays that refuse implicit conversion to NumPy, as CuPy's do, one fake "GPU" per node.
FAKE_GPU = f"""
import sys, types
sys.path.insert(0, {SUPPORT!r})
import fakedevice
fakedevice.install()
cp = types.ModuleType('cupy')
cp.__version__ = '0.0.0+fake'
cp.asarray = fakedevice.to_device
cp.asnumpy = fakedevice.to_host
import numpy
cp.array = lambda obj, dtype=None: fakedevice.FakeDeviceArray(numpy.array(obj, dtype=dtype))
cp.zeros = lambda shape, dtype=float: fakedevice.FakeDeviceArray(numpy.zeros(shape, dtype))
cp.float32 = numpy.float32
class _Device:
    def __init__(self, i):
        self.id = i
    def use(self):
        pass
cp.cuda = types.SimpleNamespace(Device=_Device, runtime=types.SimpleNamespace(
    getDeviceCount=lambda: 1, runtimeGetVersion=lambda: 12080, driverGetVersion=lambda: 13000,
    getDeviceProperties=lambda i: {{'name': b'Fake GPU'}}))
sys.modules['cupy'] = cp
"""


def fake_gpu_demo(n, *args, env=None):
    code = (FAKE_GPU + "import runpy\nsys.argv = ['mpicoll.demo'] + " + repr(list(args))
            + "\nrunpy.run_module('mpicoll.demo', run_name='__main__')\n")
    return run_mpi(n, [sys.executable, "-c", code], timeout=TIMEOUT, env=env)


@pytest.mark.parametrize("n", [1, 3])
def test_demo_device_gpu_on_a_stand_in_device(n):
    out = ok(fake_gpu_demo(n, "--device", "gpu", *FAST))
    # The same walkthrough and table as on the CPU, computed on device arrays.
    check_walk(out, n)
    check_table(out, n, device=True)
    check_barrier(out, n, 0.05)
    assert out.rstrip().endswith("all checks passed ok")
    assert ("device: --device gpu (CuPy arrays); CuPy 0.0.0+fake, CUDA runtime 12.8, "
            "driver 13.0") in out
    ranks = "s 0-2" if n == 3 else " 0"
    assert re.search(rf"^  GPU 0 \(Fake GPU\) on \S+: rank{ranks}$", out, re.M), out
    assert ("3 ranks share a GPU" in out) == (n == 3)
    # The PyPI MPICH wheel is not CUDA-aware: staged; the walk's arrays are small, so its calls
    # run on host copies (MPICOLL_GPU_HOST_COPY), and the traffic lines say so.
    assert re.search(r"^device path: staged: .* \(decided by MPIX_Query_cuda_support\)", out,
                     re.M), out
    assert "small calls (at most 4096 bytes per rank, MPICOLL_GPU_HOST_COPY)" in out
    # 7 seed walks + scan
    assert len(re.findall(r"^traffic \(\w+, host-copy path\):", out, re.M)) == 8, out


def test_demo_device_gpu_native_impl_on_a_stand_in_device():
    out = ok(fake_gpu_demo(2, "--device", "gpu", "--impl", "native",
                           "--only", "allreduce,scatter"))
    found = parse_printed(out)
    assert by_rank(found, "After", "all_reduce")[1].tolist() == [3.0] * 5
    assert "device path: staged" in out


def test_demo_device_gpu_cpu_output_unchanged():
    # --device cpu is the default: same output, no device lines.
    a = ok(demo(2, "--only", "allreduce"))
    b = ok(demo(2, "--only", "allreduce", "--device", "cpu"))
    assert a == b and "device" not in a


def test_demo_device_gpu_bad_device_override_fails_fast():
    proc = fake_gpu_demo(2, "--device", "gpu", env={"MPICOLL_DEVICE": "7"})
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr
    assert ("--device gpu: no usable GPU on any of the 2 ranks: MPICOLL_DEVICE='7': expected a "
            "device number in [0, 0]") in proc.stderr
