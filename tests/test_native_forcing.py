"""``--native-algorithm``: forcing the MPI library's own algorithm works, on MPICH and Open MPI.

Allreduce algorithms add in different orders, so on floats of mixed magnitudes
they give results that differ in their last bits: forcing two different
algorithms must give two different results (forcing that silently did nothing
would give the library's default twice), the same algorithm the same result,
and the library's variables must read back as before afterwards. Each family
runs with its own interpreter (tests/support/mpifamily.py: this one, or a venv with the
other family's wheel, skipped with the reason where it cannot be built); MPICOLL_TEST_MPI
picks the families as for the MPI suite.
"""
import json
import sys

import fullrun
import pytest
from launch import run_mpi, timed_out

#: Three allreduce algorithms of different shapes, by each library's names.
NAMES = {"mpich": ["ring", "recursive_doubling", "reduce_scatter_allgather"],
         "openmpi": ["ring", "recursive_doubling", "basic_linear"]}

PROBE = r"""
import hashlib, json, sys
import numpy as np
from mpi4py import MPI
from mpicoll.bench import native
w = MPI.COMM_WORLD
rng = np.random.default_rng(1234 + w.rank)
x = rng.standard_normal(4096) * 10.0 ** rng.integers(-8, 8, 4096)

def digest(c):
    y = np.empty_like(x)
    c.Allreduce(x, y, MPI.SUM)
    return hashlib.sha1(y.tobytes()).hexdigest()

def read_back(names):
    m = native._MPIT()
    try:
        out = {}
        for n in names:
            h = m.handle(m.index(n))
            out[n] = m.read(h)
            m.free(h)
        return out
    finally:
        m.close()

out = {"family": native.family(), "forced": {}}
names = json.loads(sys.argv[1])
variables = native.cvar_names("allreduce")
before = read_back(variables)
for name in names + names[:1]:
    with native.forcing("allreduce", name, w) as (c, setting):
        d = digest(c)
    out["forced"].setdefault(name, []).append({"digest": d, "setting": setting})
out["before"], out["after"] = before, read_back(variables)
if w.rank == 0:
    print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("family", fullrun.families())
def test_forced_algorithms_take_effect(family, family_python):
    python, why = family_python(family)
    if python is None:
        pytest.skip(f"no {family} environment: {why}")
    names = NAMES[family]
    proc = run_mpi(4, [python, "-c", PROBE, json.dumps(names)], timeout=180, python=python)
    out = proc.stdout + proc.stderr
    assert not timed_out(proc) and proc.returncode == 0, out[-6000:]
    res = json.loads(next(line[7:] for line in proc.stdout.splitlines()
                          if line.startswith("RESULT ")))
    assert res["family"] == family
    digests = {n: [r["digest"] for r in res["forced"][n]] for n in names}
    # The same algorithm twice: the same bits. Different algorithms: not all the same.
    assert len(set(digests[names[0]])) == 1, digests
    assert len({d[0] for d in digests.values()}) > 1, (
        f"forcing {names} on {family} gave one result: the forcing did nothing\n{out[-4000:]}")
    for n in names:
        s = res["forced"][n][0]["setting"]
        assert s["name"] == n and s["method"] == "MPI_T" and s["library"] == family, s
        assert s["variable"] in s["variables"] and s["equivalent"], s
        if family == "openmpi":
            assert s["variables"]["coll_tuned_use_dynamic_rules"] == 1, s
            assert s["variable"] == "coll_tuned_allreduce_algorithm", s
            assert s["comm_info"] == {"ompi_comm_coll_preference": "tuned"}, s
            assert s["equivalent"] == (f"--mca coll_tuned_use_dynamic_rules 1 "
                                       f"--mca coll_tuned_allreduce_algorithm {n}"), s
        else:
            assert s["variable"] == "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", s
            assert s["equivalent"] == f"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM={n}", s
    assert res["after"] == res["before"], res      # the library's own settings restored
    print(f"{family}: {', '.join(f'{n}={d[0][:8]}' for n, d in digests.items())}",
          file=sys.stderr)
