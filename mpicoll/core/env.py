"""Reading the ``MPICOLL_*`` settings on every call, cheaply.

Settings such as ``MPICOLL_CHECK`` or ``MPICOLL_<PRIMITIVE>_ALGORITHM`` are read
when a call is made (a change takes effect at the next call), so the read is
on the path of every small collective. ``os.environ.get`` encodes the key and
goes through the ``Mapping`` machinery (~0.3 µs); :func:`getenv` looks the
already encoded key up in the process's own table of the environment, which
``os.environ`` keeps in step with every change made through it.
"""
import os

__all__ = ["getenv"]

_data = getattr(os.environ, "_data", None)
_keys = {}


def getenv(name, default=None):
    """``os.environ.get(name, default)``, without the encoding on every call."""
    if _data is None:                      # (a platform without the table: the plain way)
        return os.environ.get(name, default)
    key = _keys.get(name)
    if key is None:
        key = _keys[name] = os.environ.encodekey(name)
    value = _data.get(key)
    if value is None:
        return default
    return os.environ.decodevalue(value)
