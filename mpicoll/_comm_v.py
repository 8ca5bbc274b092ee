"""``P2PComm``'s vector collectives and scans: Gatherv, Scatterv, Allgatherv, Alltoallv, Scan, Exscan.

:class:`VMethods` is a mixin of :class:`mpicoll.P2PComm`: each ``_name(self,
call, ...)`` parses mpi4py's buffer forms and runs the one implementation in
:mod:`mpicoll.vcollectives`; ``P2PComm`` turns each into its blocking,
nonblocking (``I...``) and persistent (``..._init``) faces with ``_faces``.

The v side takes mpi4py's v-buffer specs (:mod:`mpicoll._vbuffers`), with
any object exposing the buffer protocol as mpi4py does; the other side
takes the forms ``P2PComm``'s other methods take. Both go through
``self._bufspec``, which ``P2PComm`` sets to :func:`mpicoll.comm.parse_bufspec`
(this module cannot import mpicoll.comm: comm imports it). As in mpi4py,
the receive buffer of Gatherv and the send buffer of Scatterv are read on
the root only.
"""
import operator

import numpy as np
from mpi4py import MPI

from . import vcollectives as _v
from ._errors import ArgumentError
from ._vbuffers import parse_vspec

__all__ = ["VMethods"]


def _is_rank(root, rank):
    """``root == rank`` for any integer type (np.int64 included); False for junk."""
    if isinstance(root, (bool, np.bool_)):
        return False
    try:
        return operator.index(root) == rank
    except TypeError:
        return False


def _required(argname, spec):
    """mpi4py has no allocating form: a missing receive buffer is an error, not a request."""
    if spec is None:
        raise ArgumentError(f"{argname}: expected a buffer; got None", MPI.ERR_BUFFER)
    return spec


class VMethods:
    """The v-collectives and scans of :class:`mpicoll.P2PComm` (mpi4py's signatures)."""

    #: ``parse_bufspec(argname, spec)`` -> flat array or MPI.IN_PLACE; set by P2PComm.
    _bufspec = None

    def _vec(self, argname, spec):
        return parse_vspec(argname, spec, bufspec=self._bufspec)

    def _gatherv(self, call, sendbuf, recvbuf, root=0):
        def bufs():
            s = self._bufspec("sendbuf", sendbuf)
            r = None
            if _is_rank(root, self.Get_rank()):
                r = self._vec("recvbuf", _required("recvbuf", recvbuf))
            return s, r
        _v._gatherv(call, bufs, root, self._algo("gatherv"))

    def _scatterv(self, call, sendbuf, recvbuf, root=0):
        def bufs():
            is_root = _is_rank(root, self.Get_rank())
            s = self._vec("sendbuf", _required("sendbuf", sendbuf)) if is_root else None
            r = self._bufspec("recvbuf", recvbuf)
            if r is MPI.IN_PLACE and not is_root:
                r = None                # reported as a missing buffer, as Scatter does
            return s, r
        _v._scatterv(call, bufs, root, self._algo("scatterv"))

    def _allgatherv(self, call, sendbuf, recvbuf):
        def bufs():
            return (self._bufspec("sendbuf", sendbuf),
                    self._vec("recvbuf", _required("recvbuf", recvbuf)))
        _v._allgatherv(call, bufs, self._algo("allgatherv"))

    def _alltoallv(self, call, sendbuf, recvbuf):
        def bufs():
            # None means MPI.IN_PLACE, as in parse_bufspec
            s = MPI.IN_PLACE if sendbuf is None else self._vec("sendbuf", sendbuf)
            return s, self._vec("recvbuf", _required("recvbuf", recvbuf))
        _v._alltoallv(call, bufs, self._algo("alltoallv"))

    def _scan(self, call, sendbuf, recvbuf, op=MPI.SUM):
        _v._scan(call, lambda: self._reduction_bufs(sendbuf, recvbuf), op, self._algo("scan"))

    def _exscan(self, call, sendbuf, recvbuf, op=MPI.SUM):
        _v._scan(call, lambda: self._reduction_bufs(sendbuf, recvbuf), op, self._algo("exscan"))

    def _reduction_bufs(self, sendbuf, recvbuf):
        s = self._bufspec("sendbuf", sendbuf)
        r = self._bufspec("recvbuf", recvbuf)
        if r is MPI.IN_PLACE:
            raise ArgumentError("recvbuf: expected a buffer; got MPI.IN_PLACE", MPI.ERR_BUFFER)
        return s, r
