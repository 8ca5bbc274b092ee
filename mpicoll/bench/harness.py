"""The sweep: per size, per algorithm, an untimed check, warm-up and a timed loop.

Timing follows OSU: each rank times every call on its own (a barrier, not
timed, between calls), takes its mean, and the means are reduced across
ranks to min/avg/max. ``--timing loop`` times back-to-back calls instead
(nccl-tests' way). Bandwidths use the average: algbw = size / avg time,
busbw = algbw x nccl-tests' factor. Timed calls run in check mode ``local``
(no agreement step), set with :func:`mpicoll.set_check` on the bench's
communicator; the check pass runs with ``agree``.

Reference columns beside mpicoll's algorithms: ``native`` (mpicoll's call of
the MPI library's collective), ``raw`` (the plain mpi4py call, no mpicoll
layer: :mod:`.raw`; first of each size, so other rows record ``vs_raw``) and
``nccl`` (:mod:`.nccl`).
"""
import sys
import time

import numpy as np

import mpicoll
from mpicoll.core.defaults import default_algorithm

from . import raw as rawcol
from . import torchdist
from .specs import SPECS, ArrayModule, Case
from .units import dtype_label, fmt_size, iterations, size_sweep

__all__ = ["Sweep", "time_calls", "algorithm_labels", "CHECK_NOTE"]

CHECK_NOTE = ("check mode local (mpicoll.set_check on the bench's communicator) during timed "
              "calls (no agreement step); agree during the untimed check pass")


def time_calls(fn, iters, warmup, comm, sync=lambda: None, barrier=True):
    """This rank's (mean, median) seconds per call of ``fn``.

    With ``barrier`` each call is timed alone (OSU); else the loop is timed
    as a whole and the median is the mean.
    """
    for _ in range(warmup):
        fn()
    sync()
    comm.Barrier()
    perf = time.perf_counter
    if barrier:
        samples = []
        for _ in range(iters):
            t0 = perf()
            fn()
            sync()
            samples.append(perf() - t0)
            comm.Barrier()
        return sum(samples) / iters, float(np.median(samples))
    t0 = perf()
    for _ in range(iters):
        fn()
    sync()
    mean = (perf() - t0) / iters
    return mean, mean


def across(comm, t):
    """min/avg/max over ranks of each rank's mean, and the ranks' average median (us)."""
    every = comm.allgather(t)
    means = [m for m, _ in every]
    return {"avg": 1e6 * sum(means) / len(means), "min": 1e6 * min(means),
            "max": 1e6 * max(means), "median": 1e6 * sum(md for _, md in every) / len(every)}


def algorithm_labels(primitive, requested, native_forced, *, strict=True):
    """[(label, algorithm, forced name or None)] for one primitive."""
    known = mpicoll.algorithms(primitive)
    if requested == ["all"]:
        names = list(known)
    else:
        names = []
        for name in requested:
            if name in known or name == "auto":
                names.append(name)
            elif strict:
                raise SystemExit(f"--algorithm: {primitive} has no algorithm {name!r}; "
                                 f"valid: {', '.join(known)}, auto, all, and the reference "
                                 f"columns raw, nccl, gloo and torch-mpicoll")
    out = [(n, n, None) for n in names]
    out += [(f"native[{f}]", "native", f) for f in native_forced.get(primitive, [])]
    return out


_HEAD = ("#{:>11} {:>11} {:>6} {:>5} {:>4}  {:<26} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8} {:>7}")
_ROW = ("{:>12} {:>11} {:>6} {:>5} {:>4}  {:<26} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8} {:>7}")


def table_header(primitive):
    return ["#", f"# {primitive}",
            _HEAD.format("size", "count", "type", "redop", "root", "algorithm", "iters",
                         "avg", "min", "max", "algbw", "busbw", "#wrong"),
            _HEAD.format("(B)", "(elements)", "", "", "", "", "", "(us)", "(us)", "(us)",
                         "(GB/s)", "(GB/s)", "")]


def _num(x, fmt):
    return "-" if x is None else format(x, fmt)


def table_row(r):
    t = r["time_us"]
    wrong = "N/A" if r["wrong"] is None else r["wrong"]
    return _ROW.format(r["bytes"], r["count"], dtype_label(r["dtype"]), r["op"] or "-",
                       "-" if r["root"] is None else r["root"], r["algorithm"], r["iters"],
                       _num(t["avg"], ".2f"), _num(t["min"], ".2f"), _num(t["max"], ".2f"),
                       _num(r["algbw_GBps"], ".3f"), _num(r["busbw_GBps"], ".3f"), wrong)


class Progress:
    """Rank 0's progress lines on stderr: every few seconds of a long sweep."""

    def __init__(self, active, total, mode="auto", every=5.0):
        self.active = active and mode != "off"
        self.always = mode == "on"
        self.total, self.done, self.every = max(total, 1), 0, every
        self.start = self.last = time.monotonic()

    def step(self, what):
        self.done += 1
        now = time.monotonic()
        if self.active and (self.always or now - self.last >= self.every):
            self.last = now
            sys.stderr.write(f"# progress {self.done}/{self.total} "
                             f"({100 * self.done / self.total:.0f}%) {what}, "
                             f"{now - self.start:.0f} s elapsed\n")
            sys.stderr.flush()


class Sweep:
    """Run the sweep of one or more primitives, writing records through ``sink``."""

    def __init__(self, opts, comm, sink, echo=print, native_forced=None, tracer=None,
                 nccl=None, raw=None, torch=None):
        self.opts, self.comm, self.sink, self.echo = opts, comm, sink, echo
        self.rank, self.n = comm.Get_rank(), comm.Get_size()
        self.native_forced = native_forced or {}
        self.forced_settings = []
        self.tracer = tracer
        self.total_wrong = 0
        self.records = []
        self.nccl = nccl            # bench.nccl Column or Skipped; None: not requested
        # The reference columns of other libraries (bench.nccl, bench.torchdist): label ->
        # Column or Skipped; and per label, (primitive, reason) of primitives without a row.
        self.refs = {k: c for k, c in (("nccl", nccl), *(torch or {}).items()) if c is not None}
        self.ref_skips = {k: [] for k in self.refs}
        # the raw mpi4py column; None: as opts ask (raw listed, or all in a measuring command)
        self.raw = rawcol.wanted(opts) if raw is None else bool(raw)
        self.raw_skip = None        # why the raw column could not run (same on every rank)
        self._raw_us = {}           # (primitive, bytes) -> the raw row's avg time (us)
        from mpicoll.core.topology import layout
        from mpicoll.engine.context import private_comm
        self.one_node_host = None           # what auto sees (set with the buffers below)
        self.am = getattr(opts, "array_module", None) or \
            ArrayModule(opts.xp, comm, getattr(opts, "device", None),
                        getattr(opts, "shared_result", False))
        self.one_node_host = (self.am.name != "cupy"
                              and layout(private_comm(comm)).n_nodes == 1)

    def sizes(self, primitive):
        """The message sizes (bytes) swept for ``primitive`` (barrier: 0 only)."""
        if primitive == "barrier":
            return [0]
        if getattr(self.opts, "sizes", None):
            return list(self.opts.sizes)
        return size_sweep(self.opts.minbytes, self.opts.maxbytes, self.opts.stepfactor)

    def plan(self, primitives):
        """The rows to run: {primitive: [(label, algorithm, forced name or None)]}.

        Algorithms that cannot run here are left out (``self.refused`` says why); the raw
        and reference columns are added where they apply (their skips go to ``self.ref_skips``).
        """
        # "nccl", the torch columns and "raw" are not registered algorithms: their columns
        # add their rows.
        requested = [a for a in self.opts.algorithms
                     if a not in ("nccl", rawcol.LABEL) and not torchdist.is_label(a)]
        plan = {p: algorithm_labels(p, requested, self.native_forced,
                                    strict=len(primitives) == 1) for p in primitives}
        # Algorithms that cannot run here (the shm ones on device buffers or across nodes)
        # get a skip line with the reason instead of a row.
        from mpicoll.core.registry import lookup
        from mpicoll.engine.call import refusal
        from mpicoll.engine.context import private_comm
        pcomm = private_comm(self.comm)
        commutative = self.opts.op.is_commutative if getattr(self.opts, "op", None) else True
        self.refused = []
        for p in primitives:
            keep = []
            for label, alg, forced in plan[p]:
                why = None
                if alg in mpicoll.algorithms(p) and alg != "native":
                    why = refusal(lookup(p, alg), pcomm, commutative, self.am.name == "cupy")
                if why:
                    self.refused.append((p, label, why))
                else:
                    keep.append((label, alg, forced))
            plan[p] = keep
        if self.raw:
            self.raw_skip = rawcol.agreed_skip_reason(self.comm, self.am)
            if self.raw_skip is None:
                for p in primitives:        # first: the other rows of a size record vs_raw
                    if p in rawcol.CALLS:   # (a plug-in's primitive has no mpi4py call)
                        plan[p].insert(0, (rawcol.LABEL, rawcol.LABEL, None))
        for label, col in self.refs.items():
            if not col.usable:
                continue
            for p in primitives:
                why = col.skip_reason(SPECS[p], self.opts.op)
                if why is None:
                    plan[p].append((label, label, None))
                else:
                    self.ref_skips[label].append((p, why))
        return plan

    def run(self, primitives):
        """Run the sweep of ``primitives``: skip records, then every row; the total #wrong."""
        plan = self.plan(primitives)
        total = sum(len(self.sizes(p)) * len(plan[p]) for p in primitives)
        self.progress = Progress(self.rank == 0, total, self.opts.progress)
        if self.raw_skip is not None:
            self.sink.write({"type": "skip", "primitive": None, "algorithm": rawcol.LABEL,
                             "reason": self.raw_skip})
            if self.rank == 0:
                self.echo(f"# {self.raw_skip}")
        for p in primitives:
            for q, label, why in self.refused:
                if q == p:
                    self.sink.write({"type": "skip", "primitive": p, "algorithm": label,
                                     "reason": why})
                    if self.rank == 0:
                        self.echo(f"# {p} {label}: skipped, {why.removeprefix('algorithm: ')}")
            for label, skipped in self.ref_skips.items():
                for q, why in skipped:
                    if q != p:
                        continue
                    self.sink.write({"type": "skip", "primitive": p, "algorithm": label,
                                     "reason": why})
                    if self.rank == 0:
                        self.echo(f"# {why}")
            if plan[p]:
                self.run_primitive(p, plan[p])
        return self.total_wrong

    def run_primitive(self, primitive, labels):
        """Measure every row of ``labels`` at each size of ``primitive`` (then trace, if asked)."""
        o, spec = self.opts, SPECS[primitive]
        if self.rank == 0:
            for line in table_header(primitive):
                self.echo(line)
        seen = set()
        for nbytes in self.sizes(primitive):
            case = Case(spec, nbytes, dtype=o.dtype, op=o.op, opname=o.opname, root=o.root,
                        comm=self.comm, am=self.am)
            if case.bytes in seen:          # rounding to whole blocks made a duplicate
                self.am.release()
                for _ in labels:
                    self.progress.step(f"{primitive} {fmt_size(nbytes)} (duplicate size)")
                continue
            seen.add(case.bytes)
            iters, warmup = iterations(case.bytes, o.iters, o.warmup, o.large_bytes)
            memcpy = self.memcpy(case, iters, warmup) if case.bytes and o.memcpy else None
            for label, alg, forced in labels:
                with case.result_for(alg):
                    self.one(case, label, alg, forced, iters, warmup, memcpy)
                self.progress.step(f"{primitive} {fmt_size(case.bytes)} {label}")
            self.am.release()
        if self.tracer is not None:
            self.tracer.trace_primitive(self, primitive, labels)

    def memcpy(self, case, iters, warmup):
        """NumPy copy of the same bytes on every rank at once (the machine's copy bandwidth)."""
        xp = self.am.xp
        src = xp.ones(case.bytes, dtype=np.uint8)
        dst = xp.empty_like(src)
        t = time_calls(lambda: xp.copyto(dst, src), iters, warmup, self.comm, self.am.sync,
                       self.opts.timing == "osu")
        times = across(self.comm, t)
        rec = {"type": "memcpy", "primitive": case.spec.name, "nranks": self.n,
               "bytes": case.bytes, "iters": iters,
               "xp": self.am.name, "time_us": times,
               "bw_GBps": case.bytes / times["avg"] / 1e3}
        self.sink.write(rec)
        if self.rank == 0:
            self.echo(f"#{'':>11} memcpy ({self.am.name} copyto, every rank at once): "
                      f"{times['avg']:.2f} us, {rec['bw_GBps']:.3f} GB/s")
        return rec["bw_GBps"]

    def check(self, case, fn, comm=None, observe=True):
        """(#wrong over all ranks, what moved the messages) for untimed calls of ``fn``.

        The calls run on ``comm`` with the agreement step on; see :func:`moved_by`.

        Two calls: one observed by :func:`mpicoll.traffic` (which moved what), then the
        checked one, unobserved -- an observed call takes neither the memo nor the direct
        binding of host steps, so only an unobserved call checks (and leaves in the memo)
        the steps the timed calls replay. ``observe`` False: the checked call only (``fn``
        makes no mpicoll call on the bench's communicator: the raw, nccl and torch columns).
        """
        comm = comm or self.comm
        mpicoll.set_check(comm, "agree")
        seen = None
        try:
            if observe:
                case.prepare_check()        # (data fit for the op, as the checked call's)
                with mpicoll.traffic() as seen:
                    fn()
                    self.am.sync()
            case.prepare_check()
            fn()
            self.am.sync()
        except mpicoll.ArgumentTypeError as exc:
            if self.am.name == "cupy":      # raised on every rank (agree mode)
                raise SystemExit(f"--xp {self.am.name}: {exc}") from None
            raise
        finally:
            mpicoll.set_check(comm, "local")
        calls = seen.calls if seen else ()
        mine = _summed([(path, c[0], c[1], 0) for call in calls
                        for path, c in call.paths.items()]
                       + [(call.path, 0, 0, call.read_bytes) for call in calls
                          if call.read_bytes])
        every = self.comm.allgather((case.wrong(), mine))
        return sum(w for w, _ in every), moved_by([m for _, m in every])

    def one(self, case, label, alg, forced, iters, warmup, memcpy):
        """Measure one row (``label``, algorithm ``alg``) on ``case``; record and print it.

        ``forced``: the algorithm forced on the MPI library's own collective (or None);
        ``memcpy``: the copy bandwidth measured at this size, recorded with the row.
        """
        o = self.opts
        setting = None
        if alg in self.refs:
            wrong, moved, t = self._measure(case, self.refs[alg].call(case), iters, warmup,
                                            observe=False)
        elif alg == rawcol.LABEL:
            wrong, moved, t = self._measure(case, rawcol.call(case, self.comm, self.am), iters,
                                            warmup, observe=False)
        elif forced is None:
            wrong, moved, t = self._measure(case, case.call(alg), iters, warmup)
        else:
            from .native import forcing
            with forcing(case.spec.name, forced, self.comm) as (fresh, setting):
                mpicoll.set_check(fresh, "local")       # as on the bench's communicator
                wrong, moved, t = self._measure(case, case.call(alg, fresh), iters, warmup, fresh)
            self.forced_settings.append(setting)
        times = across(self.comm, t)
        factor = case.busbw_factor()
        algbw = case.bytes / times["avg"] / 1e3 if case.bytes and times["avg"] > 0 else None
        commutative = case.op.is_commutative if case.op is not None else True
        key = (case.spec.name, case.bytes)
        if alg == rawcol.LABEL:
            self._raw_us[key] = times["avg"]
        raw_us = self._raw_us.get(key)
        rec = {"type": "result", "primitive": case.spec.name, "algorithm": label,
               "nranks": self.n, "bytes": case.bytes, "count": case.count,
               "block_count": case.block, "call_nbytes": case.call_nbytes,
               "dtype": case.dtype.name, "op": case.opname if case.spec.reduces else None,
               "root": case.root, "iters": iters, "warmup": warmup, "timing": o.timing,
               "xp": self.am.name, "path": alg if alg in self.refs else self.am.path,
               "moved_by": moved,
               "time_us": times, "algbw_GBps": algbw,
               "busbw_GBps": None if algbw is None or factor is None else algbw * factor,
               "busbw_factor": factor, "wrong": wrong, "checked": wrong is not None,
               "memcpy_GBps": memcpy, "native_forced": setting,
               "auto": self.auto_choice(case, commutative),
               # speedup over the raw mpi4py call of the same size (raw time / this time)
               "vs_raw": raw_us / times["avg"] if raw_us and times["avg"] > 0 else None}
        if alg == rawcol.LABEL:
            rec["mpi_call"] = rawcol.CALLS[case.spec.name]
        if wrong:
            self.total_wrong += wrong
        self.records.append(rec)
        self.sink.write(rec)
        if self.rank == 0:
            self.echo(table_row(rec))

    def auto_choice(self, case, commutative):
        """What ``algorithm="auto"`` would run for this call (recorded, never fatal)."""
        try:
            return default_algorithm(case.spec.name, size=self.n, nbytes=case.call_nbytes,
                                     count=case.call_count, commutative=commutative,
                                     one_node_host=self.one_node_host)
        except Exception as exc:  # e.g. a broken MPICOLL_TUNING file
            return f"error: {exc}"

    def _measure(self, case, fn, iters, warmup, comm=None, observe=True):
        wrong, moved = self.check(case, fn, comm, observe) if self.opts.check else (None, None)
        t = time_calls(fn, iters, warmup, self.comm, self.am.sync, self.opts.timing == "osu")
        return wrong, moved, t


def _summed(items):
    """{path: {"msgs", "bytes"[, "read_bytes"]}} of items, summed per path.

    The items are (path, messages, bytes, bytes read from peers' memory).
    """
    total = {}
    for path, msgs, nbytes, read in items:
        got = total.setdefault(path, {"msgs": 0, "bytes": 0})
        got["msgs"] += msgs
        got["bytes"] += nbytes
        if read:
            got["read_bytes"] = got.get("read_bytes", 0) + read
    return total


def moved_by(per_rank):
    """What moved a call's messages: ``{path: {"msgs", "bytes"}}`` summed over the ranks.

    The ranks give ``{path: counts}`` of what each *sent* (each message counted once, by
    its sender; ``CallTraffic.paths``: host, staged, cuda-aware, ipc, eager, host-copy, and
    for the shm algorithms shm-cma, shm-view or shm-segment with the bytes read from peers;
    a ``native`` call's path with zeros: its messages are the MPI library's). None where no
    mpicoll call ran (the raw, nccl and torch columns); a run without the check records
    None.
    """
    return _summed((path, c["msgs"], c["bytes"], c.get("read_bytes", 0)) for mine in per_rank
                   for path, c in mine.items()) or None
