"""The documented default ("auto") algorithm of each primitive.

Each primitive's rule lives with it, on its :class:`mpicoll.Primitive`
(``auto=`` in ``mpicoll/calls/<primitive>.py``, an
:class:`mpicoll.core.rules.Auto`), and reaches this module through the
registry; :data:`DEFAULTS_TABLE` is written from the rules themselves. Rules
follow MPICH's classic thresholds, adjusted so that a non-commutative op
always gets an algorithm that keeps rank order. ``nbytes`` is the size of one
rank's contribution (the whole vector for reductions, scans and bcast, one
block for gather/scatter/allgather/alltoall, the mean block Σcounts/N for
gatherv/scatterv/allgatherv). Alltoallv's counts are each rank's own, so its
rule looks at N only (every rank must choose the same).

On one node with host arrays, allreduce from 8 MiB and reduce_scatter from
4 MiB (the whole vector) take the ``shm`` algorithms (:data:`SHM_FROM`,
measured in ``benchmarks/shm.md``). Then a measured table: ``auto`` picks the algorithm that
``python -m mpicoll.bench tune`` measured fastest for this primitive, world
size and ``nbytes`` range. The table is the file named by ``MPICOLL_TUNING``
(``none`` or ``off``: rules only), else ``mpicoll/core/tuning/default.json``,
shipped with the package and measured on a shared 2-core machine (its
``label`` says so). Where the table has no entry for the world size, names an
algorithm this version lacks, or names a commutative-only algorithm for a
non-commutative op, the primitive's rule decides. Each file is read once per process.
"""
import json
import os

from .errors import ArgumentError
from .registry import PRIMITIVES, algorithms, info, lookup
from .rules import Facts, N, Rule, one_node_host
from .rules import n as n_bytes
from .views import LiveView

__all__ = ["default_algorithm", "DEFAULTS_TABLE", "SHM_FROM", "shm_rule", "tuned_algorithm",
           "tuning_table", "TABLE_FORMAT", "DEFAULT_TUNING_PATH"]

TABLE_FORMAT = "mpicoll-tuning/1"
DEFAULT_TUNING_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "tuning", "default.json")
_tables = {}          # path -> rules, read once per process

#: primitive -> bytes from which ``auto`` takes the shm algorithm on one node with host
#: arrays (measured: benchmarks/shm.md).
SHM_FROM = {"allreduce": 8 << 20, "reduce_scatter": 4 << 20}


#: primitive -> ``auto``'s shm step as a rule, made once (``default_algorithm`` reads it on
#: every choice; the descriptions write it).
_SHM_RULES = {p: Rule("shm", (n_bytes >= at) & one_node_host & (N > 1))
              for p, at in SHM_FROM.items()}


def shm_rule(primitive):
    """``auto``'s shm step for ``primitive`` as a :class:`~mpicoll.core.rules.Rule`, or None."""
    return _SHM_RULES.get(primitive)


def _description(primitive):
    """A primitive's ``auto`` rule in words, written from the rule (and :data:`SHM_FROM`)."""
    auto = info(primitive).auto if primitive in PRIMITIVES else None
    if auto is None:
        return None
    shm = shm_rule(primitive)
    return auto.text if shm is None else f"{shm.text()}; {auto.text}"


#: primitive -> human description of its ``auto`` rule (README, the docs' gallery and
#: --help quote it), written from the rules in ``mpicoll/calls/<primitive>.py``.
DEFAULTS_TABLE = LiveView(lambda: PRIMITIVES, _description)


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


def default_algorithm(primitive, *, size, nbytes=0, count=0, commutative=True, table=True,
                      one_node_host=False):
    """Name of the algorithm ``auto`` resolves to for this call.

    Shm where it is measured faster, then the tuned table, then rules; ``table=False``:
    the rules only -- they never pick an algorithm that needs a node layout or, for a
    non-commutative op, a commutative one. ``one_node_host``: every rank on one node, host
    arrays (the shm algorithms can run).
    """
    facts = Facts(size, nbytes, count, commutative, one_node_host)
    shm = _SHM_RULES.get(primitive) if one_node_host else None
    if shm is not None and shm.when.holds(facts) and "shm" in algorithms(primitive):
        return "shm"
    tuned = table and tuned_algorithm(primitive, size=size, nbytes=nbytes,
                                      commutative=commutative)
    if tuned:
        return tuned
    auto = info(primitive).auto
    if auto is not None:
        return auto.choose(facts)
    # A primitive without a rule (a plug-in's): its first hand-written algorithm that
    # takes the op, else the MPI library's own.
    for name in algorithms(primitive):
        fn = lookup(primitive, name)
        if name != "native" and (commutative or not fn.commutative_only) \
                and getattr(fn, "check_layout", None) is None:
            return name
    return "native"
