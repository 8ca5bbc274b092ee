"""mpicoll: MPI collectives built by hand on point-to-point, beside the native ones.

The public face only (re-exports; no logic here):

- functional: ``mpicoll.allreduce(sendbuf, recvbuf=None, op=MPI.SUM, *,
  comm=None, algorithm=None)`` and the same for every primitive, with
  nonblocking ``i...`` and persistent ``..._init`` forms (:mod:`mpicoll.api`);
- drop-in: ``mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring")``, an
  ``MPI.Intracomm`` whose uppercase collectives run mpicoll's algorithms
  (:mod:`mpicoll.comm`);
- seed-compatible: :mod:`mpicoll.distributed`, the torch.distributed calls on
  NumPy arrays; :mod:`mpicoll.torch`, the ``"mpicoll"`` torch.distributed backend.

``mpicoll.algorithms(primitive)`` lists each primitive's algorithms
(``native`` is the MPI library's own), ``mpicoll.usable_algorithms`` those
that can run on a communicator's nodes and memory; ``mpicoll.traffic()`` counts the
messages and bytes they send; ``mpicoll.register`` adds an algorithm (a
plug-in for the demo, the bench and ``python -m mpicoll.verify``),
``mpicoll.define_primitive`` a primitive.
"""
from . import api as _api
from . import shm
from .api import FUNCTIONS as _FUNCTIONS
from .api import PersistentRequest, Request, testall, waitall
from .calls import Primitive
from .comm import P2PComm
from .core.defaults import DEFAULTS_TABLE, default_algorithm
from .core.errors import ArgumentError, ArgumentTypeError
from .core.registry import PRIMITIVES, algorithms, register
from .core.registry import lookup as _lookup
from .core.watchdog import CollectiveTimeoutError, get_timeout, set_timeout
from .engine.call import CollectiveMismatchError, get_check, set_check, usable_algorithms
from .engine.context import CallTraffic, Traffic, traffic
from .monitored import BarrierTimeoutError, monitored_barrier

globals().update(_FUNCTIONS)     # allreduce, iallreduce, allreduce_init, ... (see mpicoll.api)

__version__ = "0.1.0"

__all__ = ["PRIMITIVES", "algorithms", "usable_algorithms", "algorithm_info", "register",
           "define_primitive", "shm",
           "Primitive", "traffic", "Traffic", "CallTraffic", "ArgumentError",
           "ArgumentTypeError", "DEFAULTS_TABLE", "default_algorithm", "P2PComm", "set_check",
           "set_timeout", "get_timeout", "CollectiveTimeoutError",
           "get_check", "CollectiveMismatchError", "monitored_barrier", "BarrierTimeoutError",
           "Request", "PersistentRequest", "waitall", "testall", *_FUNCTIONS]


def define_primitive(primitive):
    """Define a new primitive at run time; its functions join this namespace.

    As :func:`mpicoll.api.define_primitive`; returns the names of its functions.
    """
    made = _api.define_primitive(primitive)
    globals().update({n: _FUNCTIONS[n] for n in made})
    return made


def algorithm_info(primitive, name):
    """The registered function of an algorithm (its docstring states its cost)."""
    return _lookup(primitive, name)
