"""API reference helpers: function lists read from the registry, readable signatures.

``.. mpicoll-functions::`` documents every function :mod:`mpicoll.api` generates
(for each primitive, in definition order: its blocking function, ``i...`` and
``..._init``), so a new primitive appears in the reference without editing it.

``.. mpicoll-methods::`` does the same for :class:`mpicoll.P2PComm`'s generated
methods.

``.. mpicoll-torch::`` documents :mod:`mpicoll.torch` where torch can be imported;
elsewhere it shows the module's docstring, read from its source without importing it,
and a note saying that the members are listed in builds with torch.

Signatures: defaults that are mpi4py objects (``MPI.SUM``, ``MPI.IN_PLACE``, ...)
are shown by their names instead of ``<mpi4py.MPI.Op object at 0x...>``.
"""
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

__all__ = ["setup"]

_names = None


def _mpi_names():
    """Id -> ``MPI.NAME`` for mpi4py's predefined handles."""
    global _names
    if _names is None:
        from mpi4py import MPI
        kinds = (MPI.Op, MPI.Datatype, MPI.Comm, type(MPI.IN_PLACE), type(MPI.BOTTOM))
        _names = {}
        for k, v in vars(MPI).items():
            if isinstance(v, kinds) and not k.startswith("_"):
                _names.setdefault(id(v), f"MPI.{k}")
    return _names


class _Shown:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _signature(app, what, name, obj, options, signature, return_annotation):
    if signature is None or "<mpi4py." not in signature:
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    names = _mpi_names()
    params = []
    for p in sig.parameters.values():
        if what in ("method", "class") and p.name == "self":
            continue
        if p.default is not p.empty and id(p.default) in names:
            p = p.replace(default=_Shown(names[id(p.default)]))
        params.append(p)
    shown = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return str(shown), return_annotation


def _parse(directive, text):
    node = nodes.section() if "\n===" in text or "\n---" in text else nodes.container()
    node.document = directive.state.document
    nested_parse_with_titles(directive.state, StringList(text.splitlines(), "<apiref>"), node)
    return node.children


class Functions(SphinxDirective):
    """Every generated function of the functional API, primitive by primitive."""

    def run(self):
        from mpicoll.calls import DEFINED
        lines = []
        for prim in DEFINED.values():
            lines += [f".. rubric:: {prim.name}", ""]
            for binder in prim.api:
                for name in (binder.__name__, "i" + binder.__name__, binder.__name__ + "_init"):
                    lines += [f".. autofunction:: mpicoll.{name}", ""]
        return _parse(self, "\n".join(lines))


class Methods(SphinxDirective):
    """P2PComm's generated collective methods, primitive by primitive."""

    def run(self):
        from mpicoll import P2PComm
        from mpicoll.calls import DEFINED
        lines = []
        for prim in DEFINED.values():
            names = []
            for method in prim.methods:
                base = method.__name__
                names += [n for n in (base, "I" + base[0].lower() + base[1:], base + "_init")
                          if n in vars(P2PComm)]
            if names:
                lines += [f".. rubric:: {prim.name}", ""]
                lines += [f".. automethod:: mpicoll.P2PComm.{n}\n" for n in names]
        return _parse(self, "\n".join(lines))


class Torch(SphinxDirective):
    """mpicoll.torch's reference, or its docstring alone where torch is missing."""

    def run(self):
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
        if have_torch:
            # The process group's methods are torch's, documented by torch: its class alone here.
            return _parse(self, ".. automodule:: mpicoll.torch\n   :members:\n"
                                "   :exclude-members: ProcessGroupMpicoll\n\n"
                                ".. autoclass:: mpicoll.torch.ProcessGroupMpicoll\n")
        import ast
        import os

        import mpicoll
        path = os.path.join(os.path.dirname(mpicoll.__file__), "torch", "__init__.py")
        self.env.note_dependency(path)
        with open(path, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        note = (".. note::\n\n   torch is not installed where this page was built, so only the "
                "module's docstring is shown; a build with torch (``pip install torch==2.13.0``, "
                "as in CI) lists every member.\n\n")
        return _parse(self, note + doc + "\n")


def setup(app):
    """Register the API reference's directives with Sphinx."""
    app.connect("autodoc-process-signature", _signature)
    app.add_directive("mpicoll-functions", Functions)
    app.add_directive("mpicoll-methods", Methods)
    app.add_directive("mpicoll-torch", Torch)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
