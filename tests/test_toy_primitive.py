"""Adding a primitive is one module: a toy one, defined in a file at run time, is seen everywhere.

``tests/support/toy_primitive.py`` defines ``allgather_twin`` (a binder, mpi4py's
method, its call arguments and spec, two algorithms) and nothing else changes:
the generated test matrix runs and checks it (and catches a wrong algorithm
added beside it), the demo's traffic table measures it against its plan, the
bench sweeps it, ``bench fit`` models it from its plans, its functional,
nonblocking, persistent and ``P2PComm`` faces all work, and the soak draws it
(not without its soak case).
"""
import json
import os
import re
import sys

from launch import ROOT, run_mpi
from test_demo import parse_table

TOY = os.path.join(ROOT, "tests", "support", "toy_primitive.py")
BROKEN = os.path.join(ROOT, "tests", "support", "toy_broken.py")
MATRIX = os.path.join(ROOT, "tests", "mpi", "test_spec_matrix.py")
PY = sys.executable
TIMEOUT = 300


def _ok(proc):
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


def test_the_generated_matrix_runs_a_plugin_primitive_and_catches_a_wrong_algorithm():
    pytest_argv = [PY, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-v", "-p",
                   "no:cacheprovider", "-k", "twin", MATRIX]
    out = _ok(run_mpi(3, pytest_argv, timeout=TIMEOUT, env={"MPICOLL_TEST_PLUGINS": TOY}))
    for algo in ("native", "neighbours"):
        assert re.search(rf"test_spec\[allgather_twin-{algo}\] PASSED", out), out[-3000:]
    proc = run_mpi(3, pytest_argv, timeout=TIMEOUT,
                   env={"MPICOLL_TEST_PLUGINS": f"{TOY},{BROKEN}"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "allgather_twin/skipper" in out and "elements wrong" in out, out[-3000:]


def test_the_demo_measures_it_against_its_plan():
    out = _ok(run_mpi(3, [PY, "-m", "mpicoll.demo", "--import", TOY, "--only", "allgather_twin"],
                      timeout=TIMEOUT))
    rows = {a: r for (p, a), r in parse_table(out).items() if p == "allgather_twin"}
    assert list(rows) == ["neighbours"] and rows["neighbours"]["status"] == "ok", out
    # K = 6 at N = 3: each rank sends its block of 2 to both others, in 2 messages.
    row = rows["neighbours"]
    assert row["k"] == 6 and row["exact"] == row["measured"] == [4, 4, 4], out
    assert row["msgs"] == [2, 2, 2], out
    assert "all checks passed" in out


def test_the_bench_sweeps_it_and_fit_models_it(tmp_path):
    out = _ok(run_mpi(3, [PY, "-m", "mpicoll.bench", "all", "--import", TOY, "--algorithm",
                          "neighbours,native", "--sizes", "8,1K", "-n", "2", "-w", "1", "-J",
                          "out.jsonl"], timeout=TIMEOUT, cwd=str(tmp_path)))
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    twin = [r for r in rows if r.get("type") == "result" and r["primitive"] == "allgather_twin"]
    assert {r["algorithm"] for r in twin} == {"native", "neighbours"}, out[-2000:]
    assert all(r["wrong"] == 0 and r["checked"] for r in twin)
    assert all(r["busbw_factor"] == 2 / 3 for r in twin)        # its spec's (N-1)/N
    out = _ok(run_mpi(2, [PY, "-m", "mpicoll.bench", "fit", "--import", TOY, "--primitive",
                          "allgather_twin", "--sizes", "8,1K", "-n", "2", "-w", "1", "-o",
                          "model.json"], timeout=TIMEOUT, cwd=str(tmp_path)))
    assert re.search(r"allgather_twin neighbours\s+8\s.*plan", out), out[-2000:]
    assert "allgather_twin/neighbours" in out and (tmp_path / "model.json").exists()


FACES = r"""
import runpy, sys
import numpy as np
from mpi4py import MPI
runpy.run_path(sys.argv[1])
import mpicoll
comm = MPI.COMM_WORLD
n, r = comm.Get_size(), comm.Get_rank()
x = np.full(2, r + 1.0)
want = np.repeat(np.arange(1.0, n + 1), 2)
got = [mpicoll.allgather_twin(x).reshape(-1),
       mpicoll.iallgather_twin(x, np.empty(2 * n)).Wait(),
       mpicoll.allgather_twin(x, algorithm="native").reshape(-1)]
p = mpicoll.allgather_twin_init(x, np.empty(2 * n))
p.Start(); got.append(p.Wait()); p.Free()
y = np.empty(2 * n)
mpicoll.P2PComm(comm, allgather_twin="neighbours").Allgather_twin(x, y)
got.append(y)
assert all(np.array_equal(g, want) for g in got), got
assert "allgather_twin" in mpicoll.PRIMITIVES and callable(mpicoll.iallgather_twin)
oks = comm.gather(r, 0)
if r == 0:
    print("faces ok", *oks)
"""


def test_every_face_of_it_works():
    out = _ok(run_mpi(3, [PY, "-c", FACES, TOY], timeout=TIMEOUT))
    assert "faces ok 0 1 2" in out, out[-2000:]


SOAK = r"""
import runpy, sys
import numpy as np
from mpi4py import MPI
runpy.run_path(sys.argv[1])
from mpicoll.calls.primitive import DEFINED
from mpicoll.testing.soak import _draw, clean, soak
s = soak(calls=150, seed=5, max_count=500)
assert clean(s, rss_limit=64 << 20), s
assert s["calls_per_primitive"].get("allgather_twin", 0) > 0, s
DEFINED["allgather_twin"].soak = None          # a primitive without a soak case is not drawn
drawn = {_draw(np.random.default_rng([5, i]), 3, 500)["primitive"] for i in range(300)}
assert "allgather_twin" not in drawn and len(drawn) == len(DEFINED) - 1, drawn
if MPI.COMM_WORLD.Get_rank() == 0:
    print("soak ok", s["calls_per_primitive"]["allgather_twin"])
"""


def test_the_soak_draws_it_with_its_soak_case_only():
    out = _ok(run_mpi(3, [PY, "-c", SOAK, TOY], timeout=TIMEOUT))
    assert "soak ok" in out, out[-2000:]
