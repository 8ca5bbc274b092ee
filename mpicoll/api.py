"""The functional API: ``mpicoll.allreduce(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None)`` and friends.

Every function here is generated from its primitive's binder in
:mod:`mpicoll.calls` — one signature per function, written once: the
blocking function (the binder's parameters, then keyword-only ``comm`` and
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
- A repeated call on the same arrays replays the plan it bound
  (:mod:`mpicoll.engine.memo`).
"""
import inspect

from .calls import DEFINED, define
from .engine import memo
from .engine.call import Call
from .engine.nonblocking import PersistentRequest, Request, testall, waitall

__all__ = ["Request", "PersistentRequest", "waitall", "testall", "define_primitive",
           "FUNCTIONS"]

#: name -> generated function (blocking, ``i...`` and ``..._init`` forms of every binder).
FUNCTIONS = {}

_TEMPLATE = '''
def {name}({params}*, comm=None, algorithm=None):
    bufs, args = _bind({names})
    return _through({primitive!r}, _run, comm, algorithm, bufs, args, args)

def i{name}({params}*, comm=None, algorithm=None):
    bufs, args = _bind({names})
    return _start({primitive!r}, _run, comm, algorithm, bufs, args, args)

def {name}_init({params}*, comm=None, algorithm=None):
    bufs, args = _bind({names})
    call = _Call({primitive!r}, comm, "init")
    call.request.result = _run(call, lambda: bufs, *args, algorithm)
    return call.request
'''


def _faces(primitive, binder):
    """The blocking, nonblocking and persistent functions of one binder of ``primitive``."""
    name = binder.__name__
    params = list(inspect.signature(binder).parameters.values())
    ns = {"_bind": binder, "_run": primitive.run, "_Call": Call,
          "_through": memo.run_specs if primitive.vspecs else memo.run,
          "_start": memo.start_specs if primitive.vspecs else memo.start,
          "__name__": __name__}
    text = []
    for i, p in enumerate(params):
        if p.default is inspect.Parameter.empty:
            text.append(p.name)
        else:
            ns[f"_d{i}"] = p.default
            text.append(f"{p.name}=_d{i}")
    code = _TEMPLATE.format(name=name, primitive=primitive.name,
                            params="".join(t + ", " for t in text),
                            names=", ".join(p.name for p in params))
    exec(compile(code, f"<mpicoll.api: {name}>", "exec"), ns)
    first = (binder.__doc__ or "").strip().splitlines()[0] if binder.__doc__ else name
    blocking, start, init = ns[name], ns["i" + name], ns[name + "_init"]
    blocking.__doc__ = binder.__doc__
    start.__doc__ = (f"Nonblocking :func:`mpicoll.{name}` (same arguments): returns a "
                     f":class:`Request`; ``Wait()`` returns what {name} returns.\n\n{first}")
    init.__doc__ = (f"Persistent :func:`mpicoll.{name}` (same arguments): returns a "
                    f":class:`PersistentRequest`; ``Start()`` then ``Wait()``, many times."
                    f"\n\n{first}")
    return blocking, start, init


def _add(primitive):
    made = []
    for binder in primitive.api:
        for fn in _faces(primitive, binder):
            FUNCTIONS[fn.__name__] = fn
            globals()[fn.__name__] = fn
            made.append(fn.__name__)
    __all__.extend(made)
    return made


for _p in DEFINED.values():
    _add(_p)
del _p


def define_primitive(primitive):
    """Define a new primitive (a :class:`mpicoll.calls.Primitive`) at run time.

    Its functions appear here (and, through :func:`mpicoll.define_primitive`, in the
    ``mpicoll`` namespace), its methods on :class:`mpicoll.P2PComm`, and the registry lists
    it (the demo's traffic table, the bench, the verifier and the generated test matrix see
    it). Returns the names of the functions made.
    """
    from .comm import add_methods
    define(primitive)
    made = _add(primitive)
    add_methods(primitive)
    return made
