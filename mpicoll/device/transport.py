"""How device messages reach MPI: the CUDA-aware and staged transports, and the choice.

The point-to-point layer hands MPI a *transport* instead of the bare
communicator (same method names and signatures as ``MPI.Comm``); see
:mod:`mpicoll.device.arrays` for the paths. Here: whether MPI is CUDA-aware
(:func:`cuda_aware_decision`, :func:`collectives_aware`), :class:`AwareTransport`,
:class:`StagedTransport` (through :mod:`mpicoll.device.arena`), which one a call
gets (:func:`transport`, :func:`set_transport`, :func:`transport_choice`) and
what a memoized call's transport rests on (:func:`transport_key`). The ``ipc``
transport (:mod:`mpicoll.device.ipc`) registers itself in :data:`IPC`.
"""
import os

from mpi4py import MPI

from .arena import PinnedArena, arena_for, thread_arenas
from .cuda_probe import cuda_aware_report

__all__ = ["transport", "AwareTransport", "StagedTransport", "set_cuda_aware",
           "cuda_aware_decision", "collectives_aware", "LIBRARY_SOURCES", "set_transport",
           "transport_choice", "ipc_support", "speaks_ipc", "host_copy_max", "HOST_COPY_MAX",
           "env_bytes", "transport_key", "TRANSPORTS", "KEY_PARTS", "IPC"]


# -- CUDA awareness (decided once per process unless overridden) -----------

_aware_override = None
_aware_decision = None     # (aware, what decided), from the probes, cached


def set_cuda_aware(value):
    """Force the device path: True (pass device pointers), False (stage), None (detect again).

    None reads ``MPICOLL_CUDA_AWARE`` and the probes anew.
    """
    global _aware_override, _aware_decision
    if value not in (None, True, False):
        from ..core.errors import ArgumentTypeError, describe
        raise ArgumentTypeError(f"value: expected True, False or None; got {describe(value)}")
    _aware_override = value
    _aware_decision = None


def cuda_aware_decision():
    """(aware, source): what device buffers get.

    ``set_cuda_aware``, else the probes (``MPICOLL_CUDA_AWARE`` first), run once and
    cached (they cost an MPI info query).
    """
    global _aware_decision
    if _aware_override is not None:
        return _aware_override, "mpicoll.gpu.set_cuda_aware"
    if _aware_decision is None:
        rep = cuda_aware_report()
        _aware_decision = (rep["cuda_aware"], rep["source"])
    return _aware_decision


#: What decided a CUDA-aware path when the MPI library itself says so: its
#: own collectives then take device buffers too.
LIBRARY_SOURCES = ("MPIX_Query_cuda_support", "mpi_memory_alloc_kinds")


def collectives_aware():
    """(aware, source): whether the MPI library's *own collectives* may take device buffers.

    Decided apart from point-to-point: a library whose point-to-point layer
    moves device memory (MPICH over UCX with CUDA transports, switched on with
    ``MPICOLL_CUDA_AWARE=1``) may still reduce on the CPU in its collectives
    and crash on a device pointer. ``MPICOLL_CUDA_AWARE_COLLECTIVES=0|1``
    decides; else only a library that reports CUDA support itself
    (``MPIX_Query_cuda_support``, ``mpi_memory_alloc_kinds``) is trusted with
    them. Otherwise ``native`` on device buffers is staged, on any path.
    """
    import os
    raw = os.environ.get("MPICOLL_CUDA_AWARE_COLLECTIVES", "").strip().lower()
    if raw in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        return raw in ("1", "true", "yes", "on"), "MPICOLL_CUDA_AWARE_COLLECTIVES"
    aware, source = cuda_aware_decision()
    if aware and source in LIBRARY_SOURCES:
        return True, source
    if not aware:
        return False, source
    return False, f"point-to-point only ({source}); MPICOLL_CUDA_AWARE_COLLECTIVES=1 to trust " \
                  f"the library's collectives with device buffers"

# -- transports -------------------------------------------------------------

# Positions of receive buffers in the native collectives' argument lists.
_OUTPUTS = {"Bcast": (0,), "Reduce": (1,), "Allreduce": (1,), "Gather": (1,),
            "Allgather": (1,), "Scatter": (1,), "Reduce_scatter": (1,),
            "Reduce_scatter_block": (1,), "Alltoall": (1,)}
_REDUCING = ("Reduce", "Allreduce", "Reduce_scatter", "Reduce_scatter_block")


class _Requests:
    """What the progress engine (:mod:`mpicoll.engine.nonblocking`) asks of a transport.

    MPI completes these transports' requests on its own: ``test`` is a
    ``Testall`` plus :meth:`finish`, and a waiter may block in MPI on them.
    (The ``ipc`` transport answers its peers' headers itself: it overrides
    all three.)
    """

    #: True: MPI completes the requests without this rank's help (Waitall on them is safe).
    passive = True

    def test(self, requests):
        """Advance; True (received data in place) once every one of ``requests`` is complete."""
        if not MPI.Request.Testall(requests):
            return False
        self.finish(requests)
        return True

    def pending(self, requests):
        """The MPI requests to poll while waiting for ``requests``."""
        return requests

    def finish(self, requests):
        pass

    def reset(self):
        """A blocking call starts on this transport again (its memoized steps replay)."""


class AwareTransport(_Requests):
    """CUDA-aware MPI: synchronise, then pass device arrays through."""

    path = "cuda-aware"

    @property
    def native_path(self):
        """How the MPI library's own collectives get device arrays.

        See ``__getattr__``: a reduction with a user op is staged even where this says
        cuda-aware, and a recorded call's path is set so as it runs.
        """
        return "cuda-aware" if collectives_aware()[0] else "staged"

    def __init__(self, comm, adapter, device, requests=False):
        self.comm = comm
        self.adapter = adapter
        self.device = device
        self.requests = requests
        self.staged = None
        self.rec = None

    def record(self, rec):
        """A recorded call (``mpicoll.traffic``): a native one staged after all says so."""
        self.rec = rec

    def Send(self, buf, dest, tag):
        """Synchronise, then send the device array."""
        self.adapter.sync()
        self.comm.Send(buf, dest, tag)

    def Recv(self, buf, source, tag):
        """Synchronise, then receive into the device array."""
        self.adapter.sync()
        self.comm.Recv(buf, source, tag)

    def Sendrecv(self, sbuf, dest, stag, rbuf, source, rtag):
        """Synchronise, then send and receive device arrays."""
        self.adapter.sync()
        self.comm.Sendrecv(sbuf, dest, stag, rbuf, source, rtag)

    def Isend(self, buf, dest, tag):
        """Synchronise, then post a send of the device array."""
        self.adapter.sync()
        return self.comm.Isend(buf, dest, tag)

    def Irecv(self, buf, source, tag):
        """Synchronise, then post a receive into the device array."""
        self.adapter.sync()
        return self.comm.Irecv(buf, source, tag)

    def waitall(self, requests):
        """Complete ``requests``."""
        MPI.Request.Waitall(requests)

    def reset(self):
        """A blocking call starts on this transport again (its staged fallback is reset too)."""
        if self.staged is not None:
            self.staged.reset()

    def __getattr__(self, name):
        # Native collectives. A user op's Python function runs on the host and
        # would dereference device pointers: those reductions are staged, and so
        # is every collective of a library that is CUDA-aware in point-to-point
        # only (collectives_aware).
        method = getattr(self.comm, name)

        def run(*args):
            self.adapter.sync()
            if not collectives_aware()[0] or (
                    name in _REDUCING and any(isinstance(a, MPI.Op) and not a.is_predefined
                                              for a in args)):
                if self.staged is None:
                    self.staged = StagedTransport(self.comm, self.adapter, self.device,
                                                  self.requests)
                if self.rec is not None:
                    self.rec.path = "staged"
                return getattr(self.staged, name)(*args)
            return method(*args)
        return run


class StagedTransport(_Requests):
    """MPI without CUDA support: every device message goes through pinned host memory.

    ``requests``: the transport of a nonblocking or persistent call, whose
    messages outlive the call and interleave with other calls': it stages in
    an arena of its own (a persistent request reuses its block at every
    ``Start``). A blocking call's transport shares this thread's arena.
    """

    path = native_path = "staged"

    def __init__(self, comm, adapter, device, requests=False):
        self.comm = comm
        self.adapter = adapter
        self.device = device
        self.requests = requests
        if requests:
            self.arena = PinnedArena(adapter)
        else:
            self.arena = arena_for(adapter, device)
        self.inflight = {}         # id(request) -> (request, device array or None, host slot)
        self.reset()

    def reset(self):
        """A blocking call starts on this transport again (its arena: no live slot)."""
        if not self.requests:
            # Every request of a blocking call completes within it: a new call starts
            # with no live slot (even if an earlier call was cut short by an error).
            self.arena.live = 0
            self.inflight.clear()

    def _outgoing(self, buf):
        if self.adapter.matches(buf):
            host = self.arena.take(buf.dtype, buf.size)
            self.adapter.to_host(buf, host)
            return host, True
        return buf, False

    def _incoming(self, buf):
        if self.adapter.matches(buf):
            return self.arena.take(buf.dtype, buf.size), True
        return buf, False

    def Send(self, buf, dest, tag):
        """Send ``buf`` (a device array through a pinned host copy)."""
        host, staged = self._outgoing(buf)
        self.comm.Send(host, dest, tag)
        self.arena.give(staged)

    def Recv(self, buf, source, tag):
        """Receive into ``buf`` (a device array through a pinned host slot, then copied up)."""
        host, staged = self._incoming(buf)
        self.comm.Recv(host, source, tag)
        if staged:
            self.adapter.to_device(host, buf)
            self.arena.give()

    def Sendrecv(self, sbuf, dest, stag, rbuf, source, rtag):
        """Send and receive (device arrays through pinned host memory)."""
        shost, s_staged = self._outgoing(sbuf)
        rhost, r_staged = self._incoming(rbuf)
        self.comm.Sendrecv(shost, dest, stag, rhost, source, rtag)
        if r_staged:
            self.adapter.to_device(rhost, rbuf)
        self.arena.give(s_staged + r_staged)

    def Isend(self, buf, dest, tag):
        """Post a send of device array ``buf`` from a pinned host copy kept to :meth:`finish`."""
        return self._post(self.comm.Isend, buf, dest, tag, lands=False)

    def Irecv(self, buf, source, tag):
        """Post a receive into device array ``buf`` via a host slot :meth:`finish` lands."""
        return self._post(self.comm.Irecv, buf, source, tag, lands=True)

    def _post(self, start, buf, peer, tag, lands):
        # The slot lives until finish(): an Isend's until MPI has read it, an
        # Irecv's until its data is copied to the device.
        host, staged = (self._incoming if lands else self._outgoing)(buf)
        req = start(host, peer, tag)
        if staged:
            self.inflight[id(req)] = (req, buf if lands else None, host)
        return req

    def waitall(self, requests):
        """Complete ``requests``, then :meth:`finish` them."""
        MPI.Request.Waitall(requests)
        self.finish(requests)

    def finish(self, requests):
        """After ``requests`` completed: land staged receives, free their slots."""
        if not self.inflight:
            return
        for r in requests:
            # The entry holds the request, so its id stays unique meanwhile.
            entry = self.inflight.pop(id(r), None)
            if entry is not None:
                if entry[1] is not None:
                    self.adapter.to_device(entry[2], entry[1])
                self.arena.give()

    def __getattr__(self, name):
        # Native collectives on staged copies: inputs copied down, outputs back up.
        method = getattr(self.comm, name)
        outputs = _OUTPUTS.get(name, ())

        def run(*args):
            args = list(args)
            in_place = bool(args) and args[0] is MPI.IN_PLACE
            back, taken = [], 0
            for i, a in enumerate(args):
                if not self.adapter.matches(a):
                    continue
                is_out = i in outputs
                if is_out and not (in_place or name == "Bcast"):
                    host = self.arena.take(a.dtype, a.size)   # written by MPI only
                else:
                    host, _ = self._outgoing(a)
                taken += 1
                if is_out:
                    back.append((host, a))
                args[i] = host
            try:
                return method(*args)
            finally:
                for host, dev in back:
                    self.adapter.to_device(host, dev)
                self.arena.give(taken)
        return run


# -- which transport -----------------------------------------------------------

#: The choices of ``MPICOLL_GPU_TRANSPORT`` / :func:`set_transport`.
TRANSPORTS = ("auto", "ipc", "aware", "staged")
_transport_override = None


def set_transport(name):
    """Choose how device messages move; set it alike on every rank.

    ``"auto"``, ``"ipc"``, ``"aware"``, ``"staged"``, or None (read
    ``MPICOLL_GPU_TRANSPORT`` again):

    - ``ipc``: peers on the same node through CUDA IPC mappings (a buffer that
      cannot be exported, or a peer that cannot map it, goes inline through the
      fallback); other peers through the CUDA-aware path where MPI is
      CUDA-aware, else staged;
    - ``aware``: every device message handed to MPI (point-to-point; the
      library's own collectives follow :func:`collectives_aware`);
    - ``staged``: every device message through pinned host memory;
    - ``auto`` (default): ``ipc`` where the array library's IPC works, else the
      CUDA-aware or staged path as :func:`cuda_aware_decision` says.
    """
    global _transport_override
    if name is not None and name not in TRANSPORTS:
        from ..core.errors import ArgumentError, describe
        raise ArgumentError(f"transport: expected one of {', '.join(TRANSPORTS)} or None; "
                            f"got {describe(name)}")
    _transport_override = name


def transport_choice():
    """(choice, source): :func:`set_transport`, else ``MPICOLL_GPU_TRANSPORT``, else auto."""
    if _transport_override is not None:
        return _transport_override, "mpicoll.gpu.set_transport"
    raw = os.environ.get("MPICOLL_GPU_TRANSPORT", "").strip().lower()
    if not raw:
        return "auto", "default"
    if raw not in TRANSPORTS:
        from ..core.errors import ArgumentError
        raise ArgumentError(f"MPICOLL_GPU_TRANSPORT: expected one of {', '.join(TRANSPORTS)}; "
                            f"got {raw!r}")
    return raw, "MPICOLL_GPU_TRANSPORT"


def ipc_support(adapter):
    """(ok, why): whether ``adapter``'s arrays can move through IPC mappings here."""
    probe = getattr(adapter, "ipc_supported", None)
    if probe is None:
        return False, f"the {adapter.name} adapter has no IPC support"
    return probe()


#: Default of ``MPICOLL_GPU_HOST_COPY`` (bytes per rank).
HOST_COPY_MAX = 4096


def host_copy_max():
    """The size up to which calls on device arrays run on page-locked host copies.

    Calls on device arrays moving at most this many bytes per rank run their algorithm
    on page-locked host copies (``MPICOLL_GPU_HOST_COPY``, bytes; 0: never).

    One device-to-host copy of the inputs, the algorithm's messages and reductions on
    the host, one host-to-device copy of the results -- instead of a copy (or an IPC
    round trip) and a kernel per message, which for a few bytes cost more than the data
    (Open MPI's coll/cuda stages reductions the same way).
    """
    return env_bytes("MPICOLL_GPU_HOST_COPY", HOST_COPY_MAX)


def env_bytes(name, default):
    """The byte count (>= 0) in environment variable ``name``; ``default`` when unset.

    Anything else raises :class:`mpicoll.ArgumentError` naming the variable.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        from ..core.errors import ArgumentError
        raise ArgumentError(f"{name}: expected a byte count >= 0; got {raw!r}")
    return value


def speaks_ipc(adapter, choice=None):
    """Whether this rank moves ``adapter``'s arrays through the ipc protocol.

    That is, with the other ranks of its node (headers on their own tags: a peer that does
    not would never match them). The agreement step compares it between a node's ranks.
    ``choice``: :func:`transport_choice`'s, when the caller has it already.
    """
    if adapter is None or IPC is None:
        return False
    if choice is None:
        choice = transport_choice()[0]
    return choice == "ipc" or (choice == "auto" and ipc_support(adapter)[0])


def _fallback(comm, adapter, device, choice, requests):
    if choice != "staged" and (choice == "aware" or cuda_aware_decision()[0]):
        return AwareTransport(comm, adapter, device, requests)
    return StagedTransport(comm, adapter, device, requests)


def transport(comm, adapter, device, requests=False):
    """What the point-to-point layer talks to for arrays of ``adapter`` (None = host).

    ``comm`` is a private communicator (its node layout decides which peers
    are on this rank's node). ``requests``: for a nonblocking or persistent
    call (its messages outlive the call: staging buffers of its own).
    """
    if adapter is None:
        return comm
    choice = transport_choice()[0]
    fallback = _fallback(comm, adapter, device, choice, requests)
    if speaks_ipc(adapter, choice):
        from ..core.topology import layout
        nodes = layout(comm).nodes
        rank = comm.Get_rank()
        # Every rank of a node decides alike: the agreement step (mpicoll.engine.call) made
        # sure of it for this call (same layout; speaks_ipc alike on a node's ranks).
        if nodes.count(nodes[rank]) > 1:
            made = IPC(comm, adapter, device, fallback, nodes)
            if made is not None:
                return made
    return fallback


def transport_key():
    """What the choice of a device transport (and its binding) rests on, cheaply.

    A blocking call memoized with its transport (:mod:`mpicoll.engine.memo`) is
    replayed on that transport only while this is unchanged: the chosen
    transport (:func:`set_transport`, ``MPICOLL_GPU_TRANSPORT``), the
    CUDA-aware decision, ``MPICOLL_CUDA_AWARE_COLLECTIVES``,
    ``MPICOLL_GPU_HOST_COPY``, this thread's
    pinned arenas (:func:`release_staging` drops them) and what other
    modules register in :data:`KEY_PARTS` (the ipc transport's fusion switch).
    """
    env = os.environ.get
    return (_transport_override, env("MPICOLL_GPU_TRANSPORT"), _aware_override, _aware_decision,
            env("MPICOLL_CUDA_AWARE_COLLECTIVES"), env("MPICOLL_GPU_HOST_COPY"),
            thread_arenas(), *(part() for part in KEY_PARTS))


#: Callables whose results join :func:`transport_key` (set by modules above this one).
KEY_PARTS = []

#: ``make(comm, adapter, device, fallback, nodes)`` -> the ipc transport or None;
#: set by :mod:`mpicoll.device.ipc` when imported (it sits above this module: no import cycle).
IPC = None
