"""The documented default ("auto") algorithm of each primitive.

Rules follow MPICH's classic thresholds, adjusted so that a non-commutative
op always gets an algorithm that keeps rank order. ``nbytes`` is the size of
one rank's contribution (the whole vector for reductions, scans and bcast,
one block for gather/scatter/allgather/alltoall, the mean block Σcounts/N
for gatherv/scatterv/allgatherv). Alltoallv's counts are each rank's own,
so its rule looks at N only (every rank must choose the same).

On one node with host arrays, allreduce from 8 MiB and reduce_scatter from
4 MiB (the whole vector) take the ``shm`` algorithms (:data:`SHM_FROM`,
measured in ``benchmarks/shm.md``). Then a measured table: ``auto`` picks the algorithm that
``python -m mpicoll.bench tune`` measured fastest for this primitive, world
size and ``nbytes`` range. The table is the file named by ``MPICOLL_TUNING``
(``none`` or ``off``: rules only), else ``mpicoll/core/tuning/default.json``,
shipped with the package and measured on a shared 2-core machine (its
``label`` says so). Where the table has no entry for the world size, names an
algorithm this version lacks, or names a commutative-only algorithm for a
non-commutative op, the rules below decide. Each file is read once per process.
"""
import json
import os

from .errors import ArgumentError
from .registry import algorithms, lookup

__all__ = ["default_algorithm", "DEFAULTS_TABLE", "SHM_FROM", "tuned_algorithm", "tuning_table",
           "TABLE_FORMAT", "DEFAULT_TUNING_PATH"]

TABLE_FORMAT = "mpicoll-tuning/1"
DEFAULT_TUNING_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "tuning", "default.json")
_tables = {}          # path -> rules, read once per process

SHORT = 2048          # bytes: latency-bound below this
LONG = 512 * 1024     # bytes: bandwidth-bound above this

#: primitive -> human description of the rule (README and --help quote it).
DEFAULTS_TABLE = {
    "bcast": "binomial below 12 KiB or N < 8, else scatter_allgather",
    "reduce": "rabenseifner for commutative ops from 2 KiB when count >= 2^⌊log2 N⌋, "
              "else binomial",
    "allreduce": "shm from 8 MiB on one node with host arrays; recursive_doubling up to "
                 "2 KiB or for non-commutative ops, else ring",
    "gather": "binomial",
    "scatter": "binomial",
    "allgather": "recursive_doubling when N·n < 80 KiB, else ring",
    "reduce_scatter": "shm from 4 MiB on one node with host arrays; recursive_halving up to "
                      "512 KiB, else pairwise; reduce_scatterv for non-commutative ops",
    "alltoall": "bruck for blocks up to 256 B when N >= 8, else pairwise",
    "barrier": "dissemination",
    "gatherv": "binomial",
    "scatterv": "binomial",
    "allgatherv": "bruck when N·n < 80 KiB (n: the mean block), else ring",
    "alltoallv": "linear up to 32 ranks, else pairwise",
    "scan": "recursive_doubling",
    "exscan": "recursive_doubling",
}


def _load(path, required):
    try:
        with open(path) as f:
            table = json.load(f)
    except OSError as exc:
        if not required:
            return {}
        raise ArgumentError(
            f"MPICOLL_TUNING: cannot read the tuning table {path!r} ({exc.strerror}); "
            f"unset it or set it to 'none' for the built-in rules") from None
    except ValueError as exc:
        raise ArgumentError(f"MPICOLL_TUNING: {path!r} is not JSON ({exc})") from None
    rules = table.get("rules") if isinstance(table, dict) else None
    if not isinstance(rules, dict) or table.get("format") != TABLE_FORMAT:
        raise ArgumentError(f"MPICOLL_TUNING: {path!r} is not an {TABLE_FORMAT} table "
                            f"(expected keys 'format' and 'rules'; write one with "
                            f"python -m mpicoll.bench tune -o FILE)")
    for prim, sizes in rules.items():
        for n, ranges in sizes.items():
            if not isinstance(ranges, list) or not all(
                    isinstance(r, dict) and isinstance(r.get("algorithm"), str)
                    and (r.get("max_nbytes") is None or isinstance(r["max_nbytes"], int))
                    for r in ranges):
                raise ArgumentError(f"MPICOLL_TUNING: {path!r}: rules[{prim!r}][{n!r}] must be a "
                                    f"list of {{'max_nbytes': int or null, 'algorithm': name}}")
    return rules


def tuning_table():
    """The rules of the tuning table in force ({} when none), read once per path."""
    env = os.environ.get("MPICOLL_TUNING")
    if env is not None and env.strip().lower() in ("", "none", "off", "0"):
        return {}
    path = DEFAULT_TUNING_PATH if env is None else env.strip()
    rules = _tables.get(path)
    if rules is None:
        rules = _tables[path] = _load(path, required=env is not None)
    return rules


def tuned_algorithm(primitive, *, size, nbytes=0, commutative=True):
    """The table's algorithm for this call, or None where the table has no usable entry."""
    ranges = tuning_table().get(primitive, {}).get(str(size))
    if not ranges:
        return None
    for r in ranges:
        if r.get("max_nbytes") is None or nbytes <= r["max_nbytes"]:
            name = r["algorithm"]
            break
    else:
        return None
    if name not in algorithms(primitive):
        return None
    if not commutative and lookup(primitive, name).commutative_only:
        return None
    return name


#: primitive -> bytes from which ``auto`` takes the shm algorithm on one node with host
#: arrays (measured: benchmarks/shm.md).
SHM_FROM = {"allreduce": 8 << 20, "reduce_scatter": 4 << 20}


def default_algorithm(primitive, *, size, nbytes=0, count=0, commutative=True, table=True,
                      one_node_host=False):
    """Name of the algorithm ``auto`` resolves to for this call.

    Shm where it is measured faster, then the tuned table, then rules; ``table=False``:
    the rules only -- they never pick an algorithm that needs a node layout or, for a
    non-commutative op, a commutative one. ``one_node_host``: every rank on one node, host
    arrays (the shm algorithms can run).
    """
    if one_node_host and size > 1 and nbytes >= SHM_FROM.get(primitive, 1 << 62) \
            and "shm" in algorithms(primitive):
        return "shm"
    tuned = table and tuned_algorithm(primitive, size=size, nbytes=nbytes,
                                      commutative=commutative)
    if tuned:
        return tuned
    if primitive == "bcast":
        return "binomial" if nbytes < 12288 or size < 8 else "scatter_allgather"
    if primitive == "reduce":
        pof2 = 1 << (size.bit_length() - 1)
        if commutative and nbytes >= SHORT and count >= pof2 and size > 1:
            return "rabenseifner"
        return "binomial"
    if primitive == "allreduce":
        return "recursive_doubling" if nbytes <= SHORT or not commutative else "ring"
    if primitive in ("gather", "scatter"):
        return "binomial"
    if primitive == "allgather":
        return "recursive_doubling" if nbytes * size < 80 * 1024 else "ring"
    if primitive == "reduce_scatter":
        if not commutative:
            return "reduce_scatterv"
        return "recursive_halving" if nbytes <= LONG else "pairwise"
    if primitive == "alltoall":
        return "bruck" if nbytes <= 256 and size >= 8 else "pairwise"
    if primitive == "barrier":
        return "dissemination"
    if primitive in ("gatherv", "scatterv"):
        return "binomial"
    if primitive == "allgatherv":
        # Bruck: ⌈log2 N⌉ messages, whatever the counts. The ring moves each byte once,
        # without a temporary: long messages. Its steps last as long as the largest
        # block, so very uneven counts favour Bruck longer than this rule (it sees
        # only the mean block) says.
        return "bruck" if nbytes * size < 80 * 1024 else "ring"
    if primitive == "alltoallv":
        # MPICH posts everything at once (in batches of 32 peers): linear up to
        # that many, then one peer per step so no rank floods the network.
        return "linear" if size <= 32 else "pairwise"
    if primitive in ("scan", "exscan"):
        return "recursive_doubling"       # MPICH's only algorithm; log N latency, any op
    # A primitive without rules here (a plug-in's): its first hand-written algorithm that
    # takes the op, else the MPI library's own.
    for name in algorithms(primitive):
        fn = lookup(primitive, name)
        if name != "native" and (commutative or not fn.commutative_only) \
                and getattr(fn, "check_layout", None) is None:
            return name
    return "native"
