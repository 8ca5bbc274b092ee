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


def register(primitive, name, *, commutative_only=False):
    """Register ``fn`` as algorithm ``name`` of ``primitive``.

    ``commutative_only`` marks reductions that combine contributions out of
    rank order; they are refused for non-commutative ops. A name already
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


def lookup(primitive, name):
    """The function registered as ``name`` for ``primitive``."""
    _check_primitive(primitive)
    table = _REGISTRY[primitive]
    if name not in table:
        valid = ", ".join(sorted(table))
        raise ArgumentError(
            f"algorithm: {primitive} has no algorithm {name!r}; valid: {valid}")
    return table[name]


def env_choice(primitive):
    """The algorithm named by ``MPICOLL_<PRIMITIVE>_ALGORITHM``, or None."""
    var = f"MPICOLL_{primitive.upper()}_ALGORITHM"
    value = os.environ.get(var, "").strip()
    if not value:
        return None
    if value not in _REGISTRY[primitive] and value != "auto":
        valid = ", ".join(sorted(_REGISTRY[primitive]))
        raise ArgumentError(
            f"{var}: {primitive} has no algorithm {value!r}; valid: {valid} (or auto)")
    return value
