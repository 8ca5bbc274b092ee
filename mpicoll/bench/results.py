"""Result files: JSON lines (one record a line) and CSV, written by rank 0.

Record types: ``provenance`` (first, one per run), ``memcpy`` (NumPy copy
bandwidth of each size, measured in the same run), ``result`` (one primitive,
algorithm and size), ``skip`` (a primitive the ``nccl`` column cannot run,
or the whole ``raw`` column, with the reason) and ``end``.

Result rows of the ``raw`` column (the plain mpi4py call, :mod:`.raw`) carry
``mpi_call``; every row measured where a raw row of the same size was carries
``vs_raw`` = raw time / its time (> 1: faster than the plain mpi4py call).
``moved_by``: what moved the checked call's messages, ``{path: {"msgs", "bytes"}}``
over all ranks (:func:`.harness.moved_by`; None for the raw, nccl and torch columns and
without the check), with ``read_bytes`` where the shm algorithms read peers' memory; in
CSV ``path:msgs:bytes`` items (``path:msgs:bytes:read_bytes`` where some were read)
joined by spaces.
"""
import csv
import json

__all__ = ["Sink", "load", "CSV_FIELDS", "flatten"]

CSV_FIELDS = ["primitive", "nranks", "bytes", "count", "dtype", "op", "root", "algorithm",
              "native_algorithm", "iters", "warmup", "time_avg_us", "time_min_us",
              "time_max_us", "algbw_GBps", "busbw_GBps", "busbw_factor", "wrong",
              "memcpy_GBps", "call_nbytes", "timing", "xp", "path", "vs_raw", "moved_by"]


def flatten(rec):
    """A result record as one CSV row."""
    row = {k: rec.get(k) for k in CSV_FIELDS}
    t = rec.get("time_us") or {}
    row.update(time_avg_us=t.get("avg"), time_min_us=t.get("min"), time_max_us=t.get("max"))
    forced = rec.get("native_forced")
    row["native_algorithm"] = forced.get("name") if forced else None
    moved = rec.get("moved_by")
    row["moved_by"] = " ".join(
        f"{p}:{c['msgs']}:{c['bytes']}" + (f":{c['read_bytes']}" if "read_bytes" in c else "")
        for p, c in moved.items()) if moved else None
    return row


class Sink:
    """Rank 0's writers; every method is a no-op on other ranks."""

    def __init__(self, rank, jsonl=None, csvfile=None):
        self.active = rank == 0
        self._json = self._csv = self._csvf = None
        if self.active and jsonl:
            self._json = open(jsonl, "w")
        if self.active and csvfile:
            self._csvf = open(csvfile, "w", newline="")
            self._csv = csv.DictWriter(self._csvf, fieldnames=CSV_FIELDS)
            self._csv.writeheader()

    def write(self, rec):
        """Write record ``rec`` as a JSON line, a result record as a CSV row too (rank 0 only)."""
        if not self.active:
            return
        if self._json:
            self._json.write(json.dumps(rec, sort_keys=False) + "\n")
            self._json.flush()
        if self._csv and rec.get("type") == "result":
            self._csv.writerow(flatten(rec))
            self._csvf.flush()

    def close(self):
        """Close the files (rank 0 only)."""
        for f in (self._json, self._csvf):
            if f:
                f.close()


def load(paths):
    """All records of the given JSON-lines files: (provenances, results, memcpys).

    Each result and memcpy record gets ``_run``: the index of its file's
    provenance, so that records of different runs never mix.
    """
    provs, results, memcpys = [], [], []
    for path in paths:
        run = None
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{lineno}: not JSON ({exc})") from None
                kind = rec.get("type")
                if kind == "provenance":
                    provs.append(rec)
                    run = len(provs) - 1
                elif kind in ("result", "memcpy"):
                    rec["_run"] = run
                    (results if kind == "result" else memcpys).append(rec)
    return provs, results, memcpys
