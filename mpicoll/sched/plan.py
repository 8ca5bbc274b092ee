"""Plans: what one rank of one algorithm does, recorded once, run many times.

An algorithm function talks only through its ``ctx``. Handed a
:class:`Builder` and :class:`Sym` buffers (symbolic: a buffer number and an
element range) it runs its ordinary Python control flow — which depends on
the rank, the size, counts, root, item size and the kind of op, never on
the data — and every ``ctx`` call appends one operation to the plan:

=========  ==============================================================
SEND       ``(SEND, buf, peer)`` — blocking send of a slice
RECV       ``(RECV, buf, peer)``
SENDRECV   ``(SENDRECV, sendbuf, dest, recvbuf, source)``
ISEND      ``(ISEND, buf, peer, slot)`` — request kept in ``slot``
IRECV      ``(IRECV, buf, peer, slot)``
WAIT       ``(WAIT, slots)`` — the requests in ``slots`` complete
COPY       ``(COPY, dst, src)`` — ``dst[...] = src``
REDUCE     ``(REDUCE, lower, higher, out)`` — ``out = lower (op) higher``
=========  ==============================================================

Buffers ``0 .. nargs-1`` are the call's arrays (in argument order, None
arguments skipped); the others are scratch, allocated by the engines once
per bound plan. A plan is what the engines run, blocking or not, and what
the traffic figures are read from (:meth:`Plan.traffic`).
"""

from ..core.errors import NotSchedulable

__all__ = ["Sym", "Builder", "Plan", "NotSchedulable", "SEND", "RECV", "SENDRECV", "ISEND",
           "IRECV", "WAIT", "COPY", "REDUCE", "OP_NAMES"]

SEND, RECV, SENDRECV, ISEND, IRECV, WAIT, COPY, REDUCE = range(8)
OP_NAMES = ("send", "recv", "sendrecv", "isend", "irecv", "wait", "copy", "reduce")


class Sym:
    """A symbolic 1-D buffer slice: buffer number ``buf``, elements ``[start, stop)``.

    Supports what schedule-writing algorithms need of an array: ``size``,
    ``nbytes``, ``itemsize`` and contiguous slicing. Anything else (element
    assignment, arithmetic, NumPy calls) raises :class:`NotSchedulable`.
    """

    __slots__ = ("buf", "start", "stop", "itemsize")

    def __init__(self, buf, start, stop, itemsize):
        self.buf, self.start, self.stop, self.itemsize = buf, start, stop, itemsize

    @property
    def size(self):
        """The number of elements in the slice."""
        return self.stop - self.start

    @property
    def nbytes(self):
        """The number of bytes in the slice."""
        return (self.stop - self.start) * self.itemsize

    def __getitem__(self, key):
        # Fast path for the slices algorithms write (``buf[a:b]`` with ints >= 0): recording
        # large plans spends most of its time here. Same result as the general path below.
        if key.__class__ is slice and key.step is None:
            a, b = key.start, key.stop
            if (a is None or (a.__class__ is int and a >= 0)) and \
                    (b is None or (b.__class__ is int and b >= 0)):
                n = self.stop - self.start
                a = 0 if a is None else min(a, n)
                b = n if b is None else min(b, n)
                if b < a:
                    b = a
                return Sym(self.buf, self.start + a, self.start + b, self.itemsize)
        if not isinstance(key, slice):
            raise NotSchedulable(f"plan buffers take contiguous slices only; got index {key!r}")
        start, stop, step = key.indices(self.stop - self.start)
        if step != 1:
            raise NotSchedulable("plan buffers take contiguous slices only (step 1)")
        stop = max(stop, start)
        return Sym(self.buf, self.start + start, self.start + stop, self.itemsize)

    def __setitem__(self, key, value):
        raise NotSchedulable("plan buffers are written through ctx.copy / ctx.reduce")

    def __array__(self, *args, **kwargs):
        raise NotSchedulable("plan buffers hold no data")

    def __repr__(self):
        return f"Sym(buf{self.buf}[{self.start}:{self.stop}])"


class Builder:
    """The ``ctx`` an algorithm sees while its plan is recorded (same methods as Ctx)."""

    def __init__(self, rank, size, nargs, itemsize, user_op=False, layout=None):
        self.rank, self.size = rank, size
        #: the :class:`~mpicoll.core.topology.Layout` node-aware algorithms read (None: one node)
        self._layout = layout
        self.nargs = nargs
        self.itemsize = itemsize
        self.user_op = user_op
        self.ops = []
        self.scratch_sizes = []
        self.nreq = 0

    @property
    def layout(self):
        """The :class:`~mpicoll.core.topology.Layout` of the call (given, or one node)."""
        if self._layout is None:
            from ..core.topology import Layout
            self._layout = Layout([0] * self.size)
        return self._layout

    # point-to-point ------------------------------------------------------
    def send(self, buf, dest):
        """Record a send of ``buf`` to rank ``dest``."""
        self.ops.append((SEND, buf, dest))

    def recv(self, buf, source):
        """Record a receive into ``buf`` from rank ``source``."""
        self.ops.append((RECV, buf, source))

    def sendrecv(self, sendbuf, dest, recvbuf, source):
        """Record a send of ``sendbuf`` to ``dest`` and a receive into ``recvbuf``."""
        self.ops.append((SENDRECV, sendbuf, dest, recvbuf, source))

    def isend(self, buf, dest):
        """Record a posted send of ``buf`` to rank ``dest``; its request slot."""
        slot, self.nreq = self.nreq, self.nreq + 1
        self.ops.append((ISEND, buf, dest, slot))
        return slot

    def irecv(self, buf, source):
        """Record a posted receive into ``buf`` from rank ``source``; its request slot."""
        slot, self.nreq = self.nreq, self.nreq + 1
        self.ops.append((IRECV, buf, source, slot))
        return slot

    def waitall(self, requests):
        """Record a wait on ``requests`` (request slots); nothing when there are none."""
        if requests:
            self.ops.append((WAIT, tuple(requests)))

    def wait(self, request):
        """Record a wait on ``request`` (a request slot)."""
        self.ops.append((WAIT, (request,)))

    # local ----------------------------------------------------------------
    def scratch(self, n):
        """A scratch vector of ``n`` elements (the call's dtype and memory)."""
        self.scratch_sizes.append(n)
        return Sym(self.nargs + len(self.scratch_sizes) - 1, 0, n, self.itemsize)

    def copy(self, dst, src):
        """``dst[...] = src``; nothing when ``src`` is None (in place) or ``dst`` itself."""
        if src is None or src is dst:
            return
        if (src.buf, src.start, src.stop) == (dst.buf, dst.start, dst.stop):
            return
        if src.size != dst.size:
            raise ValueError(f"copy of {src.size} elements into {dst.size}")
        if dst.size:
            self.ops.append((COPY, dst, src))

    def reduce(self, lower, higher, out):
        """``lower (op) higher`` (lower ranks first); returns where the result is.

        Built-in ops write ``out``; user ops (``Op.Reduce_local``) write ``higher``.
        """
        if lower.size:
            self.ops.append((REDUCE, lower, higher, out))
        return higher if self.user_op else out

    def plan(self):
        """The recorded :class:`Plan`."""
        return Plan(self.rank, self.size, self.nargs, tuple(self.ops),
                    tuple(self.scratch_sizes), self.nreq)


class Plan:
    """One rank's schedule of one algorithm for one call signature (immutable)."""

    __slots__ = ("rank", "size", "nargs", "ops", "scratch_sizes", "nreq", "reduces", "_traffic")

    def __init__(self, rank, size, nargs, ops, scratch_sizes, nreq):
        self.rank, self.size, self.nargs = rank, size, nargs
        self.ops, self.scratch_sizes, self.nreq = ops, scratch_sizes, nreq
        self.reduces = any(op[0] == REDUCE for op in ops)
        self._traffic = None

    def messages(self):
        """Every message of this rank: ``('send' | 'recv', peer, elements)``, in plan order."""
        for op in self.ops:
            kind = op[0]
            if kind in (SEND, ISEND):
                yield ("send", op[2], op[1].size)
            elif kind in (RECV, IRECV):
                yield ("recv", op[2], op[1].size)
            elif kind == SENDRECV:
                yield ("send", op[2], op[1].size)
                yield ("recv", op[4], op[3].size)

    def traffic(self):
        """``(sent_msgs, sent_elements, recv_msgs, recv_elements)`` of this rank."""
        if self._traffic is None:
            t = [0, 0, 0, 0]
            for kind, _, n in self.messages():
                i = 0 if kind == "send" else 2
                t[i] += 1
                t[i + 1] += n
            self._traffic = tuple(t)
        return self._traffic

    def rounds(self):
        """Number of waits a nonblocking run of this plan passes (libNBC's rounds)."""
        return sum(1 for op in self.ops if op[0] in (SEND, RECV, SENDRECV, WAIT))

    def describe(self):
        """One line per operation, for the demo and for debugging."""
        lines = []
        for op in self.ops:
            name = OP_NAMES[op[0]]
            lines.append(name + " " + " ".join(map(str, op[1:])))
        return lines

    def __repr__(self):
        sm, se, rm, re_ = self.traffic()
        return (f"Plan(rank {self.rank}/{self.size}: {len(self.ops)} ops, "
                f"sends {sm} msgs {se} el, recvs {rm} msgs {re_} el, "
                f"scratch {list(self.scratch_sizes)})")
