"""torch's own distributed test suite with every rank an MPI rank (no spawning).

torch ships the suite in its wheel: ``DistributedTest._DistTestBase`` of
``torch/testing/_internal/distributed/distributed_test.py``. torch's own
runner (``TestDistBackend``, a ``MultiProcessTestCase``) spawns one process
per rank and each child runs ``TestDistBackend._run``: set up, the suite's
file barrier, the test method, barrier, destroy. Here ``mpiexec -n N`` starts
the ranks and each MPI rank plays its rank's child, test after test, in one
process (a *worker*):

- the *selection* is the suite's: which tests run, and which skip, is decided
  by ``BACKEND`` at import (``gloo``: gloo's selection; ``mpi``: the MPI
  backend's, with ``dist.is_mpi_available()`` true, since the backend under
  test plays it). The *backend* is the one the groups are made on: the
  selection's name, wherever the suite passes it to ``init_process_group`` or
  ``new_group`` (or leaves it to the default), becomes the backend under test
  (``mpicoll``, or ``gloo`` itself for the baseline);
- every test gets a fresh temporary directory (the suite's ``TEMP_DIR``: its
  file barrier and ``file://`` store), torch's seed, and the default group
  with the suite's timeout (``CUSTOM_PG_TIMEOUT``, else 60 s);
- the outcome is agreed over the ranks as torch's parent process agrees the
  children's exit codes: an error on any rank fails the test (the failing
  ranks' messages kept); otherwise rank 0's skip skips it; otherwise it passes.
  Rank 0 appends it to a JSON-lines file.

The *runner* (``python tests/support/torch_suite.py run ...``) launches the
workers and watches that file: a test that has not ended ``--timeout``
seconds after it started (or a job that dies in it) is recorded as failed
("timeout" / the exit status) and the job is killed (an MPI rank stuck in a
collective cannot be freed otherwise); the runner then relaunches from the
next test, so a hang fails one test, not the run. ``--job-timeout`` bounds
the whole run. The result: ``{"tests": {name: {"outcome", "why", "seconds"}},
...}`` as JSON, and a count per outcome on stdout.

::

    python tests/support/torch_suite.py run -n 3 --selection gloo --backend mpicoll
    python tests/support/torch_suite.py record-gloo     # gloo's outcomes, every N and selection
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SELECTIONS = ("gloo", "mpi")
BACKENDS = ("mpicoll", "gloo")
OUTCOMES = ("pass", "fail", "skip")
#: Seconds a test may run before the runner fails it and relaunches (a hang): the suite's
#: own group timeout (60 s) and a margin.
DEFAULT_TIMEOUT = 90
#: The record of gloo's outcomes in this harness (see ``record-gloo``).
GLOO_RECORD = os.path.join(HERE, "torch_suite_gloo.json")
RECORD_COMMAND = "python tests/support/torch_suite.py record-gloo"
#: The world sizes and selections the project runs (CI: every pair, on MPICH).
SIZES = (3, 4)

#: Tests that gloo passes and "mpicoll" cannot: they test gloo's own name or torch
#: functions that torch implements for gloo only. Each with why.
EXCEPTIONS = {
    "test_get_backend":
        "asserts dist.get_backend() == the selection's name ('gloo' or 'mpi'); the backend "
        "under test is named 'mpicoll'",
    "test_monitored_barrier_gloo":
        "calls dist.monitored_barrier, which torch runs for gloo groups only (ValueError "
        "'monitored_barrier is only implemented for GLOO backend' for any other); the process "
        "group's own monitored_barrier is tested in tests/mpi/test_torch.py",
    "test_monitored_barrier_gloo_subgroup":
        "dist.monitored_barrier on a subgroup: gloo-only in torch, as test_monitored_barrier_gloo",
}

#: Tests that gloo passes and "mpicoll" does not yet, pending other work, each with why.
#: They run with a short limit (:data:`PENDING_TIMEOUT`); one that passes must leave the list.
#: (Empty: the group timeouts these used to hold are honoured since the watchdog landed.)
PENDING: dict = {}
#: Tests run last, with the short limit too: a group's timeout leaves that group unusable
#: (by design: what the timed-out call posted stays posted), so they go after the others.
LAST = ("test_barrier_timeout_global", "test_barrier_timeout_full_group")
#: Seconds a PENDING or LAST test may run (gloo passes them in under 2 s at N = 3 and 4).
PENDING_TIMEOUT = 10
#: Seconds the whole run (every launch) may take.
DEFAULT_JOB_TIMEOUT = 1500


# -- worker (one per MPI rank) --------------------------------------------------------

def _import_suite(selection, world_size, scratch):
    """Set the suite's environment, then import it (it reads the environment at import)."""
    os.environ["BACKEND"] = selection
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["TEMP_DIR"] = scratch
    # The suite's file:// tests skip unless INIT_METHOD names a file store at import;
    # each test gets its own file below (the module's INIT_METHOD is reset per test).
    os.environ["INIT_METHOD"] = "file://" + os.path.join(scratch, "init")
    os.environ["TORCH_SHOW_CPP_STACKTRACES"] = "0"          # the Python traceback is kept
    os.environ["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"     # its hint names torch's runner
    import torch.distributed as dist
    if selection == "mpi":
        # The backend under test plays torch's MPI backend (absent from this torch build).
        dist.is_mpi_available = lambda: True
    from torch.testing._internal.distributed import distributed_test as suite
    return suite


def _redirect(dist, selection, backend):
    """Make the groups the suite asks of ``selection`` (or of the default) on ``backend``."""
    real_init, real_new = dist.init_process_group, dist.new_group

    def under_test(name):
        if name is None or str(name).lower() == selection:
            return backend
        return name

    def init_process_group(*args, backend=None, **kwargs):
        if args:
            backend, args = args[0], args[1:]
        return real_init(*args, backend=under_test(backend), **kwargs)

    def new_group(*args, **kwargs):
        if len(args) >= 3:
            args = (*args[:2], under_test(args[2]), *args[3:])
        elif "backend" in kwargs:
            kwargs["backend"] = under_test(kwargs["backend"])
        return real_new(*args, **kwargs)

    dist.init_process_group, dist.new_group = init_process_group, new_group
    return real_init


def _skip_codes(common):
    return {s.exit_code: s.message for s in common.TEST_SKIPS.values()}


def _run_one(case, name, rank, world_size, backend, real_init, suite, common, dist):
    """Run test ``name`` on this rank as TestDistBackend._run would; return (outcome, why)."""
    import unittest
    from datetime import timedelta

    from torch.testing._internal import common_utils
    method = getattr(case, name)
    if getattr(case, "__unittest_skip__", False) or getattr(method, "__unittest_skip__", False):
        # unittest's skip decorators mark the method; unittest's runner (not the method)
        # honours the mark, as torch's child process does through its runner.
        return "skip", getattr(method, "__unittest_skip_why__", "") or "skipped"
    test = case(name)
    test.rank = rank
    test.file_name = os.path.join(os.environ["TEMP_DIR"], "init_dir", "shared_init_file")
    suite.INIT_METHOD = "file://" + test.file_name
    suite.Barrier.barrier_id = 0
    common_utils.set_rng_seed()
    try:
        timeout = timedelta(seconds=suite.CUSTOM_PG_TIMEOUT.get(name, suite.default_pg_timeout))
        real_init(init_method=suite.INIT_METHOD, backend=backend, world_size=world_size,
                  rank=rank, timeout=timeout)
        test._barrier()
        getattr(test, name)()
        test._barrier()
        return "pass", ""
    except unittest.SkipTest as exc:
        return "skip", str(exc)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        skips = _skip_codes(common)
        if code in skips:
            return "skip", skips[code]
        if code == 0:
            return "pass", ""
        return "fail", f"rank {rank}: exit({exc.code})"
    except BaseException as exc:
        line = traceback.format_exception_only(exc)[-1].strip()[:500]
        return "fail", f"rank {rank}: {line}\n" + traceback.format_exc(limit=6)[-2500:]
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


def agree(outcomes):
    """The test's outcome from every rank's (outcome, why), as torch's parent decides."""
    failed = [why for outcome, why in outcomes if outcome == "fail"]
    if failed:
        return "fail", "\n".join(failed)
    if outcomes[0][0] == "skip":
        return "skip", outcomes[0][1]
    return "pass", ""


def worker(args):
    """One MPI rank: run the named tests in order, appending agreed outcomes to args.results."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    base = comm.bcast(tempfile.mkdtemp(prefix="torch-suite-", dir=args.scratch)
                      if rank == 0 else None)
    suite = _import_suite(args.selection, size, base)
    import torch.distributed as dist
    from torch.testing._internal import common_distributed as common

    import mpicoll.torch  # noqa: F401  (registers "mpicoll")
    real_init = _redirect(dist, args.selection, args.backend)
    case = type("MpiRankCase", (suite.TestDistBackend, suite.DistributedTest._DistTestBase), {})
    if rank == 0:
        port = _free_port()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(comm.bcast(port if rank == 0 else None))
    names = args.tests.split(",") if args.tests else test_names(suite)
    out = open(args.results, "a") if rank == 0 else None
    try:
        for name in names:
            tmp = os.path.join(base, name)
            if rank == 0:
                for sub in ("barrier", "test_dir", "init_dir"):
                    os.makedirs(os.path.join(tmp, sub))
            os.environ["TEMP_DIR"] = tmp
            comm.Barrier()
            start = time.monotonic()
            if rank == 0:
                out.write(json.dumps({"start": name}) + "\n")
                out.flush()
            mine = _run_one(case, name, rank, size, args.backend, real_init, suite, common, dist)
            every = comm.gather(mine)
            if rank == 0:
                outcome, why = agree(every)
                out.write(json.dumps({"end": name, "outcome": outcome, "why": why,
                                      "seconds": round(time.monotonic() - start, 2)}) + "\n")
                out.flush()
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if rank == 0:
            out.close()
            shutil.rmtree(base, ignore_errors=True)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_names(suite):
    """Every test of the suite's base class, in name order."""
    return sorted(n for n in dir(suite.DistributedTest._DistTestBase) if n.startswith("test"))


# -- runner (launches the workers, bounds each test) ---------------------------------

def _read(path):
    started, ended = [], {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break                          # being written
                rec = json.loads(line)
                if "start" in rec:
                    started.append(rec["start"])
                else:
                    ended[rec["end"]] = rec
    return started, ended


def list_tests(selection):
    """The suite's test names (imported in a child process: the import reads the environment)."""
    code = (f"import sys, tempfile; sys.path.insert(0, {HERE!r}); import torch_suite as t\n"
            "with tempfile.TemporaryDirectory() as d:\n"
            f"    print('\\n'.join(t.test_names(t._import_suite({selection!r}, 2, d))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    return out.stdout.split()


def run(n, selection, backend, *, timeout=DEFAULT_TIMEOUT, job_timeout=DEFAULT_JOB_TIMEOUT,
        tests=None, mpiexec=None, log=None, python=None, timeouts=None):
    """Run the suite at ``n`` ranks; return {"tests": {name: record}, "counts", "seconds", ...}.

    A test still running ``timeout`` s after it started, or during which the job ended,
    fails; the job is killed and relaunched from the next test. ``timeouts``: {test:
    seconds} for some tests. ``job_timeout`` bounds the whole run: tests not reached by
    then fail with that reason.
    """
    timeouts = timeouts or {}
    python = python or sys.executable
    names = list(tests) if tests else list_tests(selection)
    here = os.path.join(os.path.dirname(python), "mpiexec")
    mpiexec = mpiexec or (here if os.path.exists(here) else shutil.which("mpiexec"))
    scratch = tempfile.mkdtemp(prefix="torch-suite-run-")
    results = os.path.join(scratch, "results.jsonl")
    t0 = time.monotonic()
    records, launches = {}, 0
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.pop("PYTEST_ADDOPTS", None)
    logf = open(log, "a") if log else subprocess.DEVNULL
    try:
        while True:
            todo = [x for x in names if x not in records]
            if not todo:
                break
            left = job_timeout - (time.monotonic() - t0)
            if left <= 0:
                for x in todo:
                    records[x] = {"outcome": "fail", "seconds": 0,
                                  "why": f"not run: the whole run's limit ({job_timeout} s) "
                                         f"was reached"}
                break
            launches += 1
            argv = [mpiexec, "-n", str(n), python, os.path.abspath(__file__), "worker",
                    "--selection", selection, "--backend", backend, "--results", results,
                    "--scratch", scratch, "--tests", ",".join(todo)]
            proc = subprocess.Popen(argv, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=ROOT)
            current, since = None, time.monotonic()
            why = None
            while True:
                rc = proc.poll()
                started, ended = _read(results)
                for name, rec in ended.items():
                    if name not in records:
                        records[name] = {k: rec[k] for k in ("outcome", "why", "seconds")}
                pending = [x for x in started if x not in ended]
                if pending and pending[-1] != current:
                    current, since = pending[-1], time.monotonic()
                if rc is not None:
                    if current is not None and current not in records:
                        why = f"the job ended (exit status {rc}) during this test"
                    elif current is None and not ended and rc != 0:
                        # died before any test started: fail the first one so the loop moves
                        current = todo[0]
                        why = f"the job ended (exit status {rc}) before this test started"
                    break
                limit = timeouts.get(current, timeout)
                if current is not None and current not in records and \
                        time.monotonic() - since > limit:
                    why = f"timeout: still running after {limit:g} s (the job was killed)"
                    break
                if time.monotonic() - t0 > job_timeout:
                    why = f"timeout: the whole run's limit ({job_timeout} s) was reached"
                    break
                time.sleep(0.2)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if why is not None and current is not None and current not in records:
                records[current] = {"outcome": "fail", "why": why,
                                    "seconds": round(time.monotonic() - since, 2)}
    finally:
        if log:
            logf.close()
        shutil.rmtree(scratch, ignore_errors=True)
    counts = {k: sum(1 for r in records.values() if r["outcome"] == k) for k in OUTCOMES}
    return {"n": n, "selection": selection, "backend": backend, "counts": counts,
            "seconds": round(time.monotonic() - t0, 1), "launches": launches,
            "tests": {x: records[x] for x in names if x in records}}


def summary(why):
    """One line of a failure's text: its last exception line (else its last line)."""
    lines = [x.strip() for x in why.strip().splitlines() if x.strip()]
    for line in reversed(lines):
        if re.match(r"^(rank \d+: )?[\w.]*(Error|Exception|Exit|Interrupt)\b", line) or \
                line.startswith(("timeout:", "the job ended", "not run:")):
            return line[:300]
    return lines[-1][:300] if lines else ""


def key(selection, n):
    """The name of one run in the gloo record: ``"gloo-3"``, ``"mpi-4"``, ..."""
    return f"{selection}-{n}"


def record_gloo(path=GLOO_RECORD, sizes=SIZES, selections=SELECTIONS, log=None):
    """Run gloo in this harness for every selection and size; write its outcomes to ``path``."""
    import datetime

    import torch
    from mpi4py import MPI
    runs = {}
    for selection in selections:
        for n in sizes:
            res = run(n, selection, "gloo", log=log)
            runs[key(selection, n)] = {
                "pass": sorted(t for t, r in res["tests"].items() if r["outcome"] == "pass"),
                "fail": {t: summary(r["why"]) for t, r in sorted(res["tests"].items())
                         if r["outcome"] == "fail"},
                "skip": res["counts"]["skip"], "seconds": res["seconds"]}
            print(f"gloo {key(selection, n)}: {res['counts']} in {res['seconds']} s", flush=True)
    record = {"command": RECORD_COMMAND, "torch": torch.__version__,
              "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
              "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "runs": runs}
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    return record


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="launch the suite under mpiexec, bounded per test")
    r.add_argument("-n", type=int, required=True)
    r.add_argument("--selection", choices=SELECTIONS, required=True)
    r.add_argument("--backend", choices=BACKENDS, required=True)
    r.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    r.add_argument("--job-timeout", type=float, default=DEFAULT_JOB_TIMEOUT)
    r.add_argument("--tests", default="", help="comma-separated names (default: all)")
    r.add_argument("--json", help="write the result here")
    r.add_argument("--log", help="append the workers' output here")
    g = sub.add_parser("record-gloo", help=f"run gloo at N = {SIZES} in both selections "
                       f"and write {os.path.relpath(GLOO_RECORD, ROOT)}")
    g.add_argument("--out", default=GLOO_RECORD)
    g.add_argument("--log")
    w = sub.add_parser("worker", help="(under mpiexec) one rank of the suite")
    w.add_argument("--selection", choices=SELECTIONS, required=True)
    w.add_argument("--backend", choices=BACKENDS, required=True)
    w.add_argument("--results", required=True)
    w.add_argument("--scratch", required=True)
    w.add_argument("--tests", default="")
    args = p.parse_args(argv)
    if args.command == "worker":
        worker(args)
        return 0
    if args.command == "record-gloo":
        record_gloo(args.out, log=args.log)
        return 0
    result = run(args.n, args.selection, args.backend, timeout=args.timeout,
                 job_timeout=args.job_timeout,
                 tests=[t for t in args.tests.split(",") if t] or None, log=args.log)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    for name, rec in result["tests"].items():
        if rec["outcome"] != "skip":
            print(f"{rec['outcome']:4} {rec['seconds']:7.2f} s  {name}")
    c = result["counts"]
    print(f"N={args.n} selection={args.selection} backend={args.backend}: {c['pass']} passed, "
          f"{c['fail']} failed, {c['skip']} skipped in {result['seconds']} s "
          f"({result['launches']} launch(es))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
