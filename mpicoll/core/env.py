"""Reading the ``MPICOLL_*`` settings on every call, cheaply.

Settings such as ``MPICOLL_CHECK`` or ``MPICOLL_<PRIMITIVE>_ALGORITHM`` are read
when a call is made (a change takes effect at the next call), so the read is
on the path of every small collective. ``os.environ.get`` encodes the key and
goes through the ``Mapping`` machinery (~0.3 µs); :func:`getenv` looks the
already encoded key up in the process's own table of the environment, which
``os.environ`` keeps in step with every change made through it.
"""
import os
from functools import partial

__all__ = ["getenv", "raw_reader"]

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


def raw_reader(name):
    """A zero-argument callable giving ``name``'s stored value as the environment holds it.

    The object itself (bytes on POSIX; None when unset), for an identity test: the
    object stays the same until the variable is set again through ``os.environ``, so
    ``reader() is last`` tells in one dictionary look-up that a setting is unchanged
    (a value set again to the same text reads as a change, which is only slower).
    """
    if _data is None:                      # (a platform without the table)
        return partial(os.environ.get, name)
    return partial(_data.get, os.environ.encodekey(name))
