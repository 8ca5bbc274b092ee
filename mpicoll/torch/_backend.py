"""The ``"mpicoll"`` process group: torch.distributed's collectives on mpicoll's algorithms.

torch hands each collective to the process group as a method call with its
options (``allreduce([tensor], AllreduceOptions)``, ...). Each method here
views the tensors' memory as arrays (:mod:`._tensors`: no copies for single
tensors, nor for lists that are chunks of one tensor), calls the mpicoll
function of the primitive on the group's own MPI communicator, and returns a
work object (:mod:`._work`). ``async_op=False`` calls run blocking (the
repeated-call memo makes a small one cost a few µs more than mpicoll's own);
``async_op=True`` calls (and the calls torch always marks asynchronous:
gather, scatter, reduce_scatter, all_to_all, and DDP's) start mpicoll's
nonblocking request.

Errors: what torch would refuse (non-contiguous tensors, wrong list lengths,
sizes or dtypes) and what mpicoll refuses raise :class:`mpicoll.ArgumentError`
on every rank of the group, before anything is sent (the failing rank's
reason travels through mpicoll's agreement step); calls whose counts or
dtypes differ between ranks raise :class:`mpicoll.CollectiveMismatchError`
everywhere.
"""
import re
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

import mpicoll

from ..core.errors import ArgumentError, ArgumentTypeError, describe
from ..core.registry import PRIMITIVES, algorithm_pairs, lookup
from ..engine.call import Call
from ..engine.context import private_comm
from . import _monitored, _ops, _sparse, _tensors
from ._repeated import Repeated
from ._tensors import consecutive, cuda_stream, view
from ._work import Done, Pending

__all__ = ["ProcessGroupMpicoll", "Options", "parse_algorithms"]

_MSG = 1024                 # bytes of a refusing rank's reason (_fail, _explained)
_INVALID = re.compile(r"invalid arguments on rank\(s\) ([0-9, -]+) \(nothing was sent; the "
                      r"error was raised there")

#: The primitive whose algorithm each mpicoll function runs.
_PRIMITIVE = {"bcast": "bcast", "allreduce": "allreduce", "reduce": "reduce",
              "allgather": "allgather", "gather": "gather", "scatter": "scatter",
              "reduce_scatter": "reduce_scatter", "reduce_scatter_block": "reduce_scatter",
              "alltoall": "alltoall", "alltoallv": "alltoallv", "barrier": "barrier"}
_BLOCKING = {f: getattr(mpicoll, f) for f in _PRIMITIVE}
_NONBLOCKING = {f: getattr(mpicoll, "i" + f) for f in _PRIMITIVE}


def parse_algorithms(text, where="algorithms"):
    """``"allreduce=ring,bcast=binomial"`` (or a dict) as {primitive: algorithm}, checked."""
    if not text:
        return {}
    items = list(text.items()) if isinstance(text, dict) else algorithm_pairs(text, where)
    out = {}
    for primitive, name in items:
        if primitive not in PRIMITIVES:
            raise ArgumentError(f"{where}: expected primitives among {', '.join(PRIMITIVES)}; "
                                f"got {primitive!r}")
        if name != "auto":
            lookup(primitive, name)          # an unknown name lists the valid ones
        out[primitive] = name
    return out


class Options:
    """Backend options for ``init_process_group`` and ``new_group``.

    Passed as ``init_process_group(backend="mpicoll", pg_options=...)`` and
    ``new_group(..., pg_options=...)``.

    ``algorithms``: {primitive: algorithm} or ``"allreduce=ring,bcast=binomial"``
    (``native`` is the MPI library's own collective); primitives not named follow
    ``MPICOLL_<PRIMITIVE>_ALGORITHM``, then ``MPICOLL_ALGORITHM``, then ``auto``.
    ``check``: mpicoll's check mode for this group (``"agree"``, ``"checked"``,
    ``"local"``; default ``MPICOLL_CHECK``).
    """

    def __init__(self, algorithms=None, check=None):
        self.algorithms = parse_algorithms(algorithms, "algorithms")
        self.check = check


class ProcessGroupMpicoll(dist.ProcessGroup):
    """A torch process group over an MPI communicator, its collectives run by mpicoll."""

    def __init__(self, comm, rank, size, options=None, timeout=None):
        super().__init__(rank, size)
        self._comm = comm
        self._rank, self._size = rank, size
        # The group's timeout (init_process_group/new_group's): every collective runs as a
        # request waited on with this deadline (see _run). Its private communicator is made
        # now, while every member is here: a rank that later calls alone must not block in
        # its collective set-up.
        self._timeout = timeout if timeout and timeout > 0 else None
        self._broken = None              # the timeout that made the group unusable
        self._repeated = Repeated(self)  # repeated blocking all_reduce calls (their programs)
        private_comm(comm)
        # With a timeout, calls are requests, whose agreement tells the others only *which*
        # rank refused its arguments: the reasons travel on this duplicate (_explained).
        self._errcomm = comm.Dup() if self._timeout is not None else None
        self._errsends = []
        self._failures = 0               # failed calls (the error channel's tags)
        if self._timeout is not None:       # its report names the ranks that are missing
            mpicoll.set_timeout(comm, self._timeout, action="raise")
        options = options or Options()
        # Primitives not named here follow the environment (MPICOLL_<P>_ALGORITHM,
        # MPICOLL_ALGORITHM), read at each call by the engine, then auto.
        self._algorithms = dict(options.algorithms)
        if options.check is not None:
            mpicoll.set_check(comm, options.check)
        self._scratch = {}

    # -- identity -------------------------------------------------------------
    def size(self):
        return self._size

    def rank(self):
        return self._rank

    def getBackendName(self):
        return "mpicoll"

    def name(self):
        return "mpicoll"

    # torch names a group after it is made; a Python process group keeps the name itself
    # (the C++ base class would look for it in a backend object this group does not have).
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return getattr(self, "_group_name", "")

    def _set_group_desc(self, desc):
        self._group_desc = desc

    @property
    def group_desc(self):
        return getattr(self, "_group_desc", "")

    @property
    def comm(self):
        """The MPI communicator of this group (its ranks are the group's ranks)."""
        return self._comm

    def shutdown(self):
        """Free the group's communicator (``destroy_process_group`` calls it on every rank)."""
        comm, self._comm = self._comm, MPI.COMM_NULL
        self._scratch.clear()
        errcomm, self._errcomm = self._errcomm, None
        if errcomm is not None and not MPI.Is_finalized():
            errcomm.Free()
        if comm != MPI.COMM_NULL and not MPI.Is_finalized():
            comm.Free()

    def abort(self):
        self.shutdown()

    # -- plumbing -------------------------------------------------------------
    def _fail(self, fname, exc, nonblocking):
        """Raise ``exc`` on every rank: the others are making call ``fname``.

        This rank joins its agreement step with the error (mpicoll names the rank and its
        reason there).
        """
        # (with a timeout the others make even a blocking call as a request: see _run)
        nonblocking = nonblocking or self._timeout is not None
        if self._errcomm is not None:       # the reason, for the others' _explained
            text = bytearray(f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:_MSG])
            self._errsends = [(r, b) for r, b in self._errsends if not r.Test()]
            tag = self._failure_tag()
            for peer in range(self._size):
                if peer != self._rank:
                    self._errsends.append((self._errcomm.Isend([text, MPI.BYTE], peer, tag),
                                           text))
        call = Call(_PRIMITIVE[fname], self._comm, "start" if nonblocking else None)
        call.error = exc
        call.settle()
        raise exc                      # one rank alone (size 1): settle raised already

    def _run(self, fname, nonblocking, args, result, finish=None, like=None):
        """Call mpicoll's ``fname`` (or its ``i`` form) on this group's communicator.

        ``like``: a tensor of the call, whose device's current CUDA stream the call follows.
        """
        algorithm = self._algorithms.get(_PRIMITIVE[fname])
        if self._broken is not None:
            raise dist.DistBackendError(self._broken)
        with cuda_stream(like):
            if nonblocking or self._timeout is not None:
                # With a timeout even a blocking call runs as a request: only a wait that
                # polls can give up at the deadline (one inside MPI cannot be interrupted).
                req = _NONBLOCKING[fname](*args, comm=self._comm, algorithm=algorithm)
                work = Pending(req, result, finish, deadline=self._deadline(fname),
                               explain=self._explained)
                if nonblocking:
                    return work
                work.wait()
                return Done(result)
            _BLOCKING[fname](*args, comm=self._comm, algorithm=algorithm)
            if finish is not None:
                finish()
        return Done(result)

    def _deadline(self, fname):
        """(seconds, what timed out, on_timeout) for a call of ``fname``, or None: no timeout."""
        if self._timeout is None:
            return None
        what = (f"{fname} on process group {self.group_name or '(default)'!r} "
                f"(rank {self._rank} of {self._size})")
        return (self._timeout, what, self._mark_broken)

    def _explained(self, exc):
        """``exc`` with the failing ranks' reasons, when it is a request's "invalid arguments".

        (Read from the error duplicate: each failing rank sent its reason there, :meth:`_fail`.)
        """
        m = _INVALID.search(str(exc)) if isinstance(exc, ArgumentError) else None
        if m is None or self._errcomm is None:
            return exc
        tag = self._failure_tag()
        ranks = []
        for part in m.group(1).split(","):
            lo, _, hi = part.strip().partition("-")
            ranks += range(int(lo), int(hi or lo) + 1)
        got = []
        deadline = time.monotonic() + (self._timeout or 60)
        for r in ranks:
            buf = bytearray(_MSG)
            status = MPI.Status()
            req = self._errcomm.Irecv([buf, MPI.BYTE], r, tag)
            while not req.Test(status):
                if time.monotonic() > deadline:
                    req.Cancel()
                    return exc
                time.sleep(1e-4)
            text = bytes(buf[:status.Get_count(MPI.BYTE)]).decode("utf-8", "replace")
            got.append(f"rank {r}: {text}")
        head = str(exc).split(" (nothing was sent", 1)[0]
        return ArgumentError(f"{head} (nothing was sent) - {'; '.join(got)}",
                             exc.Get_error_class())

    def _failure_tag(self):
        """The error channel's tag of this failed call (then counted).

        Every rank counts each failed call once: the rank that failed when it sends its
        reason (:meth:`_fail`), the others when they read it (:meth:`_explained`). A reason
        no rank reads (every rank failed) keeps its own tag and is never taken for a later
        call's.
        """
        self._failures += 1
        return 1 + self._failures % 30000

    def _mark_broken(self, message):
        """A call timed out: every later call on the group raises (its messages stay posted)."""
        self._broken = (f"{message}; the process group is unusable after that timeout "
                        f"(destroy it and make a new one)")

    def _scratch_like(self, t, numel):
        """A reusable flat tensor of ``numel`` elements of ``t``'s dtype and device.

        The same object for the same shape: repeated calls keep mpicoll's memo.
        """
        key = (t.dtype, t.device, numel)
        s = self._scratch.get(key)
        if s is None:
            if len(self._scratch) > 64:
                self._scratch.clear()
            s = self._scratch[key] = torch.empty(numel, dtype=t.dtype, device=t.device)
        return s

    def _joined(self, argname, tensors, like):
        """One flat tensor holding ``tensors`` back to back.

        Their own storage when they are chunks of one tensor, else scratch (``copied``
        True: copies needed in or out).
        """
        total = sum(t.numel() for t in tensors)
        if consecutive(tensors):
            first = tensors[0]
            return torch.as_strided(first, (total,), (1,), first.storage_offset()), False
        return self._scratch_like(like, total), True

    @staticmethod
    def _one(argname, tensors):
        if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
            raise ArgumentError(f"{argname}: expected a list of one tensor (multi-device lists "
                                f"are not supported); got {describe(tensors)}")
        return tensors[0]

    def _same(self, argname, t, ref, refname):
        if not isinstance(t, torch.Tensor):
            raise ArgumentTypeError(f"{argname}: expected a torch.Tensor; got {describe(t)}")
        if t.dtype != ref.dtype:
            raise ArgumentError(f"{argname}: expected dtype {ref.dtype} (the dtype of {refname});"
                                f" got {t.dtype}", MPI.ERR_TYPE)
        if t.device != ref.device:
            raise ArgumentError(f"{argname}: expected a tensor on {ref.device} (like {refname}); "
                                f"got one on {t.device}", MPI.ERR_BUFFER)

    def _list(self, argname, tensors, like, likename, numel=None):
        """Check a list of ``size`` tensors like ``like`` (each of ``numel`` elements)."""
        if not isinstance(tensors, (list, tuple)) or len(tensors) != self._size:
            raise ArgumentError(f"{argname}: expected a list of {self._size} tensors (one per "
                                f"rank); got {describe(tensors)}")
        for i, t in enumerate(tensors):
            self._same(f"{argname}[{i}]", t, like, likename)
            if numel is not None and t.numel() != numel:
                raise ArgumentError(f"{argname}[{i}]: expected {numel} elements (as many as "
                                    f"{likename}); got {t.numel()}", MPI.ERR_COUNT)
            _tensors._check(f"{argname}[{i}]", t)

    # -- collectives -------------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            t = self._one("tensors", tensors)
            a = view("tensor", t)
        except ArgumentError as exc:
            self._fail("bcast", exc, nb)
        return self._run("bcast", nb, (a, opts.rootRank), list(tensors), like=t)

    def allreduce(self, tensors, opts=None):
        work = self._repeated.hit(tensors, opts)      # a repeated call: its program
        if work is not None:
            return work
        opts = opts or dist.AllreduceOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            t = self._one("tensors", tensors)
            if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
                return self._sparse_allreduce(t, opts, list(tensors))
            a = view("tensor", t)
            red = _ops.reduction("op", opts.reduceOp, _tensors.carrier("tensor", t))
        except ArgumentError as exc:
            self._fail("allreduce", exc, nb)
        if red.premul is not None:
            red.scale_input(t)
        finish = (lambda: red.finish(t, self._size)) if red.divide else None
        work = self._run("allreduce", nb, (MPI.IN_PLACE, a, red.op), list(tensors), finish,
                         t)
        if not nb and finish is None and red.premul is None and self._timeout is None:
            self._repeated.remember(t, opts.reduceOp, self._comm,
                                    self._algorithms.get("allreduce"), a, red.op, work)
        return work

    def _sparse_allreduce(self, t, opts, result):
        """All_reduce of a sparse COO tensor: SUM only, as gloo; completes before it returns."""
        try:
            _tensors.carrier("tensor", t)
            kind = opts.reduceOp.op if isinstance(opts.reduceOp, dist.ReduceOp) else opts.reduceOp
            if kind != dist.ReduceOp.SUM:
                raise ArgumentError(f"op: a sparse tensor is reduced by ReduceOp.SUM only (as "
                                    f"gloo does); got {kind}", MPI.ERR_OP)
            if t.dim() > _sparse.MAX_DIMS:
                raise ArgumentError(f"tensor: a sparse tensor of at most {_sparse.MAX_DIMS} "
                                    f"dimensions; got {t.dim()}", MPI.ERR_BUFFER)
            if t.device.type not in ("cpu", "cuda"):
                raise ArgumentError(f"tensor: expected a CPU or CUDA tensor; got one on "
                                    f"{t.device}", MPI.ERR_BUFFER)
        except ArgumentError as exc:
            # The other ranks' first step is the allgather of their tensors' records.
            self._fail("allgather", exc, False)
        try:
            _sparse.allreduce_sum(self._comm, t, self._algorithms.get("allgatherv"))
        except ArgumentError as exc:
            # Another rank refused its arguments: with a timeout its reason came on the error
            # channel (_fail), and is read here, not left for a later call to find.
            raise self._explained(exc) from None
        return Done(result)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or dist.AllreduceCoalescedOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            if not isinstance(tensors, (list, tuple)) or not tensors:
                raise ArgumentError(f"tensors: expected a non-empty list of tensors; got "
                                    f"{describe(tensors)}")
            for i, t in enumerate(tensors):
                self._same(f"tensors[{i}]", t, tensors[0], "tensors[0]")
                _tensors._check(f"tensors[{i}]", t)
            red = _ops.reduction("op", opts.reduceOp, _tensors.carrier("tensors[0]", tensors[0]))
            flat, copied = self._joined("tensors", tensors, tensors[0])
            a = view("tensors", flat)
        except ArgumentError as exc:
            self._fail("allreduce", exc, nb)
        if copied:
            torch.cat([t.reshape(-1) for t in tensors], out=flat)
        if red.premul is not None:
            red.scale_input(flat)

        def finish():
            red.finish(flat, self._size)
            if copied:
                off = 0
                for t in tensors:
                    t.view(-1).copy_(flat[off:off + t.numel()])
                    off += t.numel()
        return self._run("allreduce", nb, (MPI.IN_PLACE, a, red.op), list(tensors), finish,
                         tensors[0])

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        nb = getattr(opts, "asyncOp", True)
        root = opts.rootRank
        try:
            t = self._one("tensors", tensors)
            a = view("tensor", t)
            red = _ops.reduction("op", opts.reduceOp, _tensors.carrier("tensor", t))
        except ArgumentError as exc:
            self._fail("reduce", exc, nb)
        if root == self._rank:
            if red.premul is not None:
                red.scale_input(t)
            args = (MPI.IN_PLACE, a, red.op, root)
            finish = (lambda: red.finish(t, self._size)) if red.divide else None
        else:
            # Only dst's tensor is updated (torch's documented semantics): the others send
            # theirs (scaled in a copy for PREMUL_SUM) and keep it as it was.
            send = t
            if red.premul is not None:
                send = t.clone()
                red.scale_input(send)
            args = (view("tensor", send), None, red.op, root)
            finish = None
        return self._run("reduce", nb, args, list(tensors), finish, t)

    def all_gather_single(self, output, input, opts=None):
        opts = opts or dist.AllgatherOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            self._same("output_tensor", output, input, "input_tensor")
            if output.numel() != self._size * input.numel():
                raise ArgumentError(f"output_tensor: expected {self._size} x {input.numel()} "
                                    f"elements (world size x input); got {output.numel()}",
                                    MPI.ERR_COUNT)
            out = view("output_tensor", output)
            a = _inside(input, output, self._rank)
            if a is None:
                a = view("input_tensor", input)
        except ArgumentError as exc:
            self._fail("allgather", exc, nb)
        return self._run("allgather", nb, (a, out), [output], like=input)

    _allgather_base = all_gather_single

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.AllgatherOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            t = self._one("input_tensors", input_tensors)
            outs = self._one("output_tensors", output_tensors)
            a = view("tensor", t)
            self._list("tensor_list", outs, t, "tensor", t.numel())
            flat, copied = self._joined("tensor_list", outs, t)
            out = view("tensor_list", flat)
        except ArgumentError as exc:
            self._fail("allgather", exc, nb)
        finish = _scatter_back(flat, outs) if copied else None
        return self._run("allgather", nb, (a, out), list(output_tensors), finish, t)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """Gather every rank's list of tensors: ``output_lists[r][i]`` is rank r's input i.

        torch lays ``output_tensor_lists`` out by rank, then by tensor (its docstring's
        example); the inputs travel as one flat allgather of their concatenation.
        """
        opts = opts or dist.AllgatherOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            if not isinstance(input_list, (list, tuple)) or not input_list:
                raise ArgumentError(f"input_tensor_list: expected a non-empty list of tensors; "
                                    f"got {describe(input_list)}")
            ref = input_list[0]
            for i, t in enumerate(input_list):
                self._same(f"input_tensor_list[{i}]", t, ref, "input_tensor_list[0]")
                _tensors._check(f"input_tensor_list[{i}]", t)
            if not isinstance(output_lists, (list, tuple)) or len(output_lists) != self._size:
                raise ArgumentError(f"output_tensor_lists: expected a list of {self._size} "
                                    f"lists (one per rank); got {describe(output_lists)}")
            for r, outs in enumerate(output_lists):
                if not isinstance(outs, (list, tuple)) or len(outs) != len(input_list):
                    raise ArgumentError(
                        f"output_tensor_lists[{r}]: expected a list of {len(input_list)} "
                        f"tensors (one per input tensor); got {describe(outs)}")
                for i, (o, t) in enumerate(zip(outs, input_list, strict=True)):
                    name = f"output_tensor_lists[{r}][{i}]"
                    self._same(name, o, ref, "input_tensor_list[0]")
                    if o.numel() != t.numel():
                        raise ArgumentError(f"{name}: expected {t.numel()} elements (as many "
                                            f"as input_tensor_list[{i}]); got {o.numel()}",
                                            MPI.ERR_COUNT)
                    _tensors._check(name, o)
            # The send side as a fresh tensor when it must be packed: the scratch buffer
            # holds the receive side (same size at N = 1).
            send = (self._joined("input_tensor_list", input_list, ref)[0]
                    if consecutive(input_list)
                    else torch.cat([t.reshape(-1) for t in input_list]))
            outs_all = [o for outs in output_lists for o in outs]
            flat, copied = self._joined("output_tensor_lists", outs_all, ref)
            a, out = view("input_tensor_list", send), view("output_tensor_lists", flat)
        except ArgumentError as exc:
            self._fail("allgather", exc, nb)
        finish = _scatter_back(flat, outs_all) if copied else None
        return self._run("allgather", nb, (a, out), [list(x) for x in output_lists], finish,
                         ref)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        opts = opts or dist.AllgatherOptions()
        for out, t in zip(outputs, inputs, strict=False):
            self.all_gather_single(out, t, opts).wait()
        return Done(list(outputs))

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def gather(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.GatherOptions()
        nb = getattr(opts, "asyncOp", True)
        root = opts.rootRank
        flat = outs = None
        copied = False
        try:
            t = self._one("input_tensors", input_tensors)
            a = view("tensor", t)
            if not 0 <= root < self._size:
                raise ArgumentError(f"dst: expected a rank in [0, {self._size - 1}]; got {root}",
                                    MPI.ERR_ROOT)
            out = None
            if root == self._rank:
                outs = self._one("gather_list", output_tensors)
                self._list("gather_list", outs, t, "tensor", t.numel())
                flat, copied = self._joined("gather_list", outs, t)
                out = view("gather_list", flat)
        except ArgumentError as exc:
            self._fail("gather", exc, nb)
        finish = _scatter_back(flat, outs) if copied else None
        return self._run("gather", nb, (a, out, root), list(output_tensors), finish, t)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.ScatterOptions()
        nb = getattr(opts, "asyncOp", True)
        root = opts.rootRank
        send = None
        try:
            t = self._one("output_tensors", output_tensors)
            out = view("tensor", t)
            if not 0 <= root < self._size:
                raise ArgumentError(f"src: expected a rank in [0, {self._size - 1}]; got {root}",
                                    MPI.ERR_ROOT)
            if root == self._rank:
                ins = self._one("scatter_list", input_tensors)
                self._list("scatter_list", ins, t, "tensor", t.numel())
                flat, copied = self._joined("scatter_list", ins, t)
                if copied:
                    torch.cat([x.reshape(-1) for x in ins], out=flat)
                send = view("scatter_list", flat)
        except ArgumentError as exc:
            self._fail("scatter", exc, nb)
        return self._run("scatter", nb, (send, out, root), list(output_tensors),
                         like=t)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            t = self._one("output_tensors", output_tensors)
            ins = self._one("input_list", input_tensors)
            out = view("output", t)
            self._list("input_list", ins, t, "output")
            if ins[self._rank].numel() != t.numel():
                raise ArgumentError(
                    f"input_list[{self._rank}]: expected {t.numel()} elements (as many as "
                    f"output on rank {self._rank}); got {ins[self._rank].numel()}", MPI.ERR_COUNT)
            red = _ops.reduction("op", opts.reduceOp, _tensors.carrier("output", t))
            flat, copied = self._joined("input_list", ins, t)
            if copied or red.premul is not None:
                if not copied:
                    flat = self._scratch_like(t, flat.numel())
                torch.cat([x.reshape(-1) for x in ins], out=flat)
            send = view("input_list", flat)
        except ArgumentError as exc:
            self._fail("reduce_scatter", exc, nb)
        if red.premul is not None:
            red.scale_input(flat)
        counts = [x.numel() for x in ins]
        finish = (lambda: red.finish(t, self._size)) if red.divide else None
        return self._run("reduce_scatter", nb, (send, out, counts, red.op),
                         list(output_tensors), finish, t)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            self._same("input", input, output, "output")
            if input.numel() != self._size * output.numel():
                raise ArgumentError(f"input: expected {self._size} x {output.numel()} elements "
                                    f"(world size x output); got {input.numel()}", MPI.ERR_COUNT)
            red = _ops.reduction("op", opts.reduceOp, _tensors.carrier("output", output))
            send = input
            # A copy to scale (PREMUL_SUM), or to keep apart from output (MPI forbids
            # aliased buffers; torch allows output to be a block of input).
            if red.premul is not None or _overlap(input, output):
                send = input.clone()
                if red.premul is not None:
                    red.scale_input(send)
            a, out = view("input", send), view("output", output)
        except ArgumentError as exc:
            self._fail("reduce_scatter_block", exc, nb)
        finish = (lambda: red.finish(output, self._size)) if red.divide else None
        return self._run("reduce_scatter_block", nb, (a, out, red.op), [output], finish,
                         output)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        for out, t in zip(outputs, inputs, strict=False):
            self.reduce_scatter_single(out, t, opts).wait()
        return Done(list(outputs))

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def alltoall(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.AllToAllOptions()
        nb = getattr(opts, "asyncOp", True)
        try:
            if not input_tensors:
                raise ArgumentError("input_tensor_list: expected a list of tensors; got an "
                                    "empty list")
            ref = input_tensors[0]
            self._list("input_tensor_list", input_tensors, ref, "input_tensor_list[0]")
            self._list("output_tensor_list", output_tensors, ref, "input_tensor_list[0]")
            sflat, scopied = self._joined("input_tensor_list", input_tensors, ref)
            if scopied:
                torch.cat([x.reshape(-1) for x in input_tensors], out=sflat)
            rflat, rcopied = self._joined("output_tensor_list", output_tensors, ref)
            if rcopied and sflat.data_ptr() == rflat.data_ptr() and sflat.numel():
                rflat = torch.empty_like(rflat)      # both in scratch: keep them apart
            send, recv = view("input_tensor_list", sflat), view("output_tensor_list", rflat)
        except ArgumentError as exc:
            self._fail("alltoallv", exc, nb)
        scounts = [x.numel() for x in input_tensors]
        rcounts = [x.numel() for x in output_tensors]
        finish = _scatter_back(rflat, output_tensors) if rcopied else None
        return self._run("alltoallv", nb, ([send, scounts], [recv, rcounts]),
                         list(output_tensors), finish, ref)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        opts = opts or dist.AllToAllOptions()
        nb = getattr(opts, "asyncOp", True)
        n = self._size
        try:
            self._same("output", output, input, "input")
            send, recv = view("input", input), view("output", output)
            equal = not output_split_sizes and not input_split_sizes
            if equal and (input.numel() % n or output.numel() != input.numel()):
                raise ArgumentError(
                    f"input: expected as many elements as output, divisible by the world "
                    f"size {n}; got {input.numel()} and {output.numel()}", MPI.ERR_COUNT)
            if not equal:
                scounts = _split_counts("input_split_sizes", input_split_sizes, input, n)
                rcounts = _split_counts("output_split_sizes", output_split_sizes, output, n)
        except ArgumentError as exc:
            # Both forms agree through the same step: every rank names the same call.
            self._fail("alltoall" if not output_split_sizes and not input_split_sizes
                       else "alltoallv", exc, nb)
        if equal:
            return self._run("alltoall", nb, (send, recv), [output], like=input)
        return self._run("alltoallv", nb, ([send, scounts], [recv, rcounts]), [output],
                         like=input)

    alltoall_base = all_to_all_single

    def barrier(self, opts=None):
        opts = opts or dist.BarrierOptions()
        return self._run("barrier", getattr(opts, "asyncOp", True), (), None)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """A barrier that names the ranks that did not arrive in time, as gloo's does.

        See :mod:`._monitored`; raises :class:`._monitored.MonitoredBarrierError` (a
        ``RuntimeError`` and an :class:`mpicoll.BarrierTimeoutError`).
        """
        _monitored.monitored_barrier(self._comm, timeout, wait_all_ranks)
        return Done(None)

    # -- point to point ------------------------------------------------------
    def send(self, tensors, dst, tag=0):
        t = self._one("tensors", tensors)
        a = view("tensor", t)
        if t.device.type == "cuda":
            t.record_stream(torch.cuda.current_stream(t.device))
            a = t.detach().cpu().reshape(-1)
            a = (a.view(_tensors.carrier("tensor", t).view_as)).numpy()
        return Pending([self._comm.Isend(a, dst, tag)], list(tensors))

    def recv(self, tensors, src, tag=0):
        return self._irecv(tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._irecv(tensors, MPI.ANY_SOURCE, tag)

    def _irecv(self, tensors, src, tag):
        t = self._one("tensors", tensors)
        a = view("tensor", t)
        finish = None
        if t.device.type == "cuda":
            host = torch.empty(t.numel(), dtype=t.dtype)
            a = host.view(_tensors.carrier("tensor", t).view_as).numpy()

            def finish():
                t.view(-1).copy_(host)
        status = [MPI.Status()]
        return Pending([self._comm.Irecv(a, src, tag)], list(tensors), finish, status)


def _overlap(a, b):
    """True when tensors ``a`` and ``b`` share bytes of one storage."""
    if a.device != b.device or not a.numel() or not b.numel():
        return False
    try:
        if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
            return False
    except RuntimeError:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _inside(input, output, rank):
    """``MPI.IN_PLACE`` when ``input`` is ``output``'s block of ``rank``; None if apart.

    The block is torch's in-place all_gather_into_tensor, as FSDP2 calls it. Any other overlap
    raises :class:`mpicoll.ArgumentError` (MPI forbids aliased buffers).
    """
    if not _overlap(input, output):
        return None
    if (input.is_contiguous() and output.is_contiguous() and input.dtype == output.dtype
            and input.data_ptr() == output.data_ptr() + rank * input.numel()
            * input.element_size()):
        return MPI.IN_PLACE
    raise ArgumentError(f"input_tensor: overlaps output_tensor other than as its block of rank "
                        f"{rank} (the in-place form); MPI forbids aliased buffers",
                        MPI.ERR_BUFFER)


def _scatter_back(flat, tensors):
    """The step that copies ``flat``'s consecutive blocks into ``tensors``."""
    def finish():
        off = 0
        for t in tensors:
            n = t.numel()
            t.view(-1).copy_(flat[off:off + n])
            off += n
    return finish


def _split_counts(argname, splits, t, n):
    """Split sizes along dim 0 as element counts per rank (torch's all_to_all_single)."""
    rows = t.shape[0] if t.dim() else 1
    per_row = t.numel() // rows if rows else 0
    if not splits:
        if rows % n:
            raise ArgumentError(f"{argname}: not given, so dim 0 ({rows}) must divide by the "
                                f"world size {n}", MPI.ERR_COUNT)
        return [rows // n * per_row] * n
    splits = list(splits)
    if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ArgumentError(f"{argname}: expected {n} non-negative sizes summing to dim 0 "
                            f"({rows}); got {splits}", MPI.ERR_COUNT)
    return [s * per_row for s in splits]
