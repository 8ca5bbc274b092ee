"""mpicoll: MPI collectives built by hand on point-to-point, beside the native ones.

Three faces of one core:

- functional: ``mpicoll.allreduce(sendbuf, recvbuf=None, op=MPI.SUM, *,
  comm=None, algorithm=None)`` and the same for every primitive;
- drop-in: ``mpicoll.P2PComm(MPI.COMM_WORLD, allreduce="ring")``, an
  ``MPI.Intracomm`` whose uppercase collectives run mpicoll's algorithms;
- seed-compatible: ``mpicoll.distributed``, the torch.distributed calls on
  NumPy arrays.

``mpicoll.algorithms(primitive)`` lists each primitive's algorithms
(``native`` is the MPI library's own); ``mpicoll.register`` adds one (a
plug-in for the demo, the bench and ``python -m mpicoll.verify``);
``mpicoll.traffic()`` counts the messages and bytes they send.
"""
from ._errors import ArgumentError, ArgumentTypeError
from ._registry import PRIMITIVES, algorithms, register
from ._context import traffic, Traffic, CallTraffic
from ._defaults import DEFAULTS_TABLE, default_algorithm
from .collectives import (bcast, reduce, allreduce, gather, allgather, scatter,
                          reduce_scatter_block, reduce_scatter, alltoall, barrier)
from .comm import P2PComm
from .vcollectives import gatherv, scatterv, allgatherv, alltoallv, scan, exscan
from .vrequests import (igatherv, gatherv_init, iscatterv, scatterv_init, iallgatherv,
                        allgatherv_init, ialltoallv, alltoallv_init, iscan, scan_init, iexscan,
                        exscan_init)
from .requests import (Request, PersistentRequest, waitall, testall, ibcast, ireduce, iallreduce,
                       igather, iallgather, iscatter, ireduce_scatter_block, ireduce_scatter,
                       ialltoall, ibarrier, bcast_init, reduce_init, allreduce_init, gather_init,
                       allgather_init, scatter_init, reduce_scatter_block_init,
                       reduce_scatter_init, alltoall_init, barrier_init)
from ._call import set_check, get_check, CollectiveMismatchError
from .monitored import monitored_barrier, BarrierTimeoutError

__version__ = "0.1.0"

__all__ = ["PRIMITIVES", "algorithms", "algorithm_info", "register", "traffic", "Traffic",
           "CallTraffic",
           "ArgumentError", "ArgumentTypeError", "DEFAULTS_TABLE", "default_algorithm",
           "bcast", "reduce", "allreduce", "gather", "allgather", "scatter",
           "reduce_scatter_block", "reduce_scatter", "alltoall", "barrier", "P2PComm",
           "set_check", "get_check", "CollectiveMismatchError", "monitored_barrier",
           "BarrierTimeoutError", "Request", "PersistentRequest", "waitall", "testall",
           "ibcast", "ireduce", "iallreduce", "igather", "iallgather", "iscatter",
           "ireduce_scatter_block", "ireduce_scatter", "ialltoall", "ibarrier",
           "bcast_init", "reduce_init", "allreduce_init", "gather_init", "allgather_init",
           "scatter_init", "reduce_scatter_block_init", "reduce_scatter_init",
           "alltoall_init", "barrier_init",
           "gatherv", "scatterv", "allgatherv", "alltoallv", "scan", "exscan",
           "igatherv", "gatherv_init", "iscatterv", "scatterv_init", "iallgatherv",
           "allgatherv_init", "ialltoallv", "alltoallv_init", "iscan", "scan_init", "iexscan",
           "exscan_init"]


def algorithm_info(primitive, name):
    """The registered function of an algorithm (its docstring states its cost)."""
    from ._registry import lookup
    return lookup(primitive, name)
