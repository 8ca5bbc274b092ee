"""One collective call: validate, agree, choose the algorithm, run.

Every public face (functional API, :class:`P2PComm`, ``mpicoll.distributed``)
goes through :class:`Call`, the single layer that checks user input::

    call = Call("allreduce", comm)
    with call.checking():           # ArgumentError here is held, not raised
        ...validate buffers, op, root...
        fn = call.choose(algorithm, op=op, nbytes=...)
    call.settle()                   # every rank raises if any rank failed
    fn(call.ctx(count, itemsize), ...)

``settle`` makes a rank-local error (say, a too-small recvbuf on the root)
raise on every rank instead of leaving the others waiting in the algorithm.
It costs one small native allreduce on the private communicator; set
``MPICOLL_CHECK=local`` to skip it when every rank's arguments are known good.
"""
import contextlib
import os

import numpy as np
from mpi4py import MPI

from ._context import Ctx, private_comm
from ._defaults import default_algorithm
from ._errors import ArgumentError, ArgumentTypeError, describe
from ._registry import algorithms, env_choice, lookup

__all__ = ["Call", "check_mode"]

_MODES = {"": "agree", "agree": "agree", "0": "local", "local": "local",
          "off": "local", "1": "agree"}
_MSG = 1024   # bytes of error text exchanged per rank when a call fails


def check_mode():
    """``agree`` (default) or ``local``, from ``MPICOLL_CHECK``."""
    raw = os.environ.get("MPICOLL_CHECK", "").strip().lower()
    mode = _MODES.get(raw)
    if mode is None:
        raise ArgumentError(
            f"MPICOLL_CHECK: expected one of agree, local, 0, 1 (or unset); got {raw!r}")
    return mode


def _as_comm(comm):
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm):
        kind = "an intercommunicator" if isinstance(comm, MPI.Intercomm) else describe(comm)
        raise ArgumentTypeError(
            f"comm: expected an mpi4py.MPI.Intracomm (e.g. MPI.COMM_WORLD); got {kind}", MPI.ERR_COMM)
    if comm == MPI.COMM_NULL:
        raise ArgumentError("comm: expected a valid intracommunicator; got MPI.COMM_NULL", MPI.ERR_COMM)
    return comm


class Call:
    """The state of one collective call on one rank."""

    __slots__ = ("primitive", "comm", "pcomm", "rank", "size", "error", "algorithm")

    def __init__(self, primitive, comm):
        self.primitive = primitive
        self.comm = _as_comm(comm)
        self.pcomm = private_comm(self.comm)
        self.rank = self.pcomm.Get_rank()
        self.size = self.pcomm.Get_size()
        self.error = None
        self.algorithm = None

    @contextlib.contextmanager
    def checking(self):
        """Hold any exception raised by validation until :meth:`settle`."""
        try:
            yield self
        except Exception as exc:      # noqa: BLE001 - re-raised in settle()
            self.error = exc

    def settle(self):
        """Raise on every rank if validation failed on any rank."""
        err = self.error
        if check_mode() == "local" or self.size == 1:
            if err is not None:
                raise err
            return
        flag = np.array([0 if err is None else 1], dtype=np.intc)
        # Infrastructure, not an algorithm: the library's own allreduce of one int.
        self.pcomm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX)
        if not flag[0]:
            return
        mine = np.zeros(_MSG, dtype=np.uint8)
        if err is not None:
            eclass = err.Get_error_class() if isinstance(err, MPI.Exception) else MPI.ERR_OTHER
            text = f"{type(err).__name__}: {err}".encode("utf-8", "replace")[:_MSG - 8]
            mine[:4] = np.frombuffer(np.int32(eclass).tobytes(), np.uint8)
            mine[4:8] = np.frombuffer(np.int32(len(text)).tobytes(), np.uint8)
            mine[8:8 + len(text)] = np.frombuffer(text, np.uint8)
        every = np.empty((self.size, _MSG), dtype=np.uint8)
        self.pcomm.Allgather(mine, every)
        if err is not None:
            raise err
        failed = []
        for r in range(self.size):
            n = int(every[r, 4:8].view(np.int32)[0])
            if n:
                failed.append((r, int(every[r, :4].view(np.int32)[0]),
                               every[r, 8:8 + n].tobytes().decode("utf-8", "replace")))
        ranks = ", ".join(str(r) for r, _, _ in failed)
        detail = "; ".join(f"rank {r}: {t}" for r, _, t in failed)
        raise ArgumentError(
            f"mpicoll.{self.primitive}: invalid arguments on rank(s) {ranks} "
            f"(nothing was sent) - {detail}", failed[0][1])

    def choose(self, name=None, *, op=None, nbytes=0, count=0):
        """Resolve the algorithm: argument, then MPICOLL_<P>_ALGORITHM, then auto."""
        primitive = self.primitive
        if name is None:
            name = env_choice(primitive) or "auto"
        elif not isinstance(name, str):
            raise ArgumentTypeError(
                f"algorithm: expected a name, one of {', '.join(algorithms(primitive))} "
                f"or 'auto'; got {describe(name)}")
        commutative = True if op is None else op.is_commutative
        if name == "auto":
            name = default_algorithm(primitive, size=self.size, nbytes=nbytes,
                                     count=count, commutative=commutative)
        fn = lookup(primitive, name)
        if fn.commutative_only and not commutative:
            capable = [n for n in algorithms(primitive) if not lookup(primitive, n).commutative_only]
            raise ArgumentError(
                f"algorithm: {primitive} algorithm {name!r} combines data out of rank order "
                f"and needs a commutative op; got a non-commutative user op. "
                f"Algorithms that keep rank order: {', '.join(capable)}", MPI.ERR_OP)
        self.algorithm = name
        return fn

    def ctx(self, count=0, itemsize=0):
        return Ctx(self.pcomm, self.primitive, self.algorithm, count, itemsize)
