"""What local work costs on this machine: the durations the traces give copies, reductions, rounds.

:class:`LocalCosts` holds

- ``copy_call_s``, ``copy_Bps``: one ``np.copyto`` costs ``copy_call_s + bytes / copy_Bps``;
- ``reduce_call_s``, ``reduce_Bps``: one ``np.add(a, b, out=c)`` costs
  ``reduce_call_s + bytes / reduce_Bps`` (bytes of the output);
- ``round_s``: the executor's cost per round of a plan (one Python step
  around each blocking message or wait), beyond the message itself;
- ``call_s``: the per-call cost (validation, dispatch) of a call that moves nothing.

:data:`MEASURED` are this project's figures (the command and machine are in
``benchmarks/simulate.md``); ``python -m mpicoll.simulate.calibrate -o FILE``
measures the NumPy part again here (serial), and under ``mpiexec -n 2`` the
round and call costs too; ``bench simulate --calibration FILE`` uses such a file.
"""
import json
import time
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["LocalCosts", "MEASURED", "NONE", "load", "measure_numpy", "measure_rounds"]


@dataclass(frozen=True)
class LocalCosts:
    """Durations of local work (see the module doc); all zero: communication only."""

    copy_call_s: float = 0.0
    copy_Bps: float = float("inf")
    reduce_call_s: float = 0.0
    reduce_Bps: float = float("inf")
    round_s: float = 0.0
    call_s: float = 0.0
    source: str = "none"

    def copy_s(self, nbytes):
        """Seconds of one copy of ``nbytes``."""
        return self.copy_call_s + nbytes / self.copy_Bps if nbytes else 0.0

    def reduce_s(self, nbytes):
        """Seconds of one reduction producing ``nbytes``."""
        return self.reduce_call_s + nbytes / self.reduce_Bps if nbytes else 0.0

    def to_json(self):
        """A JSON-able dict (infinite rates as None)."""
        d = asdict(self)
        for k in ("copy_Bps", "reduce_Bps"):
            if d[k] == float("inf"):
                d[k] = None
        return d

    @classmethod
    def from_json(cls, d):
        """The inverse of :meth:`to_json`."""
        d = dict(d)
        for k in ("copy_Bps", "reduce_Bps"):
            if d.get(k) is None:
                d[k] = float("inf")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


#: communication only: no local work in the traces (the closed forms' view)
NONE = LocalCosts()

#: Measured on this project's 2-core VM (benchmarks/simulate.md, "Calibration";
#: benchmarks/simulate/calibration-0.json, load average 5): float32, numpy 2.4, MPICH 5.0.2,
#: N = 2. Later runs on the busier machine (calibration-1..3.json) agree on NumPy's figures
#: and give 5-15x the round cost: there two ranks wait for the two cores.
MEASURED = LocalCosts(copy_call_s=2.14e-07, copy_Bps=5.18e9, reduce_call_s=2.83e-07,
                      reduce_Bps=3.29e9, round_s=4.5e-06, call_s=2.9e-05,
                      source="measured on the project's 2-core VM (benchmarks/simulate.md)")


def load(path):
    """The :class:`LocalCosts` of a JSON file written by :func:`main`."""
    with open(path) as f:
        return LocalCosts.from_json(json.load(f))


def _best(fn, reps):
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def _fit(small_t, big, t_big):
    """(call seconds, bytes per second) from the smallest size's time and a large size's."""
    rate = big / max(t_big - small_t, 1e-12)
    return small_t, rate


def measure_numpy(dtype=np.float32, small=8, big=16 << 20):
    """(copy_call_s, copy_Bps, reduce_call_s, reduce_Bps): np.copyto and np.add, best of 3."""
    out = []
    for kind in ("copy", "add"):
        ts = {}
        for nbytes in (small, big):
            n = max(1, nbytes // np.dtype(dtype).itemsize)
            a, b, c = np.ones(n, dtype), np.ones(n, dtype), np.empty(n, dtype)
            fn = (lambda a=a, c=c: np.copyto(c, a)) if kind == "copy" else \
                (lambda a=a, b=b, c=c: np.add(a, b, out=c))
            ts[nbytes] = _best(fn, 2000 if nbytes == small else 10)
        out.extend(_fit(ts[small], big, ts[big]))
    return tuple(out)


def measure_rounds(comm, iters=2000):
    """(round_s, call_s) under MPI (N = 2): see the docstring of :func:`main`."""
    import mpicoll
    x = np.ones(2, np.float32)
    y = np.empty_like(x)
    mpicoll.set_check(comm, "local")
    peer = 1 - comm.Get_rank()

    def loop(fn):
        for _ in range(50):
            fn()
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return max(comm.allgather((time.perf_counter() - t0) / iters))

    def raw():
        comm.Sendrecv(x, peer, 0, y, peer, 0)

    e = np.empty(0, np.float32)
    t = {name: min(loop(fn) for _ in range(3)) for name, fn in (
        ("raw", raw),
        ("rd", lambda: mpicoll.allreduce(x, y, algorithm="recursive_doubling", comm=comm)),
        ("ring", lambda: mpicoll.allreduce(x, y, algorithm="ring", comm=comm)),
        ("empty", lambda: mpicoll.allreduce(e, e, algorithm="ring", comm=comm)))}
    # ring runs 2 sendrecv rounds at N = 2, recursive doubling 1: their difference is one
    # round: one raw exchange plus the executor's step around it.
    return max(t["ring"] - t["rd"] - t["raw"], 0.0), t["empty"], t


def main(argv=None):
    """``python -m mpicoll.simulate.calibrate -o FILE``: measure :class:`LocalCosts` here.

    Serial: the NumPy part; the round and call costs are :data:`MEASURED`'s.
    Under ``mpiexec -n 2``: those too (``round_s`` = ring allreduce time -
    recursive doubling time - one raw ``Sendrecv`` of the same 8 bytes, at
    N = 2, where ring runs two exchanges and recursive doubling one;
    ``call_s`` = an allreduce of 0 elements).
    """
    import argparse
    p = argparse.ArgumentParser(prog="python -m mpicoll.simulate.calibrate",
                                description="Measure what local work (copies, "
                                            "reductions; under mpiexec -n 2 also rounds and "
                                            "calls) costs here, for bench simulate "
                                            "--calibration FILE.")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args(argv)
    cc, cb, rc, rb = measure_numpy()
    round_s, call_s, raw = MEASURED.round_s, MEASURED.call_s, None
    rank = 0
    try:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank = comm.Get_rank()
        if comm.Get_size() == 2:
            dup = comm.Dup()
            round_s, call_s, raw = measure_rounds(dup)
            dup.Free()
    except ImportError:
        pass
    costs = LocalCosts(cc, cb, rc, rb, round_s, call_s,
                       source="python -m mpicoll.simulate.calibrate" +
                       (" under mpiexec -n 2" if raw else " (serial: round/call costs default)"))
    if rank == 0:
        with open(args.output, "w") as f:
            json.dump(dict(costs.to_json(), loops_s=raw), f, indent=1)
        print(json.dumps(dict(costs.to_json(), loops_s=raw), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
