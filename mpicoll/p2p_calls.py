"""How :class:`mpicoll.P2PComm`'s collective methods run a call (what their faces call).

A method (``P2PComm.Allreduce(sendbuf, recvbuf, op)``) hands its buffers, its other
arguments and all its values, in its parameters' order, to :func:`p2p_blocking`,
:func:`p2p_start` or :func:`p2p_init`, which run the primitive's mpi4py-style method
of :mod:`mpicoll.calls` (it parses mpi4py's buffer forms, then the primitive's
``run``). Blocking and nonblocking calls on NumPy or device arrays (bare, or in
buffer specs :func:`key` can compare) go through :mod:`mpicoll.engine.memo` as the
functional API's do: a hit replays the bound plan after the agreement; a miss runs
the method and is remembered. Derived datatypes are packed and unpacked around the
call by its :class:`mpicoll.args.datatypes.Boundary` (at ``Wait`` for ``I...``,
around every ``Start`` for ``..._init``).

The built-in primitives' methods are written out in :mod:`mpicoll.p2p_methods`
(``tools/make_faces.py``); a primitive defined at run time gets closures
(:func:`method_faces`).
"""
import inspect

import numpy as np
from mpi4py import MPI

from .args.datatypes import Boundary
from .calls import DEFINED
from .calls.primitive import binder_parts
from .core import watchdog as _wd
from .engine import memo
from .engine.call import Call

__all__ = ["key", "p2p_blocking", "p2p_start", "p2p_init", "method_faces"]


def key(bufs, others):
    """(buffers, other arguments) of a call the memo may serve, else None.

    Buffers: NumPy or device arrays, ``MPI.IN_PLACE`` or None, bare or in list
    specs whose other parts are counts, displacements and predefined datatypes
    (:func:`mpicoll.engine.memo.spec_parts`: ``[x, MPI.DOUBLE]``, ``[y, (counts,
    displs)]``); other arguments compared by value where they are counts. Anything
    else (a derived datatype, another buffer type) takes the full path, which
    parses and reports it.
    """
    if all(map(memo.array_or_none, bufs)) and not any(
            type(r) is list or type(r) is tuple or type(r) is np.ndarray for r in others):
        return bufs, (*others, *(None,) * len(bufs))     # the common form: bare arrays
    parts = memo.spec_parts(bufs)
    if parts is None or not all(map(memo.array_or_none, parts[0])):
        return None
    rest = list(others)
    for i, r in enumerate(rest):
        if type(r) is list or type(r) is tuple or type(r) is np.ndarray:
            rest[i] = memo.parts_of(r)       # recvcounts: by value
            if rest[i] is None:
                return None
    return parts[0], (*rest, *parts[1])


# method name -> (primitive name, method), built-in and defined at run time
_methods: dict[str, tuple] = {}


def _method(name):
    got = _methods.get(name)
    if got is None:
        for p in DEFINED.values():
            for m in p.methods:
                _methods[m.__name__] = (p.name, m)
        got = _methods[name]
    return got


def _run(call, _bufs, comm, name, values, _algorithm=None):
    """Run method ``name`` on ``values`` (the memo's impl signature)."""
    pname, method = _method(name)
    bnd = Boundary(comm)
    method(comm, call, bnd, comm._algo(pname), *values)
    bnd.finish(call)              # derived datatypes: unpacked into the caller's buffers


def p2p_blocking(comm, name, bufs, others, values):
    """The blocking method ``name`` of ``comm`` on its arguments (through the memo)."""
    pname = _method(name)[0]
    if _wd.ON and _wd.REC.name is None:  # the collective watchdog times the call
        return _wd.watched(p2p_blocking, pname, comm, comm, name, bufs, others, values)
    k = key(bufs, others)
    if k is None:
        return _run(Call(pname, comm), None, comm, name, values)
    memo.run(pname, _run, comm, comm._algo(pname), k[0], k[1], (comm, name, values),
             space=f"P2PComm.{name}")


def p2p_start(comm, name, bufs, others, values):
    """The nonblocking method (``I...``) of ``name``: its request (through the memo)."""
    pname = _method(name)[0]
    k = key(bufs, others)
    if k is not None:   # arrays the memo keys on: repeated calls replay (memo.start)
        return memo.start(pname, _run, comm, comm._algo(pname), k[0], k[1],
                          (comm, name, values), space=f"P2PComm.I{name}")
    call = Call(pname, comm, "start")
    _run(call, None, comm, name, values)
    return call.request


def p2p_init(comm, name, values):
    """The persistent method (``..._init``) of ``name``: its request, bound once."""
    call = Call(_method(name)[0], comm, "init")
    _run(call, None, comm, name, values)
    return call.request


def method_faces(primitive, method):
    """Blocking, ``I...`` and ``..._init`` methods for ``method`` of a run-time primitive.

    Closures with ``method``'s signature (after ``comm, call, bnd, algorithm``).
    """
    name = method.__name__
    _methods[name] = (primitive.name, method)
    params, bufs, others = binder_parts(method, skip=4)
    sig = inspect.Signature(params)
    names = [p.name for p in params]

    def split(args, kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        v = bound.arguments
        return (tuple(v[b] for b in bufs), tuple(v[o.name] for o in others),
                tuple(v[n] for n in names))

    def blocking(self, *args, **kwargs):
        return p2p_blocking(self, name, *split(args, kwargs))

    def start(self, *args, **kwargs):
        return p2p_start(self, name, *split(args, kwargs))

    def init(self, *args, info=MPI.INFO_NULL, **kwargs):
        return p2p_init(self, name, split(args, kwargs)[2])

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    info = inspect.Parameter("info", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             default=MPI.INFO_NULL)
    iname = "I" + name.lower()
    faces = []
    for f, fname, extra in ((blocking, name, ()), (start, iname, ()),
                            (init, name + "_init", (info,))):
        f.__name__ = fname
        f.__qualname__ = f"P2PComm.{fname}"
        f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [self_param, *params, *extra])
        faces.append(f)
    faces[0].__doc__ = f"mpi4py's ``{name}``, run by mpicoll's {primitive.name} algorithm."
    faces[1].__doc__ = (f"Nonblocking ``{name}``: returns an :class:`mpicoll.Request` "
                        f"(``Wait()``/``Test()``, or ``mpicoll.waitall``).")
    faces[2].__doc__ = (f"Persistent ``{name}``: returns an :class:`mpicoll.PersistentRequest`; "
                        f"``Start()`` then ``Wait()``, as often as needed.")
    return faces
