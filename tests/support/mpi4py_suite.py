"""Run mpi4py's own collective test modules on ``mpicoll.P2PComm(MPI.COMM_WORLD)``.

Run under mpiexec, given the ``test/`` directory of mpi4py's source
distribution for the installed version (``tests/test_mpi4py_suite.py``
fetches it; nothing of it is kept in this repository)::

    mpiexec -n 3 python tests/support/mpi4py_suite.py build/mpi4py-tests/mpi4py-4.1.2/test
    mpiexec -n 3 python tests/support/mpi4py_suite.py DIR --modules cco_buf,cco_vec --json out.json

How the communicator is replaced, without editing a line of mpi4py's tests:
every test module does ``from mpi4py import MPI`` and names the world
communicator as ``MPI.COMM_WORLD`` — in class attributes evaluated at import
(``COMM = MPI.COMM_WORLD``), in ``setUp`` (``self.COMM =
MPI.COMM_WORLD.Dup()``) and in skip decorators. While each module is
imported, ``mpi4py.MPI`` (the package attribute that ``from mpi4py import
MPI`` reads) is a view of the real module that differs in one name only:
its ``COMM_WORLD`` is ``P2PComm(MPI.COMM_WORLD)``. So the module runs as
if its author had written ``comm = P2PComm(MPI.COMM_WORLD)`` where they
wrote ``MPI.COMM_WORLD``: every other name (datatypes, ops, ``IN_PLACE``,
``COMM_SELF``, the classes) is the real module's own object, ``Dup()``
goes through ``P2PComm.Dup`` (a ``P2PComm`` keeping the choices), and
mpi4py's test helpers (``mpiunittest``, ``arrayimpl``, imported first)
see the real module. Only the classes that run on the world communicator
(``Test...World``, ``Test...WorldDup``; in the intercommunicator modules the
classes built on ``BASECOMM = MPI.COMM_WORLD``) are run; the ``...Self``
classes test ``COMM_SELF``, which is left native.

Modules (``--modules``, names after ``test_`` or groups): ``default`` —
the ones whose collectives P2PComm overrides (blocking, nonblocking
``I...``, persistent ``..._init``, zero-length messages) plus the pickle
collectives; ``native`` — neighbourhood and intercommunicator collectives,
which stay native: run to check that the communicators P2PComm creates
(``Create_cart``, ``Split``, ``Create_intercomm``) work as before; ``all``.
``--typecodes i,G`` and ``--no-dup`` make a smaller run (CI); ``--native``
runs the same selection on the plain ``MPI.COMM_WORLD`` as a baseline;
``--failfast`` aborts the job at the first failure on any rank (a rank that
fails mid-test leaves the others waiting in its collectives).

Nothing is bypassed silently: each class's ``setUp`` is checked (in a
subclass of the same name that only adds the check) to leave a ``P2PComm``
in ``self.COMM``; every collective ``P2PComm`` overrides is wrapped to count
its calls; and the whole run is inside ``mpicoll.traffic()``, which records
the primitive and algorithm of each call mpicoll ran. The report lists, per
module and test, pass / fail / error / skip (the worst over the ranks, with
the rank and first message of each failure), the overridden methods called
and never called, and the algorithms run.

Exit status 0 only if no test failed or raised on any rank (every rank exits
with the same status). ``--json FILE`` writes the report (rank 0).
"""
import argparse
import collections
import importlib
import json
import os
import sys
import time
import traceback
import types
import unittest

#: Module -> what it tests; the default set. ``obj`` is the lowercase (pickle)
#: collectives, which stay native on P2PComm: run to check that they still work.
MODULES = {
    "cco_buf": "blocking buffer collectives",
    "cco_vec": "blocking v-collectives",
    "cco_nb_buf": "nonblocking buffer collectives",
    "cco_nb_vec": "nonblocking v-collectives",
    "cco_pr_buf": "persistent buffer collectives (MPI-4 ..._init)",
    "cco_pr_vec": "persistent v-collectives",
    "msgzero": "zero-length messages ([None, datatype])",
    "cco_obj": "lowercase pickle collectives (native on P2PComm)",
}
#: Modules whose collectives stay native on P2PComm (neighbourhood collectives on the
#: topology communicators P2PComm creates; intercommunicators split from it): not run by
#: default; ``--modules native`` checks that P2PComm passes them through untouched.
NATIVE_MODULES = {
    "cco_ngh_buf": "neighbourhood collectives on Create_cart/graph/dist_graph communicators",
    "cco_ngh_obj": "neighbourhood pickle collectives",
    "cco_pr_ngh_buf": "persistent neighbourhood collectives",
    "cco_buf_inter": "buffer collectives on an intercommunicator split from the world",
    "cco_vec_inter": "v-collectives on an intercommunicator",
    "cco_obj_inter": "pickle collectives on an intercommunicator",
}
GROUPS = {"default": list(MODULES), "native": list(NATIVE_MODULES),
          "all": list(MODULES) + list(NATIVE_MODULES)}
SEVERITY = {"pass": 0, "skip": 1, "fail": 2, "error": 3}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("testdir", help="mpi4py's test/ directory (from its sdist)")
    ap.add_argument("--modules", default="default",
                    help=f"comma-separated names after test_, or the groups default "
                         f"({','.join(MODULES)}), native ({','.join(NATIVE_MODULES)}) or all")
    ap.add_argument("--no-dup", action="store_true", help="skip the ...WorldDup classes")
    ap.add_argument("--classes", help="comma-separated class names to run (default: every "
                    "world class); for short launches")
    ap.add_argument("--typecodes", help="keep only these type codes in arrayimpl's backends "
                    "(e.g. 'i,d,G'; a backend with none of them is dropped): a smaller run")
    ap.add_argument("--native", action="store_true",
                    help="baseline: run the same tests on the native MPI.COMM_WORLD")
    ap.add_argument("--choose", action="append", default=[], metavar="PRIMITIVE=ALGORITHM",
                    help="algorithm choices for P2PComm (repeatable)")
    ap.add_argument("--failfast", action="store_true",
                    help="at the first failure or error on any rank, print it and MPI_Abort the "
                         "job (the other ranks may be waiting in that test's collectives)")
    ap.add_argument("--json", help="write the report here (rank 0)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each test as it ends")
    return ap.parse_args(argv)


class Result(unittest.TestResult):
    """Per test: (status, message); subtest failures count against their test."""

    def __init__(self, verbose=False, abort=None):
        super().__init__()
        self.status = {}
        self.verbose = verbose
        self.abort = abort          # abort(test id, status, message): --failfast
        self._t0 = None

    def _set(self, test, status, msg=""):
        tid = test.id()
        old = self.status.get(tid, ("pass", ""))
        if SEVERITY[status] > SEVERITY[old[0]]:
            self.status[tid] = (status, msg)
        if self.abort is not None and status in ("fail", "error"):
            self.abort(tid, status, msg)

    @staticmethod
    def _msg(err):
        text = "".join(traceback.format_exception(*err))
        return text[-1500:]

    def startTest(self, test):
        super().startTest(test)
        self.status.setdefault(test.id(), ("pass", ""))
        self._t0 = time.perf_counter()

    def stopTest(self, test):
        super().stopTest(test)
        if self.verbose:
            st = self.status[test.id()][0]
            print(f"  {test.id()}: {st} ({time.perf_counter() - self._t0:.2f} s)", flush=True)

    def addError(self, test, err):
        self._set(test, "error", self._msg(err))

    def addFailure(self, test, err):
        self._set(test, "fail", self._msg(err))

    def addSkip(self, test, reason):
        self._set(test, "skip", reason)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            kind = "fail" if issubclass(err[0], test.failureException) else "error"
            self._set(test, kind, f"{subtest.id()}:\n{self._msg(err)}")

    def addExpectedFailure(self, test, err):
        self._set(test, "fail", "expected failure (not supported by this runner)")

    def addUnexpectedSuccess(self, test):
        self._set(test, "fail", "unexpected success")


def world_view(real, world):
    """The module ``real`` (mpi4py.MPI) with ``COMM_WORLD`` replaced by ``world``."""
    view = types.ModuleType(real.__name__, real.__doc__)
    view.__getattr__ = lambda name: getattr(real, name)    # PEP 562: everything else is real's
    view.__file__ = getattr(real, "__file__", None)
    view.COMM_WORLD = world
    return view


def import_with_world(name, view):
    """Import test module ``name`` while ``from mpi4py import MPI`` yields ``view``."""
    import mpi4py
    real = mpi4py.MPI
    sys.modules.pop(name, None)
    mpi4py.MPI = view
    try:
        return importlib.import_module(name)
    finally:
        mpi4py.MPI = real


def world_classes(module, no_dup, world):
    """The module's TestCase classes that run on COMM_WORLD: by mpi4py's naming
    ``Test...World`` and ``Test...WorldDup``, and the intercommunicator ones built from
    ``BASECOMM = MPI.COMM_WORLD`` (``Test...Inter``, ``Test...InterDup``).
    """
    out = []
    for name, obj in sorted(vars(module).items()):
        if not (isinstance(obj, type) and issubclass(obj, unittest.TestCase)):
            continue
        if obj.__module__ != module.__name__ or not name.startswith("Test"):
            continue
        dup = name.endswith("Dup")
        base = name[:-3] if dup else name
        if dup and no_dup:
            continue
        if base.endswith("World") or getattr(obj, "BASECOMM", None) is world:
            out.append(obj)
    return out


def checked(cls, kind):
    """``cls`` with a setUp that also checks ``self.COMM`` is a ``kind`` (same name and tests)."""
    attr = "BASECOMM" if hasattr(cls, "BASECOMM") else "COMM"

    def setUp(self):
        cls.setUp(self)
        comm = getattr(self, attr)
        if not isinstance(comm, kind):
            raise AssertionError(f"{cls.__name__}.{attr} is {type(comm).__name__}, "
                                 f"not {kind.__name__}: the drop-in would be bypassed")
    return type(cls.__name__, (cls,), {"setUp": setUp, "__module__": cls.__module__,
                                      "__qualname__": cls.__qualname__})


def restrict_typecodes(arrayimpl, codes):
    """Keep only ``codes`` in each array backend's type map (mpi4py's tests loop over
    backends x type codes); drop backends left with none. Configuration, not an edit.
    """
    keep = []
    for backend in arrayimpl.ArrayBackends:
        backend.TypeMap = {c: t for c, t in backend.TypeMap.items() if c in codes}
        if backend.TypeMap:
            keep.append(backend)
    arrayimpl.ArrayBackends[:] = keep


def overridden_methods(P2PComm, MPI):
    """The collectives P2PComm overrides: its own callables that mpi4py's Intracomm also has."""
    skip = {"Dup", "Clone"}
    return sorted(n for n, v in vars(P2PComm).items()
                  if callable(v) and not n.startswith("_") and n not in skip
                  and hasattr(MPI.Intracomm, n))


def count_calls(P2PComm, names):
    """Wrap each method to count its calls; returns the Counter."""
    counts = collections.Counter()

    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        counted.__name__ = counted.__qualname__ = name
        counted.__doc__ = fn.__doc__
        return counted
    for n in names:
        setattr(P2PComm, n, wrap(n, getattr(P2PComm, n)))
    return counts


def failfast(native):
    """An ``abort`` for Result: print the failure with this rank, then end the whole job."""
    def abort(tid, status, msg):
        print(f"\n-- {status.upper()} {tid} (rank {native.Get_rank()}; --failfast: aborting "
              f"the job):\n{msg}", flush=True)
        sys.stderr.flush()
        native.Abort(1)
    return abort


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    testdir = os.path.abspath(args.testdir)
    sys.path.insert(0, testdir)

    from mpi4py import MPI

    import mpicoll
    from mpicoll import P2PComm

    native = MPI.COMM_WORLD
    rank, size = native.Get_rank(), native.Get_size()
    choices = dict(c.split("=", 1) for c in args.choose)

    # mpi4py's helpers see the real module (they are imported before any view exists).
    import arrayimpl
    importlib.import_module("mpiunittest")
    if args.typecodes:
        restrict_typecodes(arrayimpl, args.typecodes.split(","))

    names = overridden_methods(P2PComm, MPI)
    counts = count_calls(P2PComm, names)
    world = native if args.native else P2PComm(native, **choices)
    view = world_view(MPI, world)
    expected = MPI.Intracomm if args.native else P2PComm

    statuses, modules_info = {}, {}
    wanted = [g for m in args.modules.split(",") if m.strip()
              for g in GROUPS.get(m.strip(), [m.strip()])]
    with mpicoll.traffic() as traffic:
        for mod in wanted:
            t0 = time.perf_counter()
            result = Result(verbose=args.verbose and rank == 0,
                            abort=failfast(native) if args.failfast else None)
            info = {"classes": [], "import_error": None}
            try:
                module = import_with_world("test_" + mod, view)
            except Exception:
                info["import_error"] = traceback.format_exc()[-1500:]
                statuses[f"test_{mod} (import)"] = ("error", info["import_error"])
                if args.failfast:
                    failfast(native)(f"test_{mod} (import)", "error", info["import_error"])
            else:
                suite = unittest.TestSuite()
                only = set(args.classes.split(",")) if args.classes else None
                for cls in world_classes(module, args.no_dup, world):
                    if only is not None and cls.__name__ not in only:
                        continue
                    info["classes"].append(cls.__name__)
                    suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(
                        checked(cls, expected)))
                if rank == 0 and args.verbose:
                    print(f"test_{mod}: {', '.join(info['classes'])}", flush=True)
                suite.run(result)
                statuses.update(result.status)
            native.Barrier()
            info["seconds"] = round(time.perf_counter() - t0, 2)
            modules_info[mod] = info

    algos = collections.Counter((c.primitive, c.algorithm) for c in traffic.calls)
    mine = {"rank": rank, "status": statuses, "counts": dict(counts), "native": args.native,
            "algorithms": {f"{p}/{a}": k for (p, a), k in algos.items()},
            "sent_msgs": traffic.sent_msgs}
    everyone = native.gather(mine, root=0)
    bad = 0
    if rank == 0:
        report = combine(everyone, names, modules_info, size)
        print_report(report)
        bad = report["failures"] + report["errors"]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, sort_keys=True)
    bad = native.bcast(bad, root=0)
    return 1 if bad else 0


def combine(everyone, names, modules_info, size):
    """The ranks' results -> one report: per test the worst status over the ranks."""
    tests = {}
    for r in everyone:
        for tid, (st, msg) in r["status"].items():
            old = tests.get(tid)
            if old is None or SEVERITY[st] > SEVERITY[old["status"]]:
                tests[tid] = {"status": st, "rank": r["rank"], "message": msg}
    per_module = collections.defaultdict(collections.Counter)
    for tid, t in tests.items():
        per_module[tid.split(".", 1)[0].split(" ")[0]][t["status"]] += 1
    counts = collections.Counter()
    algorithms = collections.Counter()
    for r in everyone:
        counts.update(r["counts"])
        algorithms.update(r["algorithms"])
    total = collections.Counter(t["status"] for t in tests.values())
    return {
        "size": size,
        "communicator": "MPI.COMM_WORLD (native)" if everyone[0]["native"] else
                        "P2PComm(MPI.COMM_WORLD)",
        "native_algorithm_calls": sum(k for a, k in algorithms.items() if a.endswith("/native")),
        "tests": tests,
        "modules": {m: dict(per_module.get("test_" + m, {}), **modules_info[m])
                    for m in modules_info},
        "calls": {n: counts.get(n, 0) for n in names},     # summed over the ranks
        "never_called": [n for n in names if not counts.get(n)],
        "algorithms": dict(algorithms),
        "sent_msgs": sum(r["sent_msgs"] for r in everyone),
        "passed": total["pass"], "skipped": total["skip"],
        "failures": total["fail"], "errors": total["error"],
    }


def print_report(rep):
    print(f"\n== mpi4py's collective tests on {rep['communicator']}, N = {rep['size']} ==")
    print(f"{'module':<12} {'pass':>5} {'fail':>5} {'error':>5} {'skip':>5} {'secs':>7}  classes")
    for m, info in rep["modules"].items():
        print(f"{m:<12} {info.get('pass', 0):>5} {info.get('fail', 0):>5} "
              f"{info.get('error', 0):>5} {info.get('skip', 0):>5} {info['seconds']:>7}  "
              f"{', '.join(info['classes']) or info.get('import_error', '')}")
    for tid, t in sorted(rep["tests"].items()):
        if t["status"] in ("fail", "error"):
            print(f"\n-- {t['status'].upper()} {tid} (rank {t['rank']}):\n{t['message']}")
    skipped = sorted((tid, t["message"]) for tid, t in rep["tests"].items()
                     if t["status"] == "skip")
    if skipped:
        print("\nskipped:")
        for tid, why in skipped:
            print(f"  {tid}: {why}")
    called = ", ".join(f"{n} {k}" for n, k in rep["calls"].items() if k)
    print(f"\nP2PComm methods called (calls summed over ranks): {called}")
    print(f"overridden but never called: {', '.join(rep['never_called']) or 'none'}")
    algos = ", ".join(f"{k} {v}" for k, v in sorted(rep["algorithms"].items()))
    print(f"mpicoll algorithms run (calls over ranks): {algos}")
    print(f"point-to-point messages sent by mpicoll's algorithms: {rep['sent_msgs']}")
    print(f"calls that ran the 'native' algorithm: {rep['native_algorithm_calls']}")
    print(f"TOTAL: {rep['passed']} passed, {rep['failures']} failed, {rep['errors']} errors, "
          f"{rep['skipped']} skipped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
