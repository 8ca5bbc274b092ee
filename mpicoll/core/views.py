"""Read-only mappings computed from the registry at each use (plug-ins included).

What the library holds about a primitive or an algorithm is declared with it
(``mpicoll/calls/<primitive>.py``, an algorithm's ``register``); the tables the
tools read (``DEFAULTS_TABLE``, ``TEXTBOOK``, the bench's reference calls, the
verifier's kinds of primitive) are views of those declarations, never copies,
so a primitive or algorithm a plug-in defines appears in them.
"""
from collections.abc import Mapping

__all__ = ["LiveView"]


class LiveView(Mapping):
    """``key -> value(key)`` over ``keys()``, leaving out the keys whose value is None.

    ``keys``: a zero-argument callable giving the candidate keys in order;
    ``value``: key -> its value, or None where the key has none (also for a key that
    ``keys()`` does not give: a look-up of an unknown key is a :class:`KeyError`).
    """

    def __init__(self, keys, value, doc=None):
        self._keys, self._value = keys, value
        if doc:
            self.__doc__ = doc

    def __getitem__(self, key):
        value = self._value(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self):
        return (k for k in self._keys() if self._value(k) is not None)

    def __len__(self):
        return sum(1 for _ in self)

    def __repr__(self):
        return repr(dict(self))
