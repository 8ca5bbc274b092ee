"""The functional API: ``mpicoll.allreduce(sendbuf, recvbuf, op, *, comm, algorithm)`` and more.

Every function here is written out from its primitive's binder in
:mod:`mpicoll.calls` into :mod:`mpicoll.faces` (``tools/make_faces.py``;
``tests/test_faces.py`` checks it is current) — one signature per function,
declared once: the blocking function (the binder's parameters, then keyword-only ``comm`` and
``algorithm``), its nonblocking form ``i<name>`` (returns a
:class:`Request`; ``Wait()`` returns what the blocking call returns) and its
persistent form ``<name>_init`` (returns a :class:`PersistentRequest`,
validated, agreed and bound once; ``Start()`` / ``Wait()`` as often as
needed). Conventions shared by every function:

- Buffers are C-contiguous NumPy or CuPy arrays of a dtype MPI can send;
  shapes are free, sizes are what MPI requires (checked). One call's buffers
  are all host or all on one device; allocated results are in the memory of
  the input.
- ``recvbuf=None`` allocates the result and returns it; a given recvbuf is
  filled and returned. Rooted operations return None on non-root ranks.
  ``sendbuf=MPI.IN_PLACE`` (where MPI allows it) takes the input from
  ``recvbuf`` and overwrites it.
- ``algorithm``: a name from :func:`mpicoll.algorithms`, ``"native"`` for the
  MPI library's own collective, or ``"auto"``; when None,
  ``MPICOLL_<PRIMITIVE>_ALGORITHM``, then ``MPICOLL_ALGORITHM``, then ``auto``.
- Bad arguments raise :class:`mpicoll.ArgumentError` on every rank before any
  message is sent (see ``MPICOLL_CHECK``).
- A repeated call on the same arrays replays the program it compiled
  (:mod:`mpicoll.engine.memo`, :mod:`mpicoll.engine.program`): the same NumPy
  array objects with the same shape, strides, dtype and writability. An array
  reshaped, re-typed or re-strided in place, or made read-only, takes the full
  path again (a new program, never a wrong one); NumPy refuses to resize an array
  whose memory a program holds a view of.
"""

import inspect

from . import faces
from .calls import DEFINED, define
from .engine import memo
from .engine.faces import init
from .engine.nonblocking import PersistentRequest, Request, testall, waitall
from .faces import *  # noqa: F403  (the written-out functions, listed in faces.__all__)

__all__ = ["Request", "PersistentRequest", "waitall", "testall", "define_primitive",
           "FUNCTIONS", *faces.__all__]

#: name -> function (blocking, ``i...`` and ``..._init`` forms of every binder; a plug-in's
#: join it through :func:`define_primitive`).
FUNCTIONS = dict(faces.FUNCTIONS)


def _faces(primitive, binder):
    """The blocking, nonblocking and persistent functions of a run-time primitive's binder.

    Closures with the binder's signature plus keyword-only ``comm`` and ``algorithm``
    (the built-in primitives' functions are written out in :mod:`mpicoll.faces`).
    """
    name = binder.__name__
    sig = inspect.signature(binder)
    kw = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
          for n in ("comm", "algorithm")]
    through = memo.run_specs if primitive.vspecs else memo.run
    begin = memo.start_specs if primitive.vspecs else memo.start

    def blocking(*args, comm=None, algorithm=None, **kwargs):
        bufs, values = binder(*args, **kwargs)
        return through(primitive.name, primitive.run, comm, algorithm, bufs, values, values)

    def start(*args, comm=None, algorithm=None, **kwargs):
        bufs, values = binder(*args, **kwargs)
        return begin(primitive.name, primitive.run, comm, algorithm, bufs, values, values)

    def persistent(*args, comm=None, algorithm=None, **kwargs):
        bufs, values = binder(*args, **kwargs)
        return init(primitive.name, primitive.run, comm, algorithm, bufs, values)

    first = (binder.__doc__ or name).strip().splitlines()[0]
    made = []
    for fn, fname, doc in (
            (blocking, name, binder.__doc__),
            (start, "i" + name,
             f"Nonblocking :func:`mpicoll.{name}` (same arguments): returns a "
             f":class:`Request`; ``Wait()`` returns what {name} returns.\n\n{first}"),
            (persistent, name + "_init",
             f"Persistent :func:`mpicoll.{name}` (same arguments): returns a "
             f":class:`PersistentRequest`; ``Start()`` then ``Wait()``, many times."
             f"\n\n{first}")):
        fn.__name__ = fn.__qualname__ = fname
        fn.__doc__ = doc
        fn.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*sig.parameters.values(), *kw])
        made.append(fn)
    return made


def define_primitive(primitive):
    """Define a new primitive (a :class:`mpicoll.calls.Primitive`) at run time.

    Its functions appear here (and, through :func:`mpicoll.define_primitive`, in the
    ``mpicoll`` namespace), its methods on :class:`mpicoll.P2PComm`, and the registry lists
    it (the demo's traffic table, the bench, the verifier and the generated test matrix see
    it). Returns the names of the functions made.
    """
    from .comm import add_methods
    define(primitive)
    made = []
    for binder in primitive.api:
        for fn in _faces(primitive, binder):
            FUNCTIONS[fn.__name__] = fn
            globals()[fn.__name__] = fn
            made.append(fn.__name__)
    __all__.extend(made)
    add_methods(primitive)
    return made


assert set(DEFINED) >= {n for n in faces.FUNCTIONS if n in DEFINED}
