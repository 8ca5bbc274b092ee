"""Nonblocking (``i...``) and persistent (``..._init``) forms of :mod:`mpicoll.vcollectives`.

Same arguments as the blocking functions, a request back (see
:mod:`mpicoll.requests`)::

    req = mpicoll.vrequests.iallgatherv(x, [out, counts, displs])
    ...
    req.Wait()

The vector collectives' exchange of counts (one small Iallgather, waited for)
happens when the call is made; the data moves in the background.
"""
from mpi4py import MPI

from .engine import memo as _memo
from . import vcollectives as _v
from .requests import _name as _name_after, _pair

__all__ = ["igatherv", "gatherv_init", "iscatterv", "scatterv_init", "iallgatherv",
           "allgatherv_init", "ialltoallv", "alltoallv_init", "iscan", "scan_init",
           "iexscan", "exscan_init"]


_SPECS = _memo.start_specs    # repeated calls replay (keyed on the arrays in the specs)


def _name(fns, blocking):
    return _name_after(fns, blocking, _v)


def _rooted_args(sendbuf, recvbuf=None, root=0):
    return (lambda: (sendbuf, recvbuf)), root


def _scatterv_args(sendbuf, recvbuf, root=0):
    return (lambda: (sendbuf, recvbuf)), root


def _two_args(sendbuf, recvbuf=None):
    return ((lambda: (sendbuf, recvbuf)),)


def _alltoallv_args(sendbuf, recvbuf):
    return ((lambda: (sendbuf, recvbuf)),)


def _scan_args(sendbuf, recvbuf=None, op=MPI.SUM):
    return (lambda: (sendbuf, recvbuf)), op


igatherv, gatherv_init = _name(_pair("gatherv", _v._gatherv, _rooted_args, _SPECS), "gatherv")
iscatterv, scatterv_init = _name(_pair("scatterv", _v._scatterv, _scatterv_args, _SPECS), "scatterv")
iallgatherv, allgatherv_init = _name(_pair("allgatherv", _v._allgatherv, _two_args, _SPECS), "allgatherv")
ialltoallv, alltoallv_init = _name(_pair("alltoallv", _v._alltoallv, _alltoallv_args, _SPECS), "alltoallv")
iscan, scan_init = _name(_pair("scan", _v._scan, _scan_args), "scan")
iexscan, exscan_init = _name(_pair("exscan", _v._scan, _scan_args), "exscan")
