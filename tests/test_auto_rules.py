"""``auto``'s rules live with their primitives, and their descriptions say what they do.

Each primitive declares its rule on its ``Primitive`` (``auto=`` in
``mpicoll/calls/<primitive>.py``); :data:`mpicoll.DEFAULTS_TABLE` is written
from those rules. The lock: over a grid of world sizes, byte counts at and
around every threshold, element counts around 2^⌊log2 N⌋, commutative and
not, on one node with host arrays and not, ``default_algorithm(...,
table=False)`` answers as :func:`reference` does — a copy of the if-chain
that held the rules before they moved, kept here as the independent
reference. Each description names every algorithm its rule returns on the
grid and every threshold the reference uses, written as the description
writes it. Serial pytest.
"""
import inspect
import re

import pytest

import mpicoll
from mpicoll.core import defaults
from mpicoll.core.registry import algorithms, info, lookup
from mpicoll.core.rules import Auto, KiB, N, Rule, commutative, fmt_bytes, n

# --- the reference: the if-chain of mpicoll/core/defaults.py before the rules moved -------

SHORT = 2048
LONG = 512 * 1024
SHM_FROM = {"allreduce": 8 << 20, "reduce_scatter": 4 << 20}


def reference(primitive, *, size, nbytes=0, count=0, commutative=True, one_node_host=False):
    """``default_algorithm(..., table=False)`` as it was written before the rules moved."""
    if one_node_host and size > 1 and nbytes >= SHM_FROM.get(primitive, 1 << 62) \
            and "shm" in algorithms(primitive):
        return "shm"
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
        return "bruck" if nbytes * size < 80 * 1024 else "ring"
    if primitive == "alltoallv":
        return "linear" if size <= 32 else "pairwise"
    if primitive in ("scan", "exscan"):
        return "recursive_doubling"
    for name in algorithms(primitive):
        fn = lookup(primitive, name)
        if name != "native" and (commutative or not fn.commutative_only) \
                and getattr(fn, "check_layout", None) is None:
            return name
    return "native"


#: The primitives the reference has rules for, in the seed's order and then the rest.
RULED = ("bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "reduce_scatter",
         "alltoall", "barrier", "gatherv", "scatterv", "allgatherv", "alltoallv", "scan",
         "exscan")


def _words(value):
    """Bytes as the descriptions write them (independently of mpicoll's formatter)."""
    if value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20} MiB"
    if value >= 1 << 10 and value % (1 << 10) == 0:
        return f"{value >> 10} KiB"
    return f"{value} B"


#: primitive -> what its description must name of the reference's thresholds: bytes
#: (written in KiB/MiB), and comparisons on N or count.
THRESHOLDS = {
    "bcast": [_words(12288), "N < 8"],
    "reduce": [_words(SHORT), "count >= 2^⌊log2 N⌋", "N > 1"],
    "allreduce": [_words(SHM_FROM["allreduce"]), "N > 1", _words(SHORT)],
    "allgather": [f"N·n < {_words(80 * 1024)}"],
    "reduce_scatter": [_words(SHM_FROM["reduce_scatter"]), "N > 1", _words(LONG)],
    "alltoall": [_words(256), "N >= 8"],
    "allgatherv": [f"N·n < {_words(80 * 1024)}"],
    "alltoallv": ["N <= 32"],
}

#: World sizes 1..1100: the small ones, both sides of each power of two, the thresholds on N.
SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129,
         255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 1100)
#: Every byte threshold of the reference.
BYTE_THRESHOLDS = (256, SHORT, 12288, 80 * 1024, LONG, *SHM_FROM.values())


def _nbytes(size):
    """0, 1, each threshold -1/0/+1, 80 KiB / N around its edge, and large."""
    out = {0, 1, 2, 1 << 30}
    for t in BYTE_THRESHOLDS:
        out |= {t - 1, t, t + 1}
    edge = 80 * 1024 // size
    out |= {max(edge - 1, 0), edge, edge + 1, -(-80 * 1024 // size)}
    return sorted(out)


def _counts(size):
    pof2 = 1 << (size.bit_length() - 1)
    return sorted({0, 1, pof2 - 1, pof2, pof2 + 1, 1 << 20})


def _grid():
    for size in SIZES:
        for nbytes in _nbytes(size):
            for count in _counts(size):
                for comm in (True, False):
                    for host in (False, True):
                        yield dict(size=size, nbytes=nbytes, count=count, commutative=comm,
                                   one_node_host=host)


@pytest.mark.parametrize("primitive", RULED)
def test_the_rules_choose_as_the_reference_does(primitive):
    returned = set()
    for kw in _grid():
        want = reference(primitive, **kw)
        got = defaults.default_algorithm(primitive, table=False, **kw)
        assert got == want, (primitive, kw)
        returned.add(got)
    text = mpicoll.DEFAULTS_TABLE[primitive]
    for name in returned:
        assert re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text), (primitive, name, text)
    # No rule is dead: every algorithm it declares is returned somewhere on the grid.
    declared = set(info(primitive).auto.algorithms)
    assert declared <= returned, (primitive, declared - returned)
    assert returned - declared <= {"shm"}
    for phrase in THRESHOLDS.get(primitive, []):
        assert phrase in text, (primitive, phrase, text)
    # A rule that depends on the op's commutativity says so.
    if any(reference(primitive, **dict(kw, commutative=True))
           != reference(primitive, **dict(kw, commutative=False)) for kw in _grid()):
        assert "commutative" in text, text


@pytest.mark.parametrize("primitive", RULED)
def test_each_description_writes_every_threshold_its_rule_compares(primitive):
    text = mpicoll.DEFAULTS_TABLE[primitive]
    auto = info(primitive).auto
    compares = auto.compares()
    shm = defaults.shm_rule(primitive)
    if shm is not None:
        compares += shm.when.compares()
    for quantity, threshold in compares:
        assert quantity.format(threshold) in text, (primitive, threshold, text)


def test_the_descriptions_cover_every_primitive_with_a_rule():
    assert set(RULED) <= set(mpicoll.PRIMITIVES)
    assert set(mpicoll.DEFAULTS_TABLE) == {p for p in mpicoll.PRIMITIVES
                                           if info(p).auto is not None}
    assert set(RULED) <= set(mpicoll.DEFAULTS_TABLE)
    assert len(mpicoll.DEFAULTS_TABLE) == len(list(mpicoll.DEFAULTS_TABLE))
    assert mpicoll.DEFAULTS_TABLE.get("no_such_primitive") is None
    with pytest.raises(TypeError):
        mpicoll.DEFAULTS_TABLE["bcast"] = "linear"
    assert eval(repr(mpicoll.DEFAULTS_TABLE)) == dict(mpicoll.DEFAULTS_TABLE)
    # The shm step and the tuned table stay in core/defaults.py; the rule in calls/.
    assert defaults.SHM_FROM == SHM_FROM
    assert mpicoll.calls.bcast.PRIMITIVE.auto is info("bcast").auto


def test_the_signature_is_unchanged():
    assert str(inspect.signature(defaults.default_algorithm)) == (
        "(primitive, *, size, nbytes=0, count=0, commutative=True, table=True, "
        "one_node_host=False)")
    assert mpicoll.default_algorithm is defaults.default_algorithm


def test_the_rule_language_writes_what_it_tests():
    assert [fmt_bytes(v) for v in (0, 1, 256, 2048, 12288, 81920, 8 << 20, 1 << 30, 1025)] == [
        "0 B", "1 B", "256 B", "2 KiB", "12 KiB", "80 KiB", "8 MiB", "1 GiB", "1025 B"]
    auto = Auto(Rule("a", (n <= 2 * KiB) & commutative), Rule("b", (N > 4) | (n > 3)),
                Rule("c"), note="n: one block")
    assert auto.text == "a up to 2 KiB for commutative ops, b when N > 4 or above 3 B, else c " \
                        "(n: one block)"
    assert auto.algorithms == ("a", "b", "c")
    assert Auto(Rule("only")).text == "only"
    with pytest.raises(ValueError):
        Auto(Rule("a", N > 1))
    with pytest.raises(ValueError):
        Auto(Rule("a"), Rule("b"))


def test_a_plugin_primitive_brings_its_rule():
    from mpicoll.core.registry import _DEFINED, _REGISTRY, define
    ruled, bare = "auto_rule_twin", "auto_rule_bare"
    try:
        define(ruled, None, auto=Auto(Rule("fast", N * n < 64 * KiB), Rule("wide")))
        define(bare, None)
        assert mpicoll.DEFAULTS_TABLE[ruled] == "fast when N·n < 64 KiB, else wide"
        assert bare not in mpicoll.DEFAULTS_TABLE and ruled in list(mpicoll.DEFAULTS_TABLE)
        assert defaults.default_algorithm(ruled, size=4, nbytes=16 * KiB - 1) == "fast"
        assert defaults.default_algorithm(ruled, size=4, nbytes=16 * KiB) == "wide"
        assert defaults.default_algorithm(bare, size=4, nbytes=1) == reference(
            bare, size=4, nbytes=1) == "native"
    finally:
        for name in (ruled, bare):
            _DEFINED.pop(name, None)
            _REGISTRY.pop(name, None)
    assert ruled not in mpicoll.DEFAULTS_TABLE
