"""The registry: the primitives and every primitive's algorithms.

A primitive is defined once (:func:`define`, by its module in
:mod:`mpicoll.calls`), with what the engine and the tools need to know of it
without importing it (:class:`PrimitiveInfo`: how its algorithms are called,
to record plans). Each algorithm module registers its functions with
:func:`register`; :func:`algorithms` lists them and :func:`lookup` resolves a
name, answering an unknown one with the list of valid names. The registry is
the one list of primitives and algorithms: the faces, the demo, the bench
(sweep, ``fit``, ``predict``, ``tune``), the verifier and the tests read it,
so one module is all a new primitive needs, and one decorated function all a
new algorithm needs.
"""
from collections.abc import Sequence

from .env import getenv
from .errors import ArgumentError

__all__ = ["env_var", "table", "PRIMITIVES", "SEED_PRIMITIVES", "EXTENDED_PRIMITIVES",
           "PrimitiveInfo", "define", "info", "register", "algorithms", "lookup", "env_choice",
           "env_key", "algorithm_pairs"]

#: The seed's nine primitives, in its order.
SEED_PRIMITIVES = ("bcast", "reduce", "allreduce", "gather", "allgather",
                   "scatter", "reduce_scatter", "alltoall", "barrier")


class PrimitiveInfo:
    """What the registry keeps of a primitive: its name, ``call_arrays`` and ``auto`` rule.

    ``call_arrays(size, rank, count, root, counts, op)`` gives the arguments its algorithms
    get on one rank with arrays as lengths (:class:`mpicoll.sched.inspect.Len`), for
    recording plans without a communicator. ``auto``: the rule ``algorithm="auto"``
    follows where the tuning table does not decide (:class:`mpicoll.core.rules.Auto`, or
    None: :func:`mpicoll.core.defaults.default_algorithm`'s fallback).
    """

    __slots__ = ("name", "call_arrays", "reduces", "auto")

    def __init__(self, name, call_arrays, reduces, auto=None):
        self.name, self.call_arrays, self.reduces, self.auto = name, call_arrays, reduces, auto


_DEFINED = {}            # name -> PrimitiveInfo, in definition order
_REGISTRY = {}           # name -> {algorithm name: function}


class _Live(Sequence):
    """A tuple-like view of the defined primitives that follows the registry.

    A primitive defined later, by a plug-in, appears in it.
    """

    def __init__(self, which):
        self._which = which

    def _now(self):
        return tuple(p for p in _DEFINED if self._which(p))

    def __getitem__(self, i):
        return self._now()[i]

    def __len__(self):
        return len(self._now())

    def __contains__(self, p):
        return p in _DEFINED and self._which(p)

    def __iter__(self):
        return iter(self._now())

    def __add__(self, other):
        return self._now() + tuple(other)

    def __radd__(self, other):
        return tuple(other) + self._now()

    def __eq__(self, other):
        if isinstance(other, (tuple, list, _Live)):
            return self._now() == tuple(other)
        return NotImplemented

    def __hash__(self):
        return hash(self._now())

    def __repr__(self):
        return repr(self._now())


#: The primitives, in definition order: the seed's, then the vector variants and the prefix
#: reductions, then any defined by a plug-in.
PRIMITIVES = _Live(lambda p: True)

#: The primitives beyond the seed's nine. Consumers written for the seed's (the demo's
#: walkthrough, the device matrix) leave these out.
EXTENDED_PRIMITIVES = _Live(lambda p: p not in SEED_PRIMITIVES)


def define(name, call_arrays, *, reduces=False, auto=None):
    """Define primitive ``name`` (once); see :class:`PrimitiveInfo`; ``reduces``: takes an op."""
    if name in _DEFINED:
        raise ArgumentError(f"define: primitive {name!r} is already defined")
    _DEFINED[name] = PrimitiveInfo(name, call_arrays, reduces, auto)
    _REGISTRY.setdefault(name, {})
    return _DEFINED[name]


def info(primitive):
    """The :class:`PrimitiveInfo` of a defined primitive."""
    _check_primitive(primitive)
    return _DEFINED[primitive]


def register(primitive, name, *, commutative_only=False, cost=None, textbook=None):
    """Register ``fn`` as algorithm ``name`` of ``primitive``.

    ``commutative_only`` marks reductions that combine contributions out of
    rank order; they are refused for non-commutative ops. ``cost``: the
    algorithm's :class:`mpicoll.coll.cost.Cost`, its docstring's ``Cost:``
    formula as functions (the bench's model and ``python -m mpicoll.verify``
    read it; None: no formula, the bench prices the recorded plans). ``textbook``: its
    textbook traffic claim (:class:`mpicoll.coll.textbook.Textbook`, the demo's
    independent check; None: the demo shows "—"). A name already
    registered for ``primitive`` raises :class:`ArgumentError`: replacing it
    silently would make every caller run another algorithm under that name.
    """
    def decorate(fn):
        # Algorithms may come before their primitive's definition (coll/ is below calls/).
        table = _REGISTRY.setdefault(primitive, {})
        old = table.get(name)
        if old is not None:
            where = f"{getattr(old, '__module__', '?')}.{getattr(old, '__qualname__', '?')}"
            raise ArgumentError(
                f"register: {primitive} algorithm {name!r} is already registered (by {where}); "
                f"choose another name")
        fn.primitive = primitive
        fn.algorithm = name
        fn.commutative_only = commutative_only
        fn.cost = cost
        fn.textbook = textbook
        if textbook is not None:
            textbook.primitive, textbook.algorithm = primitive, name
        table[name] = fn
        return fn
    return decorate


def table(primitive):
    """The live ``{name: function}`` table of ``primitive``'s algorithms.

    For tools that put a copy of an algorithm in its place for a while (the
    verifier's mutations).
    """
    _check_primitive(primitive)
    return _REGISTRY[primitive]


def _check_primitive(primitive):
    if primitive not in _DEFINED:
        raise ArgumentError(
            f"primitive: expected one of {', '.join(PRIMITIVES)}; got {primitive!r}")


def algorithms(primitive):
    """Names of the algorithms registered for ``primitive`` (``native`` included)."""
    _check_primitive(primitive)
    return tuple(_REGISTRY[primitive])


_VARIANTS = {}


def _options(primitive, name, text):
    """``"inter=ring,intra=binomial"`` as a dict (names and values must be non-empty)."""
    opts = {}
    for item in text.split(","):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key or not value or key in opts:
            raise ArgumentError(
                f"algorithm: {primitive} algorithm {name!r}: expected options as "
                f"'key=value,key=value' after ':'; got {text!r}")
        opts[key] = value
    return opts


def lookup(primitive, name):
    """The function registered as ``name`` for ``primitive``.

    ``"name:key=value,..."`` selects a configured variant of an algorithm that
    takes options (its ``configure(name, options)`` builds it, e.g.
    ``"hierarchical:inter=ring,intra=binomial"``); variants are made once and
    kept, so plan caches see one function per configuration.
    """
    _check_primitive(primitive)
    table = _REGISTRY[primitive]
    base, colon, text = name.partition(":")
    if base not in table:
        valid = ", ".join(sorted(table))
        raise ArgumentError(
            f"algorithm: {primitive} has no algorithm {name!r}; valid: {valid}")
    fn = table[base]
    if not colon:
        return fn
    key = (primitive, name)
    variant = _VARIANTS.get(key)
    if variant is None:
        configure = getattr(fn, "configure", None)
        if configure is None:
            raise ArgumentError(
                f"algorithm: {primitive} algorithm {base!r} takes no options; got {name!r}")
        variant = _VARIANTS[key] = configure(name, _options(primitive, name, text))
    return variant


def env_choice(primitive):
    """The algorithm the environment names for ``primitive``, or None.

    ``MPICOLL_<PRIMITIVE>_ALGORITHM``, else its entry in ``MPICOLL_ALGORITHM``
    (``allreduce=ring,bcast=binomial``).
    """
    var = _var(primitive)
    value = getenv(var, "").strip()
    if not value:
        var, value = "MPICOLL_ALGORITHM", _from_list(primitive)
        if not value:
            return None
    if value != "auto":
        try:
            lookup(primitive, value)
        except ArgumentError as exc:
            why = str(exc).removeprefix("algorithm: ")
            raise ArgumentError(f"{var}: {why} (or auto)") from None
    return value


def env_key(primitive):
    """What :func:`env_choice` reads for ``primitive``, as a value that changes when it does.

    The memo's entries hold while it is the same.
    """
    return getenv(_var(primitive)), getenv("MPICOLL_ALGORITHM")


_vars = {}


def env_var(primitive):
    """The name of ``primitive``'s own algorithm variable, ``MPICOLL_<PRIMITIVE>_ALGORITHM``."""
    return _var(primitive)


def _var(primitive):
    var = _vars.get(primitive)
    if var is None:
        var = _vars[primitive] = f"MPICOLL_{primitive.upper()}_ALGORITHM"
    return var


def algorithm_pairs(text, where):
    """``"allreduce=ring,bcast=binomial"`` as [(primitive, algorithm), ...], names unchecked.

    Empty items are skipped; an item without ``=`` or with an empty side raises
    :class:`ArgumentError` naming ``where`` (the variable or argument read).
    """
    pairs = []
    for part in str(text).split(","):
        key, eq, value = (x.strip() for x in part.partition("="))
        if not part.strip():
            continue
        if not eq or not key or not value:
            raise ArgumentError(f"{where}: expected 'primitive=algorithm,...' (e.g. "
                                f"allreduce=ring,bcast=binomial); got {text!r}")
        pairs.append((key, value))
    return pairs


def _from_list(primitive):
    found = None
    for key, value in algorithm_pairs(getenv("MPICOLL_ALGORITHM", ""), "MPICOLL_ALGORITHM"):
        if key not in _DEFINED:
            raise ArgumentError(f"MPICOLL_ALGORITHM: {key!r} is not a primitive; expected "
                                f"names among {', '.join(PRIMITIVES)}")
        if key == primitive:
            found = value
    return found
