"""``P2PComm``'s vector collectives and scans: Gatherv, Scatterv, Allgatherv, Alltoallv, Scan, Exscan.

:class:`VMethods` is a mixin of :class:`mpicoll.P2PComm`: each ``_name(self,
call, ...)`` parses mpi4py's buffer forms and runs the one implementation in
:mod:`mpicoll.vcollectives`; ``P2PComm`` turns each into its blocking,
nonblocking (``I...``) and persistent (``..._init``) faces with ``_faces``.

The v side takes mpi4py's v-buffer specs (:mod:`mpicoll.args.vbuffers`), with
any buffer mpi4py takes (buffer protocol, DLPack, CUDA array interface),
predefined or derived datatypes; the other side takes the forms
``P2PComm``'s other methods take. Both go through ``self._bufspec``, which
``P2PComm`` sets to :func:`mpicoll.comm.parse_bufspec` (this module cannot
import mpicoll.comm: comm imports it); derived datatypes on the v side go
to the call's :class:`mpicoll.args.datatypes.Boundary`, which packs each block
(``counts[i]`` entries at ``displs[i]`` extents) back to back in rank
order. As in mpi4py, the receive buffer of Gatherv and the send buffer of
Scatterv are read on the root only.
"""
import operator
from functools import partial

import numpy as np
from mpi4py import MPI

from . import vcollectives as _v
from .core.errors import ArgumentError
from .args.user_ops import wrap as _user_op
from .args.vbuffers import VSpec, parse_vspec

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

    #: ``parse_bufspec(argname, spec, bnd=, role=)`` -> flat array or MPI.IN_PLACE; set by P2PComm.
    _bufspec = None
    #: ``as_base_array(argname, buf)`` -> NumPy or device array over any buffer; set by P2PComm.
    _base = None

    def _vec(self, argname, spec, bnd, role):
        """A v-buffer spec -> VSpec; a derived datatype is packed or viewed by ``bnd``."""
        def derived(argname, buf, counts, displs, datatype):
            bnd.given[argname] = datatype
            if buf is None or buf is MPI.BOTTOM:
                base = np.empty(0, np.uint8)        # counts must then all be 0 (checked there)
            else:
                base = self._base(argname, buf)
            flat, fcounts, fdispls = bnd.vector(argname, base, counts, displs, datatype,
                                                self.Get_size(), role)
            return VSpec(buf, flat, fcounts, fdispls)
        return parse_vspec(argname, spec, bufspec=partial(self._bufspec, bnd=bnd, role=role),
                           derived=derived)

    def _gatherv(self, call, bnd, sendbuf, recvbuf, root=0):
        def bufs():
            s = self._bufspec("sendbuf", sendbuf, bnd=bnd)
            r = None
            if _is_rank(root, self.Get_rank()):
                r = self._vec("recvbuf", _required("recvbuf", recvbuf), bnd, _role(s))
            return s, r
        _v._gatherv(call, bufs, root, self._algo("gatherv"))

    def _scatterv(self, call, bnd, sendbuf, recvbuf, root=0):
        def bufs():
            is_root = _is_rank(root, self.Get_rank())
            s = self._vec("sendbuf", _required("sendbuf", sendbuf), bnd, "send") if is_root else None
            r = self._bufspec("recvbuf", recvbuf, bnd=bnd, role="recv")
            if r is MPI.IN_PLACE and not is_root:
                r = None                # reported as a missing buffer, as Scatter does
            return s, r
        _v._scatterv(call, bufs, root, self._algo("scatterv"))

    def _allgatherv(self, call, bnd, sendbuf, recvbuf):
        def bufs():
            s = self._bufspec("sendbuf", sendbuf, bnd=bnd)
            return s, self._vec("recvbuf", _required("recvbuf", recvbuf), bnd, _role(s))
        _v._allgatherv(call, bufs, self._algo("allgatherv"))

    def _alltoallv(self, call, bnd, sendbuf, recvbuf):
        def bufs():
            # None means MPI.IN_PLACE, as in parse_bufspec
            s = MPI.IN_PLACE if sendbuf is None else self._vec("sendbuf", sendbuf, bnd, "send")
            return s, self._vec("recvbuf", _required("recvbuf", recvbuf), bnd, _role(s))
        _v._alltoallv(call, bufs, self._algo("alltoallv"))

    def _scan(self, call, bnd, sendbuf, recvbuf, op=MPI.SUM):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        _v._scan(call, lambda: self._reduction_bufs(bnd, sendbuf, recvbuf, op, False), op,
                 self._algo("scan"))

    def _exscan(self, call, bnd, sendbuf, recvbuf, op=MPI.SUM):
        op = _user_op(op, self)      # a user op over a derived datatype: see _user_ops
        # Rank 0's recvbuf is left as it was (MPI leaves it undefined): read it too, so that
        # a derived datatype's unpack writes back what was there.
        _v._scan(call, lambda: self._reduction_bufs(bnd, sendbuf, recvbuf, op, True), op,
                 self._algo("exscan"))

    def _reduction_bufs(self, bnd, sendbuf, recvbuf, op, keep):
        s = self._bufspec("sendbuf", sendbuf, bnd=bnd)
        r = self._bufspec("recvbuf", recvbuf, bnd=bnd, role="inout" if keep else _role(s))
        if r is MPI.IN_PLACE:
            raise ArgumentError(f"recvbuf: expected a buffer; got "
                                f"{'None' if recvbuf is None else 'MPI.IN_PLACE'}", MPI.ERR_BUFFER)
        return bnd.reduction(op, s, r)


def _role(sendbuf):
    """A receive buffer is also read when the send buffer is MPI.IN_PLACE."""
    return "inout" if sendbuf is MPI.IN_PLACE else "recv"
