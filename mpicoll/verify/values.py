"""Symbolic element values: what each element of each buffer holds, one int64 apiece.

Every element of every buffer of every rank carries a value that says where
it came from, and a buffer is a NumPy ``int64`` vector of them, so that a
message, a copy or a reduction of k elements is one or two vector operations
whatever k is. Three encodings, chosen per case:

:class:`Ordered` — exact, for data movement and non-commutative ops. A value
is ``(e, lo, hi)``: element ``e`` of the inputs of ranks ``lo .. hi-1``
combined in rank order. Rank r's input element e is ``(e, r, r+1)``; a
reduction ``lower (op) higher`` is valid only when both hold the same element
and ``lower.hi == higher.lo`` (adjacent ranges, lower ranks first), and gives
``(e, lower.lo, higher.hi)``. Associativity is the only property of the op
it uses.

:class:`Bits` — exact, for commutative ops on up to 32 ranks. A value is
``(e, S)``: element ``e`` of the ranks in the set ``S`` (a bit mask); a
reduction needs the same element and disjoint sets (no contribution counted
twice) and gives the union.

:class:`Fingerprint` — for commutative ops on more than 32 ranks. A value is
``Σ h(r, e) mod 2^64`` over its contributions, ``h`` a seeded 64-bit mix of
rank and element: a reduction adds, and a result equals the specification's
sum only if it combines exactly the right multiset of (rank, element) pairs,
up to a collision of probability about 2^-64 per element. Nothing is checked
at the reduction itself (a failure shows in the result); the exact encodings
locate it when the case is re-run at a size they cover.

Negative values (Ordered, Bits) and two reserved words (Fingerprint) mark an
element that was never written (scratch) and a receive buffer's original
content (which must survive where the specification leaves it alone).
"""
import numpy as np

__all__ = ["Ordered", "Bits", "Fingerprint", "mode_for"]

UNDEF = -1


def _orig(idx):
    return -2 - np.asarray(idx, dtype=np.int64)


class _Exact:
    """What the exact encodings share: prefixes from :meth:`reduction`, UNDEF, originals."""

    exact = True

    def prefixes(self, nranks, idx):
        """reduction(0, r+1, idx) for r = 0 .. nranks-1."""
        for r in range(nranks):
            yield self.reduction(0, r + 1, idx)

    def undef(self, n):
        """``n`` values marking elements never written."""
        return np.full(n, UNDEF, dtype=np.int64)

    def orig(self, n):
        """The values of a receive buffer's ``n`` original elements."""
        return _orig(np.arange(n))

    def describe(self, v):
        """The value ``v`` in words, for failure messages."""
        v = int(v)
        if v == UNDEF:
            return "undefined (never written)"
        if v < 0:
            return f"the buffer's original element {-2 - v}"
        return self._describe(v)


class Ordered(_Exact):
    """``(e, lo, hi)`` packed as ``e << 2b | lo << b | hi`` (exact, order-preserving)."""

    name = "ordered"

    def __init__(self, nranks):
        self.b = max(12, int(nranks).bit_length() + 1)
        self.m = (1 << self.b) - 1

    def inp(self, rank, idx):
        """The values of rank ``rank``'s input elements ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        return (idx << (2 * self.b)) | ((rank << self.b) | (rank + 1))

    def reduction(self, lo, hi, idx):
        """The values of elements ``idx`` reduced over ranks ``lo .. hi-1``."""
        idx = np.asarray(idx, dtype=np.int64)
        return (idx << (2 * self.b)) | ((lo << self.b) | hi)

    def combine(self, lower, higher):
        """``(result, i)``: ``i`` is the first element whose operands do not combine, or -1."""
        b = self.b
        want = ((lower >> (2 * b)) << b) | (lower & self.m)     # (e, lower.hi)
        ok = (want == (higher >> b)) & ((lower | higher) >= 0)
        if not ok.all():
            return None, int(np.argmin(ok))
        return (lower & ~self.m) | (higher & self.m), -1

    def _describe(self, v):
        """A contribution ``v`` (neither UNDEF nor an original element) in words."""
        e, lo, hi = v >> (2 * self.b), (v >> self.b) & self.m, v & self.m
        if hi == lo + 1:
            return f"element {e} of rank {lo}"
        return f"element {e} of ranks {lo}..{hi - 1} combined in rank order"


class Bits(_Exact):
    """``(e, S)`` packed as ``e << 32 | S`` for up to 32 ranks (exact, any order)."""

    name = "bits"
    MAX = 32

    def __init__(self, nranks):
        if nranks > self.MAX:
            raise ValueError(f"Bits: at most {self.MAX} ranks; got {nranks}")

    def inp(self, rank, idx):
        """The values of rank ``rank``'s input elements ``idx``."""
        return (np.asarray(idx, dtype=np.int64) << 32) | (1 << rank)

    def reduction(self, lo, hi, idx):
        """The values of elements ``idx`` reduced over ranks ``lo .. hi-1``."""
        mask = ((1 << hi) - 1) ^ ((1 << lo) - 1)
        return (np.asarray(idx, dtype=np.int64) << 32) | mask

    def combine(self, lower, higher):
        """``(result, i)``: ``i`` is the first element whose operands do not combine, or -1."""
        ok = ((lower >> 32) == (higher >> 32)) & ((lower & higher & 0xFFFFFFFF) == 0) \
            & ((lower | higher) >= 0)
        if not ok.all():
            return None, int(np.argmin(ok))
        return lower | higher, -1

    def _describe(self, v):
        """A contribution ``v`` (neither UNDEF nor an original element) in words."""
        ranks = [r for r in range(32) if v >> r & 1]
        return f"element {v >> 32} of ranks {{{', '.join(map(str, ranks))}}}"


def _mix(x):
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


class Fingerprint:
    """``Σ h(rank, e) mod 2^64`` (any number of ranks; equality up to 64-bit collisions)."""

    name = "fingerprint"
    exact = False

    def __init__(self, nranks, seed=0):
        self.salt = np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % (1 << 64))
        # Keys: rank r's element e is (r + 1) << 32 | e (r < 2^29, e < 2^32); the
        # reserved words live above bit 61, where no such key reaches.
        self.undef_word = int(self._h(np.array([1 << 62]))[0])

    def _h(self, keys):
        return _mix(np.asarray(keys, dtype=np.int64).view(np.uint64) ^ self.salt).view(np.int64)

    def inp(self, rank, idx):
        """The values of rank ``rank``'s input elements ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        return self._h((np.int64(rank + 1) << 32) | idx)

    def reduction(self, lo, hi, idx):
        """The values of elements ``idx`` reduced over ranks ``lo .. hi-1``."""
        # (integer arrays wrap silently: the sum is taken mod 2^64)
        acc = np.zeros(len(idx), dtype=np.int64)
        for r in range(lo, hi):
            acc += self.inp(r, idx)
        return acc

    def prefixes(self, nranks, idx):
        """reduction(0, r+1, idx) for r = 0 .. nranks-1."""
        acc = np.zeros(len(idx), dtype=np.int64)
        for r in range(nranks):
            acc = acc + self.inp(r, idx)
            yield acc

    def undef(self, n):
        """``n`` values marking elements never written."""
        return np.full(n, self.undef_word, dtype=np.int64)

    def orig(self, n):
        """The values of a receive buffer's ``n`` original elements."""
        return self._h(np.int64(1 << 61) + np.arange(n, dtype=np.int64))

    def combine(self, lower, higher):
        """``(lower + higher, -1)``: fingerprints add, and nothing is checked here."""
        # An undefined operand is not looked for here (it would cost two passes over
        # every reduction): it makes the result differ from the specification.
        return lower + higher, -1

    def describe(self, v):
        """The value ``v`` in words, for failure messages."""
        if int(v) == self.undef_word:
            return "undefined (never written)"
        return f"fingerprint {int(v) & 0xFFFFFFFFFFFFFFFF:016x}"


def mode_for(nranks, op, seed=0):
    """The encoding of a case: ``op`` None (no reduction), "noncomm", or a commutative op."""
    if op is None or op == "noncomm":
        return Ordered(nranks)
    if nranks <= Bits.MAX:
        return Bits(nranks)
    return Fingerprint(nranks, seed)
