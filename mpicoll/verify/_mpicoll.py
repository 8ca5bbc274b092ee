"""The one place the verifier reaches into mpicoll's private modules.

Everything else in :mod:`mpicoll.verify` imports from here, so that moving
those modules means editing this file only.
"""
from mpicoll import PRIMITIVES, algorithms
from mpicoll.calls import DEFINED
from mpicoll.calls.primitive import binder_parts
from mpicoll.core.blocks import offsets, pof2_below, split
from mpicoll.core.plugins import PluginError, import_modules
from mpicoll.core.registry import lookup, table
from mpicoll.core.topology import Layout
from mpicoll.core.views import LiveView
from mpicoll.sched import inspect as _inspect  # noqa: F401  (fills the registry)
from mpicoll.sched.plan import (  # noqa: F401
    COPY,
    IRECV,
    ISEND,
    OP_NAMES,
    RECV,
    REDUCE,
    SEND,
    SENDRECV,
    WAIT,
    Builder,
    NotSchedulable,
    Sym,
)

__all__ = ["algorithms", "PRIMITIVES", "DEFINED", "Builder", "NotSchedulable", "Sym", "lookup",
           "Layout", "import_modules", "PluginError", "split", "offsets", "pof2_below",
           "registry_table", "binder_parts", "LiveView"]


def registry_table(primitive):
    """The live ``{name: function}`` table of a primitive (mutations swap entries in it)."""
    return table(primitive)
