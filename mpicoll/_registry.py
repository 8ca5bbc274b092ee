"""The algorithm registry: every primitive's algorithms, filled by a decorator.

Each algorithm module registers its functions with :func:`register`;
:func:`algorithms` lists them and :func:`lookup` resolves a name, answering an
unknown one with the list of valid names. The registry is the one list of
algorithms: the demo, the bench (sweep, ``fit``, ``predict``, ``tune``) and
the tests read it, so one decorated function is all a new algorithm needs.
"""
import os

from ._errors import ArgumentError

__all__ = ["PRIMITIVES", "EXTENDED_PRIMITIVES", "register", "algorithms", "lookup", "env_choice"]

#: The primitives: the seed's, in its order, then the vector variants and the prefix
#: reductions (issue #11).
PRIMITIVES = ("bcast", "reduce", "allreduce", "gather", "allgather",
              "scatter", "reduce_scatter", "alltoall", "barrier",
              "gatherv", "scatterv", "allgatherv", "alltoallv", "scan", "exscan")

#: The primitives added after the seed's nine. Consumers that cannot run them yet
#: (the demo's sections, the device matrix) leave these out by name.
EXTENDED_PRIMITIVES = PRIMITIVES[9:]

_REGISTRY = {p: {} for p in PRIMITIVES}


def register(primitive, name, *, commutative_only=False, cost=None):
    """Register ``fn`` as algorithm ``name`` of ``primitive``.

    ``commutative_only`` marks reductions that combine contributions out of
    rank order; they are refused for non-commutative ops. ``cost``: the
    algorithm's :class:`mpicoll.coll.cost.Cost`, its docstring's ``Cost:``
    formula as functions (the bench's model and ``python -m mpicoll.verify``
    read it; None: no formula, the bench prices the recorded plans). A name already
    registered for ``primitive`` raises :class:`ArgumentError`: replacing it
    silently would make every caller run another algorithm under that name.
    """
    if primitive not in _REGISTRY:
        raise KeyError(primitive)

    def decorate(fn):
        old = _REGISTRY[primitive].get(name)
        if old is not None:
            where = f"{getattr(old, '__module__', '?')}.{getattr(old, '__qualname__', '?')}"
            raise ArgumentError(
                f"register: {primitive} algorithm {name!r} is already registered (by {where}); "
                f"choose another name")
        fn.primitive = primitive
        fn.algorithm = name
        fn.commutative_only = commutative_only
        fn.cost = cost
        _REGISTRY[primitive][name] = fn
        return fn
    return decorate


def _check_primitive(primitive):
    if primitive not in _REGISTRY:
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
    """The algorithm named by ``MPICOLL_<PRIMITIVE>_ALGORITHM``, or None."""
    var = f"MPICOLL_{primitive.upper()}_ALGORITHM"
    value = os.environ.get(var, "").strip()
    if not value:
        return None
    if value != "auto":
        try:
            lookup(primitive, value)
        except ArgumentError as exc:
            why = str(exc).removeprefix("algorithm: ")
            raise ArgumentError(f"{var}: {why} (or auto)") from None
    return value
