"""Programs: a plan bound once to a call's host buffers as persistent requests and local steps.

A :class:`~mpicoll.sched.plan.Plan` says what one rank does; binding it to
arrays (:func:`mpicoll.engine.run.bind`) gives one Python step per
operation. A *program* goes further for host buffers that the private
communicator moves directly: every message becomes an MPI persistent request
(``Send_init`` / ``Recv_init``, made here once), messages that may be in
flight together are started by one ``Prequest.Startall`` and completed by one
``Request.Waitall``, and the copies and reductions are prebound NumPy calls.
Running it is a loop over a handful of prebound callables: per round,
``Startall``, ``Waitall``, the local steps — the cost of a hand-written
persistent-request program, with no interpretation of the plan per call.

Rounds are derived from the plan, not declared by the algorithm:

- A message is started as soon as the plan posts it, and waited for as late
  as it may be: just before the first later operation that touches its memory
  in a conflicting way (a receive's region read or written, a send's region
  written), or at the end. Waiting later than the plan does cannot deadlock
  (each rank posts every message no later than the plan does, in the same
  order); waiting earlier could, which is why a conflict waits only for the
  messages it conflicts with.
- A receive the plan has completed (a blocking receive or sendrecv, or an
  ``irecv`` past its ``WAIT``) is waited for before any later send starts,
  even where no data connects them: its arrival is what the send may announce
  (a barrier's zero-byte tokens carry nothing else). A send's completion says
  nothing to anyone, so a send is never waited for early.
- ``MPI_Startall`` starts its requests "in some arbitrary order", and messages
  between two ranks with one tag match in the order they are posted: a start
  group holds at most one message per peer and direction, so the plan's order
  of messages to (or from) one peer is kept.
- A ``SENDRECV``'s two halves are started together (MPI forbids their
  buffers to overlap).

The plan's own ``WAIT`` operations are no step of their own: they mark the
receives they complete, which the next send waits for; the conflict rule
places every other wait the data need, and the end waits for the rest.

Programs serve the memo's blocking replays (:mod:`mpicoll.engine.memo`), and
host persistent requests (:mod:`mpicoll.engine.nonblocking`), whose ``Start``
is the first round and whose ``Wait`` the rest. Their requests are freed
with the program (:meth:`Program.free`, or when it is garbage collected), and
every program of a private communicator is freed before the communicator
(:func:`free_programs`): a persistent request holds its communicator, and
MPICH runs a communicator's attribute callbacks -- which call MPI -- inside
the ``MPI_Request_free`` that drops its last reference, where MPI cannot be
called again.
"""
import weakref
from functools import partial

import numpy as np
from mpi4py import MPI

from ..args.buffers import wire
from ..core.ops import OPS
from ..device.arrays import data_ptr
from ..sched.plan import COPY, IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, WAIT

__all__ = ["Program", "compile_plan", "quiet", "free_programs", "slicer"]

_startall = MPI.Prequest.Startall
_waitall = MPI.Request.Waitall


def quiet(ufunc, lower, higher, out):
    """``ufunc(lower, higher, out=out)``, floating-point traps ignored (a step).

    MPI defines no floating-point exceptions: a trap raised on one rank
    mid-algorithm (``np.seterr(all="raise")``) would leave the others waiting.
    NumPy raises after the loop has written every element, so the result stands.
    """
    try:
        ufunc(lower, higher, out=out)
    except (FloatingPointError, RuntimeWarning):
        pass


def slicer(arrays):
    """``view(sym)``: the slice of ``arrays`` a plan's symbolic buffer names, made once each."""
    views = {}

    def view(sym):
        k = (sym.buf, sym.start, sym.stop)
        v = views.get(k)
        if v is None:
            v = views[k] = arrays[sym.buf][sym.start:sym.stop]
        return v
    return view


def _overlap(a, b):
    """Whether symbolic regions ``a`` and ``b`` (buffer, start, stop) share an element."""
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and a[1] < a[2] and b[1] < b[2]


class _Builder:
    """Turns a plan's operations into start, wait and local actions (see the module)."""

    def __init__(self):
        self.actions = []       # ("start", [req]), ("wait", [req]), ("local", fn)
        self.group = []         # requests made, not yet started
        self.group_peers = set()
        self.pending = []       # (req, is_recv, region): started or grouped, not waited
        self.arrived = []       # receives the plan has completed, not yet waited for here

    def flush(self):
        if self.group:
            self.actions.append(("start", self.group))
            self.group, self.group_peers = [], set()

    def wait_for(self, reads=(), writes=(), sends=False):
        """Wait for the pending messages an operation reading ``reads``, writing ``writes`` meets.

        ``sends``: the operation starts a send, so the receives the plan has completed
        by now are waited for too.
        """
        hit = []
        arrived = self.arrived if sends else ()
        for p in self.pending:
            req, is_recv, region = p
            if any(_overlap(region, w) for w in writes) or (is_recv and (
                    any(_overlap(region, r) for r in reads)
                    or any(req is a for a in arrived))):
                hit.append(p)
        if sends:
            self.arrived = []
        if hit:
            self.flush()
            self.pending = [p for p in self.pending if p not in hit]
            reqs = [p[0] for p in hit]
            last = self.actions[-1] if self.actions else None
            if last is not None and last[0] == "wait":
                last[1].extend(reqs)
            else:
                self.actions.append(("wait", reqs))

    def message(self, req, is_recv, region, peer):
        key = (peer, is_recv)
        if key in self.group_peers:
            self.flush()           # Startall's order is arbitrary: one per peer and direction
        self.group.append(req)
        self.group_peers.add(key)
        self.pending.append((req, is_recv, region))

    def completed(self, req):
        """The plan has completed receive ``req`` here (its data may be announced by sends)."""
        self.arrived.append(req)

    def local(self, fn, reads, writes):
        self.flush()               # messages go out before the local work (they overlap it)
        self.wait_for(reads, writes)
        self.actions.append(("local", fn))

    def finish(self):
        self.flush()
        if self.pending:
            self.actions.append(("wait", [p[0] for p in self.pending]))
            self.pending = []
        return self.actions


def _region(sym):
    return (sym.buf, sym.start, sym.stop)


def compile_plan(plan, arrays, op, comm, tag):
    """``plan`` bound to ``arrays`` (call arrays, then scratch) on ``comm``: a :class:`Program`.

    ``op``: the call's reduction (None for none); ``tag``: the tag of every message.
    Host arrays only (the private communicator sends them itself).
    """
    view = slicer(arrays)
    msg = view
    if any(a.dtype.kind == "V" for a in arrays):
        def msg(sym):              # packed entries (mpicoll.args.user_ops) travel as bytes
            return wire(view(sym))
    entry = OPS.get(op.handle) if op is not None else None
    ufunc = entry[1] if entry is not None else None
    user_op = op is not None and ufunc is None
    b = _Builder()
    requests = []

    slots = {}                     # a plan's request slot -> (request, is receive)
    peers = {}                     # id(request) -> (is receive, peer), for the reports

    def message(sym, peer, receive):
        req = (comm.Recv_init if receive else comm.Send_init)(msg(sym), peer, tag)
        requests.append(req)
        peers[id(req)] = (receive, peer)
        b.message(req, receive, _region(sym), peer)
        return req

    def send(sym, peer):
        return message(sym, peer, False)

    def recv(sym, peer):
        return message(sym, peer, True)

    try:
        for o in plan.ops:
            k = o[0]
            if k == SEND or k == ISEND:
                b.wait_for(reads=(_region(o[1]),), sends=True)
                req = send(o[1], o[2])
                if k == ISEND:
                    slots[o[3]] = (req, False)
            elif k == RECV or k == IRECV:
                b.wait_for(writes=(_region(o[1]),))
                req = recv(o[1], o[2])
                if k == RECV:
                    b.completed(req)
                else:
                    slots[o[3]] = (req, True)
            elif k == SENDRECV:
                b.wait_for(reads=(_region(o[1]),), writes=(_region(o[3]),), sends=True)
                send(o[1], o[2])
                b.completed(recv(o[3], o[4]))
            elif k == WAIT:
                for slot in o[1]:      # the plan completes these: receives may be announced
                    req, is_recv = slots[slot]
                    if is_recv:
                        b.completed(req)
            elif k == COPY:
                d, s = view(o[1]), view(o[2])
                if not _same(d, s):
                    b.local(partial(np.copyto, d, s), (_region(o[2]),), (_region(o[1]),))
            elif k == REDUCE:
                lo, hi, out = view(o[1]), view(o[2]), view(o[3])
                reads = (_region(o[1]), _region(o[2]))
                if user_op:
                    b.local(partial(op.Reduce_local, lo, hi), reads, (_region(o[2]),))
                else:
                    b.local(partial(quiet, ufunc, lo, hi, out), reads, (_region(o[3]),))
        actions = b.finish()
    except BaseException:
        for r in requests:
            r.Free()
        raise
    program = Program(actions, requests, peers)
    live = _live.get(comm.handle)
    if live is None:
        live = _live[comm.handle] = weakref.WeakSet()
    live.add(program)
    return program


_live = {}           # communicator handle -> its programs not yet freed (weakly)


def free_programs(comm):
    """Free every program made on ``comm`` (before ``comm`` itself is freed)."""
    for program in list(_live.pop(comm.handle, ())):
        program.free()


def _same(a, b):
    """Whether views ``a`` and ``b`` are the very same memory (a copy would do nothing)."""
    return a.size == b.size and data_ptr(a) == data_ptr(b)


class Program:
    """A compiled plan: its persistent requests and the steps that run it.

    - ``steps``: for a blocking run, callables in order (``Startall`` of a group,
      ``Waitall`` of a group, local steps): :meth:`run`.
    - ``engine_steps`` and ``requests``: the same for the nonblocking engine
      (:class:`mpicoll.engine.nonblocking.Request`), a wait being a tuple of
      indices into ``requests``.
    - ``rounds``: how many start groups it has (for the docs and tests).
    - ``what``: ``id(step)`` -> what a start or wait step moves, in words (the
      collective watchdog's report names the step a rank waits in).
    """

    __slots__ = ("steps", "engine_steps", "requests", "rounds", "messages", "broken",
                 "what", "_finalizer", "__weakref__")

    def __init__(self, actions, requests, peers=None):
        self.requests = requests
        index = {id(r): i for i, r in enumerate(requests)}
        steps, engine = [], []
        rounds = 0
        words = {}
        for kind, what in actions:
            if kind == "local":
                steps.append(what)
                engine.append(what)
            elif kind == "start":
                rounds += 1
                s = what[0].Start if len(what) == 1 else partial(_startall, what)
                steps.append(s)
                engine.append(s)
                words[id(s)] = "Startall " + _moves(what, peers)
            else:
                s = what[0].Wait if len(what) == 1 else partial(_waitall, what)
                e = tuple(index[id(r)] for r in what)
                steps.append(s)
                engine.append(e)
                words[id(s)] = words[id(e)] = _waits(what, peers)
        self.steps = tuple(steps)
        self.engine_steps = tuple(engine)
        self.rounds = rounds
        self.messages = len(requests)
        self.broken = False
        self.what = words
        self._finalizer = weakref.finalize(self, _free, requests)

    def run(self):
        """Run the program once, blocking (each step in order)."""
        try:
            for step in self.steps:
                step()
        except BaseException:
            self.broken = True         # requests may be active: never run again
            raise

    def free(self):
        """Free the persistent requests (idempotent; the program is unusable after)."""
        self.broken = True
        self._finalizer()

    def __repr__(self):
        return (f"<mpicoll Program: {self.messages} messages in {self.rounds} start groups, "
                f"{len(self.steps)} steps>")


def _moves(reqs, peers):
    """The messages of ``reqs`` in words: ``(send to rank 1, receive from rank 2)``."""
    if not peers:
        return f"({len(reqs)} messages)"
    return "(" + ", ".join(f"receive from rank {p}" if r else f"send to rank {p}"
                           for r, p in (peers[id(q)] for q in reqs)) + ")"


def _waits(reqs, peers):
    """A wait step in words: a send and a receive completed together read as a Sendrecv."""
    kinds = sorted(peers[id(q)][0] for q in reqs) if peers else None
    if kinds == [False, True]:
        return "Sendrecv " + _moves(sorted(reqs, key=lambda q: peers[id(q)][0]), peers)
    return "Waitall " + _moves(reqs, peers)


def _free(requests):
    if MPI.Is_finalized():
        return
    for r in requests:
        if r != MPI.REQUEST_NULL:
            try:
                r.Free()
            except MPI.Exception:
                pass
