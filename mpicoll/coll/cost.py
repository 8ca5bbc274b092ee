"""Machine-readable costs: each algorithm's ``Cost:`` line as functions, declared with it.

An algorithm registers its cost beside itself::

    @register("bcast", "binomial", cost=Cost("⌈log2 N⌉(α + nβ)",
                                              alpha=lambda k: lg(k.N),
                                              beta=lambda k: lg(k.N) * k.n))

``text`` is the formula exactly as the docstring's ``Cost:`` paragraph
writes it (tests/test_verify.py checks that it is there and that it means
the same as the functions); the functions take a :class:`Call` ``k``:

- ``alpha``, ``beta``, ``gamma``: the α-β-γ time of the call on the Hockney
  model — messages on the critical path, elements sent along it, elements
  reduced along it (β and γ per element; n is counted in elements here).
  The verifier (:mod:`mpicoll.verify`) measures the same three terms on the
  algorithm's recorded plans (every rank sends one message at a time and
  receives one at a time, a sendrecv's halves overlap) and compares.
- ``msgs``, ``elems``, ``reduced``: the busiest rank's counted traffic —
  the most messages one rank sends or receives (a sendrecv counting once),
  the most elements one rank moves (a sendrecv: its larger half), the most
  elements one rank reduces, each a maximum over the ranks. They default to
  ``alpha``, ``beta``, ``gamma``: for all but the chains (a pipeline, a
  linear scan) the busiest rank's load is the critical path. ``load_exact``
  (like ``exact``) says where the load is not declared although the time is.
- ``exact``: ``k -> None`` where the functions are exact, else the reason
  they are not (uneven chunks, a non-power-of-two N, ...); the verifier
  checks the cost only where it is exact, and says why elsewhere.
- ``where``: the text's other symbols (``S`` segments, ``B`` blocks, ...)
  as functions of ``k``, so that the text can be read as a formula.
- ``links``: the formula's two-level split, ``(N, K, n) ->``
  :class:`~mpicoll.coll.links.Split` — which of its busiest rank's messages
  cross nodes when N ranks sit in blocks of K per node, n bytes in the
  primitive's unit (:mod:`mpicoll.coll.links`). The bench's two-level model
  (``predict --ranks-per-node``) prices an algorithm from its formula only
  where it has one; None (the default): priced another way
  (:mod:`mpicoll.bench.model`).

The bench's cost model (:mod:`mpicoll.bench.formula_prices`) prices an algorithm
from these declarations, so a formula exists once, here, beside the code it
describes.
"""
from math import ceil

__all__ = ["Cost", "Phases", "Call", "lg", "flg", "pof2", "even", "pow2", "segments"]


def lg(x):
    """⌈log2 x⌉ (0 for x <= 1)."""
    return (int(x) - 1).bit_length() if x > 1 else 0


def flg(x):
    """⌊log2 x⌋ (x >= 1)."""
    return int(x).bit_length() - 1


def pof2(x):
    """2^⌊log2 x⌋: the largest power of two <= x (x >= 1)."""
    return 1 << (int(x).bit_length() - 1)


class Call:
    """What a cost may depend on: one call's shape.

    ``N`` ranks; ``n`` elements in the primitive's unit (the vector for bcast,
    reduce, allreduce, scan, exscan; one rank's block for gather, allgather,
    scatter, alltoall; the whole vector for reduce_scatter; the block count
    pattern's base for the v-collectives); ``counts`` the per-rank counts of
    reduce_scatter and the v-collectives (alltoallv: ``counts[i][j]`` is what
    rank i sends to rank j); ``root``; ``itemsize`` bytes per element;
    ``commutative`` (the op); ``layout`` (a node :class:`~mpicoll.core.topology.Layout`,
    None for one node) and ``options`` (a configured variant's, e.g. ``inter``).
    """

    __slots__ = ("N", "n", "root", "itemsize", "counts", "commutative", "layout", "options")

    def __init__(self, N, n, root=0, itemsize=1, counts=None, commutative=True, layout=None,
                 options=None):
        self.N, self.n, self.root, self.itemsize = N, n, root, itemsize
        self.counts, self.commutative, self.layout = counts, commutative, layout
        self.options = options or {}

    # the notation of the docstrings
    @property
    def p(self):
        """2^⌊log2 N⌋."""
        return pof2(self.N)

    @property
    def fold(self):
        """1 when N is not a power of two (the first 2(N - p) ranks fold pairwise)."""
        return 0 if self.N == pof2(self.N) else 1

    @property
    def m(self):
        """Σ counts."""
        return sum(self.counts)

    @property
    def nbytes(self):
        """The bytes of ``n`` elements (``n × itemsize``)."""
        return self.n * self.itemsize

    def replace(self, **kw):
        """A copy of this call with the attributes in ``kw`` replaced."""
        new = Call(self.N, self.n, self.root, self.itemsize, self.counts, self.commutative,
                   self.layout, self.options)
        for key, v in kw.items():
            setattr(new, key, v)
        return new

    def __repr__(self):
        extra = f", counts={self.counts}" if self.counts is not None else ""
        return f"Call(N={self.N}, n={self.n}, root={self.root}, itemsize={self.itemsize}{extra})"


def _fn(v):
    if callable(v):
        return v
    return lambda k, _v=v: _v


def even(k):
    """``exact`` for chunked algorithms: N divides n."""
    return None if k.n % k.N == 0 else f"uneven chunks ({k.n} elements in {k.N})"


def pow2(k):
    """``exact`` for algorithms whose formula holds at powers of two."""
    return None if k.N == pof2(k.N) else f"N = {k.N} is not a power of two"


class Cost:
    """An algorithm's declared cost (see the module doc)."""

    __slots__ = ("text", "alpha", "beta", "gamma", "msgs", "elems", "reduced", "exact",
                 "load_exact", "where", "links")

    def __init__(self, text, alpha, beta=0, gamma=0, *, msgs=None, elems=None, reduced=None,
                 exact=None, load_exact=None, where=None, links=None):
        self.text = text
        #: the text's symbols beyond N, n, p, m: name -> function of the Call
        self.where = dict(where or {})
        self.alpha, self.beta, self.gamma = _fn(alpha), _fn(beta), _fn(gamma)
        self.msgs = self.alpha if msgs is None else _fn(msgs)
        self.elems = self.beta if elems is None else _fn(elems)
        self.reduced = self.gamma if reduced is None else _fn(reduced)
        self.exact = exact
        self.load_exact = load_exact
        #: ``(N, K, n) -> Split``: the two-level split (:mod:`mpicoll.coll.links`), or None
        self.links = links

    def terms(self, k):
        """(α, β, γ) coefficients: critical-path messages, elements, elements reduced."""
        return self.alpha(k), self.beta(k), self.gamma(k)

    def load(self, k):
        """The busiest rank's (messages, elements moved, elements reduced)."""
        return self.msgs(k), self.elems(k), self.reduced(k)

    def why_inexact(self, k):
        """None where the functions are exact for ``k``, else why not."""
        return None if self.exact is None else self.exact(k)

    def why_load_inexact(self, k):
        """None where the busiest rank's load is exact too (given :meth:`why_inexact` is None)."""
        return None if self.load_exact is None else self.load_exact(k)

    def time(self, k, alpha, beta, gamma):
        """Seconds: α·steps + β·bytes + γ·bytes reduced along the critical path."""
        a, b, g = self.terms(k)
        return a * alpha + b * k.itemsize * beta + g * k.itemsize * gamma


class Phases(Cost):
    """The cost of an algorithm that runs other algorithms one after another.

    ``phases(k)`` returns ``([(cost, call), ...], why)``: the declared costs of
    the algorithms it runs and the call each runs (on its group of ranks),
    and why they do not simply add up for ``k`` (None where they do: every
    group alike, so that the phases' critical paths and busiest ranks line
    up). Its ``text`` names the phases; their formulas are their own.
    """

    __slots__ = ("phases",)

    def __init__(self, text, phases):
        super().__init__(text, alpha=lambda k: self._sum(k, 0), beta=lambda k: self._sum(k, 1),
                         gamma=lambda k: self._sum(k, 2), msgs=lambda k: self._sum(k, 3),
                         elems=lambda k: self._sum(k, 4), reduced=lambda k: self._sum(k, 5),
                         exact=self._why, load_exact=self._why_load)
        self.phases = phases

    def _sum(self, k, i):
        total = 0
        for cost, call in self.phases(k)[0]:
            total += (cost.terms(call) + cost.load(call))[i]
        return total

    def _why(self, k):
        parts, why = self.phases(k)
        if why:
            return why
        for cost, call in parts:
            if cost is None:
                return "a phase without a declared cost"
            w = cost.why_inexact(call)
            if w:
                return f"a phase on {call.N} ranks: {w}"
        return None

    def _why_load(self, k):
        for cost, call in self.phases(k)[0]:
            w = cost.why_load_inexact(call)
            if w:
                return f"a phase on {call.N} ranks: {w}"
        return None


def segments(nbytes, segment):
    """S = ⌈nbytes / segment⌉, at least 1."""
    return max(1, ceil(nbytes / segment))
