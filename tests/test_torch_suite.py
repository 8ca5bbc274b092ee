"""torch's own distributed test suite on "mpicoll": it passes wherever gloo passes.

``tests/support/torch_suite.py`` runs ``DistributedTest._DistTestBase`` (in
the torch wheel) with every rank an MPI rank under ``mpiexec``, each test
bounded in time (a hang fails that test, the run goes on). Here it runs on
"mpicoll" in both of the suite's selections (``gloo``'s, with the groups made
on "mpicoll", and ``mpi``'s) at N = 3 and 4 on MPICH, and every test that
gloo passes in the same harness must pass, except
``torch_suite.EXCEPTIONS`` (tests of gloo's own name or of torch functions
that are gloo-only, each with why) and ``torch_suite.PENDING`` (group
timeouts, pending other work; each must still fail, so that one that passes
leaves the list).

gloo's outcomes come from ``tests/support/torch_suite_gloo.json``, recorded
in this harness by the command it names (``python tests/support/torch_suite.py
record-gloo``; 5-6 minutes for the four runs on the 2-core CI machine, which
is why CI does not run gloo itself); ``test_gloo_record_is_current`` checks
that the record is for the installed torch and the suite's test names.
``MPICOLL_TORCH_SUITE_GLOO=1`` runs gloo live instead of reading the record.
Each run's outcomes are written to ``build/torch-suite/<selection>-mpicoll-<N>.json``.
Skipped with the reason where torch or ``expecttest`` (which torch's test
helpers import) is missing; under ``CI=true`` that fails.
"""
import json
import os
import sys

import pytest
from launch import ROOT, SUPPORT

sys.path.insert(0, SUPPORT)
import torch_suite

ON_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
LIVE_GLOO = os.environ.get("MPICOLL_TORCH_SUITE_GLOO", "") not in ("", "0")
OUT = os.path.join(ROOT, "build", "torch-suite")
CASES = [(s, n) for s in torch_suite.SELECTIONS for n in torch_suite.SIZES]
#: Seconds for one run of the suite (every test) before it is stopped; a run takes 1-4 min.
JOB_TIMEOUT = 900

# CI's full run only (four launches of the suite, ~8 min): python -m pytest --full
pytestmark = [pytest.mark.timeout(JOB_TIMEOUT + 120), pytest.mark.full]


def _need(module, why):
    try:
        __import__(module)
    except ImportError:
        if ON_CI:
            pytest.fail(f"CI=true and {module} is missing: {why}")
        pytest.skip(f"{module} is not installed: {why}")


@pytest.fixture(scope="module")
def record():
    """The recorded outcomes of gloo (tests/support/torch_suite_gloo.json)."""
    _need("torch", "pip install torch==2.13.0")
    _need("expecttest", "torch's test helpers import it (pip install expecttest)")
    with open(torch_suite.GLOO_RECORD) as f:
        return json.load(f)


_NAMES = {}


def _names(selection):
    """The suite's test names for ``selection`` (imported once, in a child process)."""
    if selection not in _NAMES:
        _NAMES[selection] = torch_suite.list_tests(selection)
    return _NAMES[selection]


def _gloo_passes(record, selection, n):
    if LIVE_GLOO:
        res = torch_suite.run(n, selection, "gloo", job_timeout=JOB_TIMEOUT)
        return {t for t, r in res["tests"].items() if r["outcome"] == "pass"}
    return set(record["runs"][torch_suite.key(selection, n)]["pass"])


def test_gloo_record_is_current(record):
    """The record is for the installed torch and names the suite's tests; the listed
    exceptions are tests gloo passes there (else they would excuse nothing).
    """
    import torch
    regenerate = f"regenerate it: {record['command']}"
    assert record["torch"] == torch.__version__, (
        f"{torch_suite.GLOO_RECORD} was recorded with torch {record['torch']}, this is "
        f"torch {torch.__version__}: {regenerate}")
    assert sorted(record["runs"]) == sorted(torch_suite.key(s, n) for s, n in CASES), regenerate
    for selection in torch_suite.SELECTIONS:
        names = set(_names(selection))
        for n in torch_suite.SIZES:
            run = record["runs"][torch_suite.key(selection, n)]
            recorded = set(run["pass"]) | set(run["fail"])
            assert recorded <= names, (sorted(recorded - names), regenerate)
            assert len(names) == len(recorded) + run["skip"], regenerate
    passed_somewhere = set().union(*(r["pass"] for r in record["runs"].values()))
    for name in list(torch_suite.EXCEPTIONS) + list(torch_suite.PENDING):
        assert name in passed_somewhere, f"{name} is listed but gloo passes it nowhere"


@pytest.mark.parametrize("selection,n", CASES, ids=[f"{s}-N{n}" for s, n in CASES])
def test_mpicoll_passes_where_gloo_passes(record, selection, n):
    gloo = _gloo_passes(record, selection, n)
    names = _names(selection)
    # The pending tests last (each hang costs a relaunch for the tests after it), and the
    # group timeouts (a timed-out group is unusable afterwards).
    late = set(torch_suite.PENDING) | set(torch_suite.LAST)
    names = [t for t in names if t not in late] + [t for t in names if t in late]
    os.makedirs(OUT, exist_ok=True)
    res = torch_suite.run(n, selection, "mpicoll", tests=names, job_timeout=JOB_TIMEOUT,
                          timeouts={t: torch_suite.PENDING_TIMEOUT for t in late},
                          log=os.path.join(OUT, f"{selection}-mpicoll-{n}.log"))
    with open(os.path.join(OUT, f"{selection}-mpicoll-{n}.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    got = res["tests"]
    c = res["counts"]
    print(f"\n{selection} selection, N={n}: mpicoll {c['pass']} passed, {c['fail']} failed, "
          f"{c['skip']} skipped in {res['seconds']} s ({res['launches']} launches); gloo "
          f"(recorded) {len(gloo)} passed")
    listed = set(torch_suite.EXCEPTIONS) | set(torch_suite.PENDING)
    for t in sorted(gloo & listed):
        reason = torch_suite.EXCEPTIONS.get(t) or torch_suite.PENDING[t]
        print(f"  excepted: {t}: {got[t]['outcome']} ({reason})")
    lost = {t: got.get(t, {"why": "not run"})["why"] for t in sorted(gloo - listed)
            if got.get(t, {}).get("outcome") != "pass"}
    assert not lost, "gloo passes these, mpicoll does not:\n" + "\n\n".join(
        f"{t}:\n{why[-1500:]}" for t, why in lost.items())
    now_pass = [t for t in torch_suite.PENDING if got.get(t, {}).get("outcome") == "pass"]
    assert not now_pass, (f"{now_pass} pass now: remove them from torch_suite.PENDING "
                          f"(and record the counts in benchmarks/torch.md)")
