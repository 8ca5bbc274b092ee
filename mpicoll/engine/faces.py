"""What the generated faces (``mpicoll/faces.py``, ``mpicoll/p2p_methods.py``) call.

A face's first move on a blocking call is the memo's hit test, written into
the face itself: one key of the call's identities (:data:`memo_get`), then
:meth:`~mpicoll.engine.memo._Entry.hit`, provided no request is in flight and
no recorder counts calls (:data:`active`, :data:`recorders`) and the collective
watchdog is off (:data:`mpicoll.core.watchdog.ON`: watched calls take the full path,
which times them). Everything else goes through
:func:`mpicoll.engine.memo.run` (or ``start``), which tests the same entry again
and otherwise validates, agrees, binds and remembers.
"""
from . import context as _context
from . import memo as _memo_module
from . import nonblocking as _nb
from .call import Call

__all__ = ["memo_get", "active", "recorders", "ID_NONE", "init"]

#: The nonblocking requests in flight (a blocking call then takes the full path, which
#: lets them progress) and the traffic recorders (each call is then counted as it runs):
#: the lists themselves, which the faces test for emptiness.
active = _nb._active
recorders = _context._recorders

#: The memo's look-up (``dict.get`` of its table).
memo_get = _memo_module._memo.get

#: How a None argument appears in a memo key (by identity, as the memo keys objects).
ID_NONE = id(None)


def init(primitive, impl, comm, algorithm, bufs, args):
    """A persistent call (``..._init``): validated, agreed and bound once; its request."""
    call = Call(primitive, comm, "init")
    call.request.result = impl(call, lambda: bufs, *args, algorithm)
    return call.request
