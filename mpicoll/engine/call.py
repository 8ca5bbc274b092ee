"""One collective call: validate, agree, choose the algorithm, run.

Every public face (functional API, :class:`P2PComm`, ``mpicoll.distributed``)
goes through :class:`Call`, the single layer that checks user input::

    call = Call("allreduce", comm)
    with call.checking():           # ArgumentError here is held, not raised
        ...validate buffers, op, root...
        fn = call.choose(algorithm, op=op, nbytes=..., count=..., dtype=..., root=...)
    call.settle()                   # every rank raises if any rank failed
    fn(call.ctx(count, itemsize), ...)

``settle`` makes a rank-local error (say, a too-small recvbuf on the root)
raise on every rank instead of leaving the others waiting in the algorithm.
Its one communication is a native ``Allgather`` of a 128-byte fingerprint
per rank on the private communicator (see :mod:`mpicoll.engine.fingerprint`); a
nonblocking call's is an ``Iallgather``, judged when its request first advances.

Modes (``MPICOLL_CHECK``, or per communicator with :func:`set_check`):

- ``agree`` (default; ``MPICOLL_CHECK`` unset or ``agree``): argument errors
  on any rank raise on every rank; ranks that call different collectives,
  pick different algorithms for one call (say, a per-rank
  ``MPICOLL_ALLREDUCE_ALGORITHM``) or pass a different op, dtype, count or
  root raise :class:`CollectiveMismatchError` on every rank, naming every
  field that differs.
- ``checked`` (``MPICOLL_CHECK=1``, ``checked``, ``on``): additionally, the
  ranks compare recvcounts and the call's sequence number on the
  communicator; any difference raises
  :class:`CollectiveMismatchError` with the same message on every rank
  (naming the ranks and values that disagree) instead of the deadlock or
  silent truncation MPI gives. It costs no extra message: the fingerprint is
  exchanged in ``agree`` mode too, checked mode only compares it. If any one
  rank is in checked mode, every rank compares.
- ``local`` (``MPICOLL_CHECK=0``, ``local``, ``off``): no agreement step; a
  rank with bad arguments raises alone (the others may then wait forever).
  Only safe when every rank uses ``local`` and arguments are known good.

The agreement cannot hang as long as every rank enters *some* mpicoll
collective of the same kind on the communicator: all blocking calls (and
persistent ``..._init`` calls), whatever the primitive, go through the same
Allgather, all nonblocking calls through the same Iallgather. The fingerprint
names the call with its face (``allreduce``, ``allreduce_init``), so a
blocking call against a persistent one raises :class:`CollectiveMismatchError`
on every rank. MPI never matches a blocking collective with a nonblocking one,
so a blocking call on one rank against a nonblocking one on another waits, as
plain MPI would. (Agreeing through one Iallgather for every call would catch
that too, but it made every small blocking call ~2 µs slower:
benchmarks/latency.md.)
"""
import contextlib
import os

import numpy as np
from mpi4py import MPI

from ..args.user_ops import native_refusal
from ..core.defaults import default_algorithm
from ..core.env import getenv
from ..core.errors import ArgumentError, ArgumentTypeError, describe
from ..core.registry import algorithms, env_choice, lookup
from ..core.topology import layout
from ..device import ipc as _ipc
from ..device.arrays import adapter_of, host_copy_max, speaks_ipc
from ..sched.record import PlanCache
from . import fingerprint as fpr
from . import nonblocking as _nb
from .context import _TAG, Ctx, existing_private_comm, private_comm
from .fingerprint import CollectiveMismatchError
from .nonblocking import keep_until_complete

__all__ = ["Call", "refusal", "usable_algorithms", "check_mode", "set_check", "get_check",
           "ipc_flags", "next_request_tag",
           "CollectiveMismatchError"]

_MODES = {"": "agree", "agree": "agree",
          "0": "local", "local": "local", "off": "local", "false": "local", "no": "local",
          "1": "checked", "checked": "checked", "on": "checked", "true": "checked",
          "yes": "checked"}
_MSG = 1024   # bytes of error text exchanged per rank when a call fails
# Tags on the private communicator: blocking calls use _TAG (0x6D63); each
# nonblocking call takes the next tag of one range, each persistent request
# the next of another (they wrap: at most that many may be outstanding).
_NB_TAGS = (1, 20000)
_PERSISTENT_TAGS = (20000, 28000)


def check_mode(comm=None):
    """The mode in force: ``agree``, ``checked`` or ``local``.

    ``comm``'s own setting (:func:`set_check`) when it has one, else
    ``MPICOLL_CHECK``. A junk ``MPICOLL_CHECK`` raises :class:`ArgumentError`.
    """
    if comm is not None:
        # Only look: creating the private communicator is collective, and this
        # query may be made on one rank alone.
        pcomm = existing_private_comm(_as_comm(comm))
        mode = _state(pcomm).mode if pcomm is not None else None
        if mode is not None:
            return mode
    mode = env_mode()
    if mode is None:
        raw = os.environ.get("MPICOLL_CHECK", "").strip().lower()
        raise ArgumentError(
            "MPICOLL_CHECK: expected one of agree, checked (or 1, on), local (or 0, off), "
            f"or unset; got {raw!r}")
    return mode


def env_mode():
    """The mode ``MPICOLL_CHECK`` asks for (unset: ``agree``); None for a junk value."""
    raw = getenv("MPICOLL_CHECK", "")
    mode = _env_modes.get(raw, _UNSEEN)
    if mode is _UNSEEN:
        mode = _env_modes[raw] = _MODES.get(raw.strip().lower())
    return mode


_env_modes = {}          # raw MPICOLL_CHECK -> mode (read at every call: parsed once per value)
_UNSEEN = object()


def set_check(comm, mode):
    """Set the check mode of one communicator; return the previous setting.

    ``mode``: ``"checked"`` (or True), ``"agree"`` (or False), ``"local"``,
    or None to follow ``MPICOLL_CHECK`` again. The setting belongs to the
    MPI communicator: a :class:`mpicoll.P2PComm` shares its base
    communicator's handle, so ``set_check(P2PComm(MPI.COMM_WORLD), True)``
    also checks functional calls on COMM_WORLD; set it on a ``Dup()`` to scope
    it. Call it on every rank (``local`` on some ranks only can hang).
    """
    if mode is True:
        mode = "checked"
    elif mode is False:
        mode = "agree"
    elif mode is not None:
        if not isinstance(mode, str) or mode.strip().lower() not in _MODES or not mode.strip():
            raise ArgumentError(
                "mode: expected 'checked', 'agree', 'local', True, False or None; "
                f"got {describe(mode)}")
        mode = _MODES[mode.strip().lower()]
    state = _state(private_comm(_as_comm(comm)))
    old, state.mode = state.mode, mode
    return old


def get_check(comm=None):
    """The effective mode of ``comm`` (default COMM_WORLD)."""
    return check_mode(_as_comm(comm))


def _as_comm(comm):
    if comm is None:
        return MPI.COMM_WORLD
    if isinstance(comm, MPI.Comm) and comm == MPI.COMM_NULL:
        raise ArgumentError("comm: expected a valid intracommunicator; got MPI.COMM_NULL",
                            MPI.ERR_COMM)
    if not isinstance(comm, MPI.Intracomm):
        kind = "an intercommunicator" if isinstance(comm, MPI.Intercomm) else describe(comm)
        raise ArgumentTypeError(
            f"comm: expected an mpi4py.MPI.Intracomm (e.g. MPI.COMM_WORLD); got {kind}",
            MPI.ERR_COMM)
    if comm == MPI.COMM_NULL:
        raise ArgumentError("comm: expected a valid intracommunicator; got MPI.COMM_NULL",
                            MPI.ERR_COMM)
    return comm


def ipc_flags(ipc):
    """The fingerprint flags of a call through the ipc protocol (``ipc``), else 0.

    FLAG_IPC and the eager limit every rank of a node must share.
    """
    if not ipc:
        return 0
    return fpr.FLAG_IPC | (min(_ipc.EAGER_MAX, 1 << 40) << fpr.IPC_EAGER_SHIFT)


def next_request_tag(state):
    """The tag of the next nonblocking call on the communicator of ``state``.

    Its own, the same on every rank: calls come in the same order.
    """
    tag = _NB_TAGS[0] + state.nb_seq % (_NB_TAGS[1] - _NB_TAGS[0])
    state.nb_seq += 1
    return tag


def allgather(pcomm, mine, raw, kind):
    """Every rank's fingerprint ``mine`` into ``raw``, waiting for it.

    A nonblocking call's (``kind`` "start": the v-collectives' count exchange) is
    a nonblocking collective, as the agreement of any other nonblocking call is:
    where another rank made a different nonblocking call, the two meet and are
    judged a mismatch instead of a blocking and a nonblocking collective waiting
    for each other. While it waits, this rank's requests in flight advance: a peer
    may wait for their next rounds before it makes this call (MPI allows
    ``r1 = ialltoall(); r1.Wait(); r2 = igatherv()`` there while this rank made
    both calls before waiting for either).
    """
    if kind != "start":
        pcomm.Allgather([mine, MPI.BYTE], [raw, MPI.BYTE])
        return
    req = pcomm.Iallgather([mine, MPI.BYTE], [raw, MPI.BYTE])
    while _nb._active and not req.Test():
        _nb.progress()
    req.Wait()


class _CommState:
    """Per-communicator state, cached on the private communicator."""

    __slots__ = ("seq", "mode", "raw", "plans", "nb_seq", "p_seq")

    def __init__(self, size, layout=None):
        self.plans = PlanCache(layout)   # recorded schedules and their scratch (mpicoll.sched)
        self.nb_seq = 0              # nonblocking calls made (their tags)
        self.p_seq = 0               # persistent requests made (their tags)
        self.seq = 0                 # collective calls made on this communicator (this rank)
        self.mode = None             # set_check() override, else MPICOLL_CHECK
        self.raw = bytearray(size * fpr.L * 8)   # every rank's fingerprint, gathered


_keyval = None


def _state(pcomm):
    global _keyval
    if _keyval is None:
        _keyval = MPI.Comm.Create_keyval()
    st = pcomm.Get_attr(_keyval)
    if st is None:
        st = _CommState(pcomm.Get_size(), layout(pcomm))
        pcomm.Set_attr(_keyval, st)
    return st



def refusal(fn, pcomm, commutative=True, on_device=False):
    """Why algorithm ``fn`` cannot run a call on ``pcomm``'s nodes and memory (None: it can).

    The shm algorithms across nodes or on device arrays, hierarchical ones with a
    non-commutative op on nodes that are not blocks of consecutive ranks.
    """
    check_layout = getattr(fn, "check_layout", None)
    if check_layout is not None:
        why = check_layout(layout(pcomm), commutative)
        if why:
            return why
    if on_device and getattr(fn, "host_only", False):
        return (f"algorithm: {fn.primitive} algorithm {fn.algorithm!r} runs on host memory "
                f"only; got arrays on a device")
    return None


def usable_algorithms(primitive, comm=None, device=False, commutative=True):
    """The algorithms of ``primitive`` that can run a call on ``comm``.

    ``comm``: default ``MPI.COMM_WORLD``. They run on its nodes, on device arrays when
    ``device``, with a non-commutative op unless ``commutative``. Collective the first time
    ``comm`` is used by mpicoll (its private duplicate is made).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    pcomm = private_comm(comm)
    out = []
    for name in algorithms(primitive):
        fn = lookup(primitive, name)
        if not commutative and fn.commutative_only:
            continue
        if refusal(fn, pcomm, commutative, device) is None:
            out.append(name)
    return tuple(out)

class Call:
    """The state of one collective call on one rank."""

    __slots__ = ("primitive", "comm", "pcomm", "rank", "size", "error", "algorithm",
                 "desc", "state", "kind", "pending", "tag", "request", "memo", "ipc",
                 "host_copy", "given", "exchanged")

    def __init__(self, primitive, comm, kind=None, tag=None):
        """``tag``: a nonblocking call's tag, already taken (:func:`next_request_tag`)."""
        #: None (blocking), "start" (nonblocking) or "init" (persistent)
        self.kind = kind
        if kind is None and _nb._active:
            _nb.before_blocking()      # requests in flight advance while this call blocks
        self.pending = None          # (Iallgather request, every fingerprint, mine)
        self.request = None          # the nonblocking/persistent request the call made
        self.memo = None             # a list to receive (steps, prologue) for mpicoll.engine.memo
        self.given = None            # (values, gathered) of an exchange the memo made already
        self.exchanged = None        # (this rank's value, gathered fingerprints) for the memo
        self.ipc = False             # device buffers through the ipc protocol (set by choose)
        self.host_copy = False       # a small device call run on host copies (choose)
        self.tag = _TAG
        self.primitive = primitive
        self.comm = _as_comm(comm)
        self.pcomm = private_comm(self.comm)
        self.rank = self.pcomm.Get_rank()
        self.size = self.pcomm.Get_size()
        self.error = None
        self.algorithm = None
        self.desc = None
        self.state = _state(self.pcomm)
        if kind is not None:
            # Each outstanding request has a tag of its own, so several run at
            # once; identical on every rank (calls come in the same order).
            st = self.state
            if kind == "init":
                first, end = _PERSISTENT_TAGS
                self.tag = first + st.p_seq % (end - first)
                st.p_seq += 1
            else:
                self.tag = next_request_tag(st) if tag is None else tag

    @contextlib.contextmanager
    def checking(self):
        """Hold any exception raised by validation until :meth:`settle`."""
        try:
            yield self
        except Exception as exc:      # re-raised in settle()
            self.error = exc

    @property
    def name(self):
        """The call's name with its face, as its fingerprint and messages give it.

        ``allreduce``, ``iallreduce``, ``allreduce_init``.
        """
        return fpr.face_name(self.primitive, self.kind)

    def settle(self):
        """Raise on every rank if validation failed on any rank (or, checked, if calls differ)."""
        self._agree(fpr.SETTLE, 0)

    def exchange(self, value):
        """Agree on errors held so far and return every rank's ``value`` (an int).

        For arguments that must be known before validation can finish
        (``Reduce_scatter``'s recvcounts taken from each rank's recvbuf).
        It uses the same fingerprint Allgather as :meth:`settle`, so a rank
        that meanwhile called another collective raises instead of hanging.
        The memo (:mod:`mpicoll.engine.memo`) remembers a call that exchanged with the
        fingerprints gathered here, and replays the exchange before the agreement:
        where a rank sent something else, the replaying rank goes on along the full
        path from here with the values its replay gathered (``given``).
        """
        given = self.given
        if given is not None:
            self.given = None
            values, gathered = given
        else:
            values = self._agree(fpr.EXCHANGE, int(value))
            gathered = None
        if self.memo is not None:
            if gathered is None and self.size > 1:
                gathered = fpr.matrix(self.state.raw, self.size)
            self.exchanged = (int(value), gathered)
        return values

    def _agree(self, phase, payload):
        err = self.error
        state = self.state
        mode = state.mode
        if mode is None:
            try:
                mode = check_mode()
            except ArgumentError as exc:   # junk MPICOLL_CHECK: agreed like any argument error
                mode = "agree"
                if err is None:
                    err = self.error = exc
        seq = state.seq
        if phase == fpr.SETTLE:
            state.seq = seq + 1
            if mode == "local" or self.size == 1:
                if err is not None:
                    raise err
                return None
        elif self.size == 1:
            if err is not None:
                raise err
            return [payload]
        flags = (fpr.FLAG_ERROR if err is not None else 0) | (
            fpr.FLAG_CHECKED if mode == "checked" else 0) | ipc_flags(self.ipc) | \
            fpr.face_flags(self.kind)
        mine = fpr.build_bytes(phase, seq, self.name, flags,
                               self.desc if phase == fpr.SETTLE else None, payload)
        if self.kind == "start" and phase == fpr.SETTLE:
            # A nonblocking call must not wait for the others here: the
            # fingerprints travel by Iallgather and are judged when the
            # request first advances (the plan starts only after that).
            raw = bytearray(len(state.raw))
            req = self.pcomm.Iallgather([mine, MPI.BYTE], [raw, MPI.BYTE])
            self.pending = (req, raw, mine)
            if err is not None:
                keep_until_complete(req, raw, mine)
                raise err
            return None
        raw = state.raw
        # Infrastructure, not an algorithm: the library's own allgather of 16 int64.
        allgather(self.pcomm, mine, raw, self.kind)
        return self.judge(raw, mine, phase)

    def judge(self, raw, mine, phase=fpr.SETTLE):
        """Compare every rank's fingerprint (``raw``) with this rank's (``mine``).

        Raise on any difference.
        """
        err = self.error
        if err is None and phase == fpr.SETTLE and raw == mine * self.size:
            return None            # fast path: the same call everywhere, no error anywhere
        every = fpr.matrix(raw, self.size)
        checked = fpr.any_checked(every)
        if fpr.all_agree(every, checked):
            self._check_ipc(every)
            return fpr.payloads(every) if phase == fpr.EXCHANGE else None
        diffs = fpr.differences(every, checked)
        if diffs and not checked:
            # Agree mode saw a different primitive or algorithm: name every field
            # that differs (a count mismatch often makes 'auto' pick differently).
            diffs = fpr.differences(every, True) or diffs
        # The call fails on every rank: resynchronise the call numbers so that
        # one mismatch does not make every later call mismatch too.
        self._resync(every)
        if not np.any(every[:, fpr.C_FLAGS] & fpr.FLAG_ERROR):
            if not diffs:
                self._check_ipc(every)
                return fpr.payloads(every) if phase == fpr.EXCHANGE else None
            raise CollectiveMismatchError(fpr.mismatch_message(every, diffs), diffs[0][1], diffs)
        if self.kind == "start":
            # The failing rank raised when it made the call and exchanges no
            # messages: name it from the flags alone.
            failed = [r for r in range(self.size) if every[r, fpr.C_FLAGS] & fpr.FLAG_ERROR]
            raise ArgumentError(
                f"mpicoll.{self.name}: invalid arguments on rank(s) {fpr.ranks_text(failed)} "
                f"(nothing was sent; the error was raised there when the call was made)")
        self._raise_errors(err, diffs, every)

    def _resync(self, every):
        """After a failed call: number it as the furthest rank did and count it.

        Also where it failed before it was counted, in an exchange, so that the ranks'
        next calls have the same number -- keeping the calls this rank made since: a
        nonblocking call is judged when its request first advances, which may be after
        this rank made later calls.

        Where other ranks made a persistent ``_init`` call and this rank a blocking
        one, take the persistent request tag they took for it, so that the ranks'
        next persistent requests pair up again.
        """
        state = self.state
        seqs = every[:, fpr.C_SEQ]
        later = max(0, state.seq - int(seqs[self.rank]) - 1)
        state.seq = int(seqs.max()) + 1 + later
        if self.kind is None and np.any(every[:, fpr.C_FLAGS] & fpr.FLAG_PERSISTENT):
            state.p_seq += 1

    def _check_ipc(self, every):
        """Raise on every rank if the ranks of a node disagree on the ipc protocol.

        That is, if some ranks of a node would send device buffers through the ipc
        protocol and others of that node would not, or would with another eager limit
        (``MPICOLL_IPC_EAGER``): headers would never be matched or be truncated (a hang, or
        an error on some ranks). Every rank judges the same matrix, so all raise alike.
        """
        flags = every[:, fpr.C_FLAGS]
        bits = (flags & fpr.FLAG_IPC) != 0
        if not bits.any():
            return
        eager = flags >> fpr.IPC_EAGER_SHIFT
        for ranks in layout(self.pcomm).members:
            on = [r for r in ranks if bits[r]]
            if not on:
                continue
            limits = {int(eager[r]) for r in on}
            if len(on) == len(ranks) and len(limits) == 1:
                continue
            self._resync(every)          # as after a mismatch
            if len(on) == len(ranks):
                groups = {}
                for r in on:
                    groups.setdefault(f"{int(eager[r])} bytes", []).append(r)
                raise CollectiveMismatchError(
                    f"mpicoll.{self.name}: the ranks of one node send device buffers "
                    f"through the ipc transport with different eager limits "
                    f"(MPICOLL_IPC_EAGER: "
                    + "; ".join(f"{k} on rank(s) {fpr.ranks_text(v)}" for k, v in groups.items())
                    + "): set the same value on every rank (nothing was sent)",
                    MPI.ERR_OTHER, [("ipc eager limit", MPI.ERR_OTHER, groups)])
            off = [r for r in ranks if not bits[r]]
            raise CollectiveMismatchError(
                f"mpicoll.{self.name}: on one node, rank(s) {fpr.ranks_text(on)} would "
                f"move device buffers through the ipc transport and rank(s) "
                f"{fpr.ranks_text(off)} would not (host buffers, another "
                f"MPICOLL_GPU_TRANSPORT or no CUDA IPC there): they could not talk. Pass "
                f"the same kind of buffer on every rank of a node, or choose "
                f"MPICOLL_GPU_TRANSPORT=staged (or aware) on every rank (nothing was sent)",
                MPI.ERR_OTHER, [("transport", MPI.ERR_OTHER, {"ipc": on, "not ipc": off})])

    def _raise_errors(self, err, diffs, fps):
        """Some rank failed validation: exchange the messages; raise everywhere."""
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
        ranks = fpr.ranks_text([r for r, _, _ in failed])
        detail = "; ".join(f"rank {r}: {t}" for r, _, t in failed)
        prims = fpr.primitives(fps)
        what = f"mpicoll.{prims[0]}" if len(set(prims)) == 1 else "mpicoll"
        also = ""
        if diffs:
            also = (" | and the calls do not match: "
                    + fpr.mismatch_message(fps, diffs).split(" - ", 1)[1])
        raise ArgumentError(
            f"{what}: invalid arguments on rank(s) {ranks} "
            f"(nothing was sent) - {detail}{also}", failed[0][1])

    def choose(self, name=None, *, op=None, nbytes=0, count=0, dtype=None, root=None,
               counts=None, like=()):
        """Resolve the algorithm: argument, then MPICOLL_<P>_ALGORITHM, then auto.

        ``op``, ``count`` (elements each rank contributes or receives as a
        block; equal on every rank), ``dtype``, ``root`` and ``counts``
        (reduce_scatter's recvcounts) also describe the call for checked mode.
        ``like``: the call's arrays, first the one whose memory the transport
        follows (None where a rank has none): small calls on device arrays run on
        host copies (:func:`mpicoll.device.arrays.host_copy_max`),
        others through the ipc transport are flagged for the agreement step.
        """
        primitive = self.primitive
        arr = next((a for a in like if a is not None), None)
        if name is None:
            name = env_choice(primitive) or "auto"
        elif not isinstance(name, str):
            raise ArgumentTypeError(
                f"algorithm: expected a name, one of {', '.join(algorithms(primitive))} "
                f"or 'auto'; got {describe(name)}")
        commutative = True if op is None else op.is_commutative
        auto = name == "auto"
        adapter = None if arr is None else adapter_of(arr)
        if auto:
            name = default_algorithm(primitive, size=self.size, nbytes=nbytes,
                                     count=count, commutative=commutative,
                                     one_node_host=adapter is None
                                     and layout(self.pcomm).n_nodes == 1)
        refused = native_refusal(primitive, op) if name == "native" else None
        if refused:
            if not auto:
                raise ArgumentError(refused, MPI.ERR_OP)
            name = next(n for n in algorithms(primitive) if n != "native"
                        and (commutative or not lookup(primitive, n).commutative_only)
                        and getattr(lookup(primitive, n), "check_layout", None) is None)
        fn = lookup(primitive, name)
        if fn.commutative_only and not commutative:
            capable = [n for n in algorithms(primitive)
                       if not lookup(primitive, n).commutative_only]
            raise ArgumentError(
                f"algorithm: {primitive} algorithm {name!r} combines data out of rank order "
                f"and needs a commutative op; got a non-commutative user op. "
                f"Algorithms that keep rank order: {', '.join(capable)}", MPI.ERR_OP)
        why = refusal(fn, self.pcomm, commutative, adapter is not None)
        if why and auto:
            # A tuning table measured elsewhere named an algorithm that cannot run this
            # call here (node-aware on these nodes, host-only on device arrays): auto
            # takes the rules' choice.
            name = default_algorithm(primitive, size=self.size, nbytes=nbytes,
                                     count=count, commutative=commutative, table=False)
            fn = lookup(primitive, name)
        elif why:
            raise ArgumentError(why, MPI.ERR_OP)
        self.algorithm = name
        self.desc = (name, op, dtype, count, root, counts)
        # Small calls on device arrays run on host copies (plain MPI messages, as the
        # staged and aware transports send: any of them may meet on one call).
        self.host_copy = (adapter is not None and name != "native"
                          and 0 < nbytes <= host_copy_max())
        # Native collectives and empty calls send nothing through the ipc protocol (the
        # former go to the fallback transport): any mix of buffers is fine for them.
        self.ipc = (adapter is not None and name != "native" and count > 0
                    and not self.host_copy and speaks_ipc(adapter))
        return fn

    def ctx(self, count=0, itemsize=0, adapter=None, device=None):
        """A :class:`Ctx` for this call's algorithm on its private communicator."""
        return Ctx(self.pcomm, self.primitive, self.algorithm, count, itemsize, adapter, device,
                   self.tag, self.kind is not None)
