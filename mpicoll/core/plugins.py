"""Plug-in modules: import a module or a ``.py`` file before a command runs.

The demo and the bench take ``--import MODULE`` (repeatable): the module's
``@register`` decorators add its algorithms to the registry, and from then
on the command lists, runs and checks them like the built-in ones.
"""
import importlib
import importlib.util
import os
import sys

__all__ = ["import_modules", "PluginError"]


class PluginError(ValueError):
    """A plug-in that cannot be found (a usage error, the same on every rank)."""


def _module_name(path):
    # A name of its own per file, so that two plug-ins called alike do not clash
    # and an algorithm module imported twice is not registered twice.
    return "mpicoll_plugin_" + os.path.splitext(os.path.basename(path))[0]


def import_modules(specs, flag="--import"):
    """Import each spec: a dotted module name, or a path to a ``.py`` file.

    A missing file or module raises :class:`PluginError` naming ``flag``;
    errors raised while the module runs propagate unchanged.
    """
    for spec in specs:
        if spec.endswith(".py") or os.sep in spec:
            path = os.path.abspath(spec)
            name = _module_name(path)
            if name in sys.modules:
                continue
            loader = importlib.util.spec_from_file_location(name, path)
            if loader is None or not os.path.isfile(path):
                raise PluginError(f"{flag}: cannot load {spec} (no such file)")
            mod = importlib.util.module_from_spec(loader)
            sys.modules[name] = mod
            try:
                loader.loader.exec_module(mod)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            try:
                importlib.import_module(spec)
            except ModuleNotFoundError as exc:
                if exc.name != spec and not spec.startswith(f"{exc.name}."):
                    raise          # the module exists; something it imports does not
                raise PluginError(f"{flag}: no module named {spec!r}") from None
