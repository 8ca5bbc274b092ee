"""``P2PComm``: a drop-in ``mpi4py.MPI.Intracomm`` whose collectives are mpicoll's.

::

    from mpi4py import MPI
    import mpicoll
    comm = mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring", bcast="pipeline")
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)   # runs allreduce_ring
    comm.Send(...), comm.Split(...)                # the wrapped communicator's own

Overridden, in their blocking, nonblocking (``I...``) and persistent
(``..._init``) faces: Bcast, Reduce, Allreduce, Gather, Allgather, Scatter,
Reduce_scatter_block, Reduce_scatter, Alltoall, Barrier, and (parsed in
:mod:`mpicoll.calls` like the others) Gatherv, Scatterv, Allgatherv, Alltoallv, Scan,
Exscan. Everything else — Alltoallw, the neighbourhood collectives, the
lowercase pickle-based methods, point-to-point, communicator management —
is the wrapped communicator's own.

Buffers take every form mpi4py takes (:func:`parse_bufspec`): ``buf``,
``[buf, datatype]``, ``[buf, count]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``,
``[None, datatype]`` (or ``[None, 0, datatype]``) for an empty message,
``MPI.IN_PLACE`` or None where MPI allows in-place; ``buf`` is any object
mpi4py takes — the buffer protocol, DLPack, ``__cuda_array_interface__``
(:mod:`mpicoll.args.protocols`: viewed, never copied, so results land in the
caller's object). Datatypes are predefined or derived; derived ones are
packed and unpacked by MPI at the boundary of the call
(:mod:`mpicoll.args.datatypes`), the algorithms running on the packed elements.
Errors are :class:`mpicoll.ArgumentError`, an ``MPI.Exception`` with MPI's
error class, raised on every rank before any message.
"""
import inspect

import numpy as np
from mpi4py import MPI

from .args.bufspec import parse_bufspec
from .args.datatypes import Boundary
from .calls import DEFINED
from .calls.primitive import binder_parts
from .core import watchdog as _wd
from .core.errors import ArgumentError, ArgumentTypeError, describe
from .core.registry import PRIMITIVES, lookup
from .engine import memo
from .engine.call import Call

__all__ = ["P2PComm", "parse_bufspec", "add_methods"]


def _key(bufs, others):
    """(buffers, other arguments) of a blocking call the memo may serve, else None.

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


_METHODS = '''
def {name}(self, {params}):
    return _blocking(self, ({bufs}), ({others}), ({names}))

def {iname}(self, {params}):
    return _start(self, ({bufs}), ({others}), ({names}))

def {name}_init(self, {params}info=_INFO_NULL):
    return _init(self, ({names}))
'''


def _faces(primitive, method):
    """P2PComm's blocking method, its nonblocking ``I...`` and persistent ``..._init`` forms.

    Made from ``method`` (mpi4py's signature after ``comm, call, bnd, algorithm``).

    Blocking and nonblocking calls on NumPy or device arrays (bare, or in buffer specs
    :func:`_key` can compare) go through :mod:`mpicoll.engine.memo` as the functional
    API's do: a hit replays the bound plan after the agreement; a miss runs the method
    and is remembered. Derived datatypes are packed and unpacked around the call by its
    :class:`mpicoll.args.datatypes.Boundary` (at ``Wait`` for ``I...``, around every
    ``Start`` for ``..._init``).
    """
    name, pname = method.__name__, primitive.name
    params, bufs, others = binder_parts(method, skip=4)

    def run(call, _bufs, comm, values, _algorithm=None):
        # memo.run's impl signature: (call, bufs, *args, algorithm)
        bnd = Boundary(comm)
        method(comm, call, bnd, comm._algo(pname), *values)
        bnd.finish(call)              # derived datatypes: unpacked into the caller's buffers

    def blocking(self, bufs, others, values):
        if _wd.ON and _wd.REC.name is None:  # the collective watchdog times the call
            return _wd.watched(blocking, pname, self, self, bufs, others, values)
        key = _key(bufs, others)
        if key is None:
            return run(Call(pname, self), None, self, values)
        memo.run(pname, run, self, self._algo(pname), key[0], key[1], (self, values),
                 space=f"P2PComm.{name}")

    def start(self, bufs, others, values):
        key = _key(bufs, others)
        if key is not None:   # arrays the memo keys on: repeated calls replay (memo.start)
            return memo.start(pname, run, self, self._algo(pname), key[0], key[1],
                              (self, values), space=f"P2PComm.I{name}")
        call = Call(pname, self, "start")
        run(call, None, self, values)
        return call.request

    def init(self, values):       # info: accepted and ignored, as MPI allows
        call = Call(pname, self, "init")
        run(call, None, self, values)
        return call.request

    ns = {"_blocking": blocking, "_start": start, "_init": init, "__name__": __name__}
    text = []
    for i, p in enumerate(params):
        if p.default is inspect.Parameter.empty:
            text.append(p.name)
        else:
            ns[f"_d{i}"] = p.default
            text.append(f"{p.name}=_d{i}")
    iname = "I" + name.lower()
    code = _METHODS.format(name=name, iname=iname, params="".join(t + ", " for t in text),
                           bufs="".join(b + ", " for b in bufs),
                           others="".join(o.name + ", " for o in others),
                           names="".join(p.name + ", " for p in params))
    ns["_INFO_NULL"] = MPI.INFO_NULL           # mpi4py's default (info is not used)
    exec(compile(code, f"<mpicoll.comm: {name}>", "exec"), ns)
    faces = ns[name], ns[iname], ns[name + "_init"]
    faces[0].__doc__ = f"mpi4py's ``{name}``, run by mpicoll's {pname} algorithm."
    faces[1].__doc__ = (f"Nonblocking ``{name}``: returns an :class:`mpicoll.Request` "
                        f"(``Wait()``/``Test()``, or ``mpicoll.waitall``).")
    faces[2].__doc__ = (f"Persistent ``{name}``: returns an :class:`mpicoll.PersistentRequest`; "
                        f"``Start()`` then ``Wait()``, as often as needed.")
    for f in faces:
        f.__qualname__ = f"P2PComm.{f.__name__}"
    return faces


class P2PComm(MPI.Intracomm):
    """An ``MPI.Intracomm`` whose collectives run mpicoll's hand-written algorithms.

    ``P2PComm(comm, **choices)`` shares ``comm``'s handle (nothing is
    duplicated or freed); ``choices`` maps primitive names to algorithm
    names, e.g. ``allreduce="ring"``; unnamed primitives use
    ``MPICOLL_<PRIMITIVE>_ALGORITHM``, ``MPICOLL_ALGORITHM`` or ``auto``.
    ``Dup()`` and ``Clone()`` keep the choices.
    """

    def __new__(cls, comm=None, *args, **kwargs):
        """Check ``comm`` is an ``MPI.Intracomm``; the new object shares its handle."""
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        return super().__new__(cls, comm)

    def __init__(self, comm=None, **choices):
        if comm is not None and not isinstance(comm, MPI.Intracomm):
            raise ArgumentTypeError(
                f"comm: expected an mpi4py.MPI.Intracomm; got {describe(comm)}", MPI.ERR_COMM)
        for prim, name in choices.items():
            if prim not in PRIMITIVES:
                raise ArgumentError(
                    f"{prim}: not a primitive; expected keywords among {', '.join(PRIMITIVES)}")
            if name != "auto":
                lookup(prim, name)
        self._choices = dict(choices)

    @property
    def choices(self):
        """The algorithm chosen per primitive (a copy)."""
        return dict(getattr(self, "_choices", {}))

    def _algo(self, primitive):
        return getattr(self, "_choices", {}).get(primitive)

    def Dup(self, info=None):
        """Duplicate the communicator (with ``info`` when given), keeping its algorithm choices."""
        new = super().Dup(info) if info is not None else super().Dup()
        new._choices = self.choices
        return new

    def Clone(self):
        """Clone the communicator, keeping its algorithm choices."""
        new = super().Clone()
        new._choices = self.choices
        return new


def add_methods(primitive):
    """Give :class:`P2PComm` the methods of ``primitive`` (blocking, ``I...``, ``..._init``)."""
    for method in primitive.methods:
        for face in _faces(primitive, method):
            setattr(P2PComm, face.__name__, face)


for _p in DEFINED.values():
    add_methods(_p)
del _p
