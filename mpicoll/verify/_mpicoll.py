"""The one place the verifier reaches into mpicoll's private modules.

Everything else in :mod:`mpicoll.verify` imports from here, so that moving
those modules means editing this file only.
"""
from mpicoll import algorithms, PRIMITIVES  # noqa: F401  (public)
from mpicoll.sched.plan import Builder, NotSchedulable, Sym  # noqa: F401
from mpicoll.sched.plan import (SEND, RECV, SENDRECV, ISEND, IRECV, WAIT, COPY,  # noqa: F401
                                REDUCE, OP_NAMES)
from mpicoll.sched import inspect as _inspect  # noqa: F401  (fills the registry)
from mpicoll.core.registry import lookup, _REGISTRY  # noqa: F401
from mpicoll.core.topology import Layout  # noqa: F401
from mpicoll.core.plugins import import_modules, PluginError  # noqa: F401
from mpicoll.core.blocks import split, offsets, pof2_below  # noqa: F401

__all__ = ["algorithms", "PRIMITIVES", "Builder", "NotSchedulable", "Sym", "lookup", "Layout",
           "import_modules", "PluginError", "split", "offsets", "pof2_below", "registry_table"]


def registry_table(primitive):
    """The live ``{name: function}`` table of a primitive (mutations swap entries in it)."""
    return _REGISTRY[primitive]
