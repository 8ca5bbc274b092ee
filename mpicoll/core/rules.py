"""``auto``'s rules as data: each primitive's choice and its description from the same thresholds.

A primitive declares its rule on its :class:`mpicoll.Primitive` (``auto=``) as
an :class:`Auto`: an ordered list of :class:`Rule` entries, the first whose
condition holds names the algorithm; the last has no condition (``else``).
Conditions are built from the quantities of a call, compared with numbers
or with each other, and combined with ``&`` and ``|``::

    Auto(Rule("binomial", (n < 12 * KiB) | (N < 8)), Rule("scatter_allgather"))

reads "binomial below 12 KiB or when N < 8, else scatter_allgather"
(:attr:`Auto.text`). The quantities: :data:`N` (ranks), :data:`n` (bytes of
one rank's contribution, as :func:`mpicoll.core.defaults.default_algorithm`
defines it per primitive; :meth:`Bytes.named` words it, e.g. "blocks"),
:data:`count` (elements), :data:`POF2` (2^⌊log2 N⌋), products such as
``N * n``; and :data:`commutative` / :data:`non_commutative`,
:data:`one_node_host`. Each condition evaluates a call and writes itself, so
the text cannot say one threshold while the code uses another.
"""
import operator

__all__ = ["Auto", "Rule", "Facts", "N", "n", "count", "POF2", "commutative",
           "non_commutative", "one_node_host", "fmt_bytes", "KiB", "MiB", "SHORT", "LONG"]

KiB = 1024
MiB = 1024 * KiB

#: MPICH's classic thresholds (bytes): latency-bound up to SHORT, bandwidth-bound above LONG.
SHORT = 2 * KiB
LONG = 512 * KiB


def fmt_bytes(value):
    """``12288`` -> ``"12 KiB"``: the largest unit (B, KiB, MiB, GiB) that divides it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} B"


class Facts:
    """What a rule sees of a call.

    N, the bytes, the element count, whether the op commutes, whether every rank is on one
    node with host arrays.
    """

    __slots__ = ("size", "nbytes", "count", "commutative", "one_node_host")

    def __init__(self, size, nbytes=0, count=0, commutative=True, one_node_host=False):
        self.size, self.nbytes, self.count = size, nbytes, count
        self.commutative, self.one_node_host = commutative, one_node_host


_OPS = {"<": operator.lt, "<=": operator.le, ">=": operator.ge, ">": operator.gt}
#: A byte quantity compared with a number, in words.
_WORDS = {"<": "below", "<=": "up to", ">=": "from", ">": "above"}


class Quantity:
    """A number taken from a call; comparing it with a number or quantity makes a condition."""

    bytes = False         # measured in bytes: thresholds are written as fmt_bytes writes them

    def __init__(self, text, value):
        self.text, self.value = text, value

    def _cmp(self, op, other):
        return Compare(self, op, other)

    def __lt__(self, other):
        return self._cmp("<", other)

    def __le__(self, other):
        return self._cmp("<=", other)

    def __ge__(self, other):
        return self._cmp(">=", other)

    def __gt__(self, other):
        return self._cmp(">", other)

    def __mul__(self, other):
        return Product(self, other)

    def format(self, threshold):
        """A threshold compared with this quantity, as the description writes it."""
        return fmt_bytes(threshold) if self.bytes else str(threshold)


class Bytes(Quantity):
    """The bytes of one rank's contribution, compared in words ("up to 2 KiB")."""

    bytes = True

    def __init__(self, noun=""):
        super().__init__("n", lambda f: f.nbytes)
        self.noun = noun

    def named(self, noun):
        """The same quantity worded "for <noun> up to ..." (``n.named("blocks")``)."""
        return Bytes(noun)


class Product(Quantity):
    """The product of two quantities (``N * n``, written ``N·n``)."""

    def __init__(self, a, b):
        super().__init__(f"{a.text}·{b.text}", lambda f: a.value(f) * b.value(f))
        self.bytes = a.bytes or b.bytes


#: The number of ranks.
N = Quantity("N", lambda f: f.size)
#: The bytes of one rank's contribution.
n = Bytes()
#: The element count of one rank's contribution.
count = Quantity("count", lambda f: f.count)
#: 2^⌊log2 N⌋: the largest power of two up to N.
POF2 = Quantity("2^⌊log2 N⌋", lambda f: 1 << (f.size.bit_length() - 1))


class Condition:
    """Holds or not for a call (:meth:`holds`); writes itself (:meth:`text`)."""

    #: A clause ("N >= 8") is introduced by "when"; a phrase ("up to 2 KiB") is not.
    clause = False

    def __and__(self, other):
        return All(self, other)

    def __or__(self, other):
        return Any(self, other)

    def holds(self, facts):
        raise NotImplementedError

    def text(self):
        raise NotImplementedError

    def compares(self):
        """The (quantity, threshold) pairs it compares a quantity against a number with."""
        return []


class Compare(Condition):
    """``quantity op threshold`` (a number, or another quantity)."""

    def __init__(self, quantity, op, threshold):
        self.quantity, self.op, self.threshold = quantity, op, threshold
        self.clause = not (isinstance(quantity, Bytes) and not isinstance(threshold, Quantity))

    def holds(self, facts):
        t = self.threshold
        return _OPS[self.op](self.quantity.value(facts),
                             t.value(facts) if isinstance(t, Quantity) else t)

    def text(self):
        q, t = self.quantity, self.threshold
        if isinstance(t, Quantity):
            return f"{q.text} {self.op} {t.text}"
        if not self.clause:
            words = f"{_WORDS[self.op]} {q.format(t)}"
            return f"for {q.noun} {words}" if q.noun else words
        return f"{q.text} {self.op} {q.format(t)}"

    def compares(self):
        return [] if isinstance(self.threshold, Quantity) else [(self.quantity, self.threshold)]


class Commutes(Condition):
    """The op is commutative (``want=True``) or is not."""

    def __init__(self, want):
        self.want = want

    def holds(self, facts):
        return bool(facts.commutative) == self.want

    def text(self):
        return "for commutative ops" if self.want else "for non-commutative ops"


#: The op is commutative.
commutative = Commutes(True)
#: The op is not commutative.
non_commutative = Commutes(False)


class OneNodeHost(Condition):
    """Every rank on one node, host arrays (the shm algorithms can run)."""

    def holds(self, facts):
        return bool(facts.one_node_host)

    def text(self):
        return "on one node with host arrays"


#: Every rank on one node, host arrays.
one_node_host = OneNodeHost()


class All(Condition):
    """Every part holds: its phrases, then "when" and its clauses joined by "and".

    Its text brings its own "when", so it is never a clause itself.
    """

    def __init__(self, *parts):
        self.parts = [q for p in parts for q in (p.parts if isinstance(p, All) else [p])]

    def holds(self, facts):
        return all(p.holds(facts) for p in self.parts)

    def text(self):
        phrases = [p.text() for p in self.parts if not p.clause]
        clauses = [p.text() for p in self.parts if p.clause]
        return " ".join(phrases + (["when " + " and ".join(clauses)] if clauses else []))

    def compares(self):
        return [c for p in self.parts for c in p.compares()]


class Any(Condition):
    """Some part holds: the parts joined by "or" (clauses among phrases get their "when")."""

    def __init__(self, *parts):
        self.parts = [q for p in parts for q in (p.parts if isinstance(p, Any) else [p])]
        self.clause = all(p.clause for p in self.parts)

    def holds(self, facts):
        return any(p.holds(facts) for p in self.parts)

    def text(self):
        if self.clause:           # all clauses: the rule puts one "when" in front
            return " or ".join(p.text() for p in self.parts)
        return " or ".join(("when " if p.clause else "") + p.text() for p in self.parts)

    def compares(self):
        return [c for p in self.parts for c in p.compares()]


class Rule:
    """``algorithm`` where ``when`` holds (None: always, the last rule's ``else``)."""

    def __init__(self, algorithm, when=None):
        self.algorithm, self.when = algorithm, when

    def text(self):
        """"binomial below 12 KiB", "else ring"."""
        if self.when is None:
            return f"else {self.algorithm}"
        return f"{self.algorithm} {'when ' if self.when.clause else ''}{self.when.text()}"


class Auto:
    """A primitive's ``auto`` rule: ordered :class:`Rule` entries, the last one unconditional.

    ``note``: what the description adds in parentheses (``"n: one block"``).
    """

    def __init__(self, *rules, note=""):
        if not rules or rules[-1].when is not None:
            raise ValueError("Auto: the last rule must have no condition (the else)")
        if any(r.when is None for r in rules[:-1]):
            raise ValueError("Auto: only the last rule may have no condition")
        self.rules = tuple(rules)
        self.note = note

    def choose(self, facts):
        """The algorithm of the first rule that holds for this call (a :class:`Facts`)."""
        for r in self.rules:
            if r.when is None or r.when.holds(facts):
                return r.algorithm
        raise AssertionError("unreachable: the last rule always holds")

    @property
    def algorithms(self):
        """The algorithms it can name, in rule order."""
        return tuple(dict.fromkeys(r.algorithm for r in self.rules))

    @property
    def text(self):
        """The rule in words: "binomial below 12 KiB or when N < 8, else scatter_allgather"."""
        text = (self.rules[0].algorithm if len(self.rules) == 1
                else ", ".join(r.text() for r in self.rules))
        return f"{text} ({self.note})" if self.note else text

    def compares(self):
        """Every (quantity, threshold) its conditions compare against a number."""
        return [c for r in self.rules if r.when is not None for c in r.when.compares()]

    def __repr__(self):
        return f"Auto({self.text!r})"
