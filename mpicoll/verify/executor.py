"""The symbolic executor: every rank's plan run together under an MPI point-to-point model.

The model (what the verifier assumes of MPI):

- *Matching.* A message matches a receive by (source, tag, communicator);
  every message of one call has the call's tag and communicator, so a
  receive from rank s takes the oldest unmatched send from s to this rank,
  and sends are matched in the order they were posted (MPI's
  non-overtaking rule). There is no ``MPI_ANY_SOURCE`` in a plan.
- *Protocol.* A send of at most ``eager`` bytes completes when it is posted
  (its data is copied out then); a larger one completes only once its
  receive is posted (rendezvous). The default, ``eager=0``, makes every send
  synchronous: the strictest case, since buffering only ever removes waits.
- *Sizes.* A message must have exactly as many elements as its receive
  (more is MPI's truncation error; fewer leaves the plan's receive partly
  unwritten, which no algorithm here means to do).
- *Buffers of pending requests.* Between ``isend`` and its wait the buffer
  may be read but not written; between ``irecv`` and its wait it may be
  neither read nor written, nor received into by another request; the two
  halves of a ``sendrecv`` may not overlap (MPI forbids all of these).

The executor runs a rank until it blocks (a receive whose message has not
been sent, a rendezvous send whose receive is not posted, a wait on such a
request), then another; when no rank can move and some have not finished,
the wait-for graph names the deadlock (a cycle of ranks and the steps they
block at) or the message that never comes. Each step moves symbolic values
(:mod:`.values`) — the executor checks every reduction's operands as it
combines them, and that no element of a call buffer that already holds its
final value is changed afterwards (a read-only buffer's values are final
from the start).

Messages and local reductions are also kept in order for :func:`timing`,
which prices the run as a critical path.
"""
from collections import deque

import numpy as np

from ._mpicoll import COPY, IRECV, ISEND, OP_NAMES, RECV, REDUCE, SEND, SENDRECV, WAIT

__all__ = ["Failure", "Executor", "timing", "load"]


class Failure(Exception):
    """A case that fails: ``kind`` (a short word), ``text`` (what and where)."""

    def __init__(self, kind, text):
        super().__init__(f"{kind}: {text}")
        self.kind, self.text = kind, text

    def __reduce__(self):
        # Exception's own reduce passes ``self.args`` (the one joined message) back to
        # ``__init__``, which takes two: a sweep's worker could send a Failure but its parent
        # could not read it (multiprocessing's result thread died and the sweep hung)
        return type(self), (self.kind, self.text)


def _where(rank, pc, op):
    return f"rank {rank} step {pc} ({_optext(op)})"


def _optext(op):
    k = op[0]
    name = OP_NAMES[k]
    if k in (SEND, ISEND):
        return f"{name} {_sym(op[1])} to {op[2]}"
    if k in (RECV, IRECV):
        return f"{name} {_sym(op[1])} from {op[2]}"
    if k == SENDRECV:
        return f"sendrecv {_sym(op[1])} to {op[2]}, {_sym(op[3])} from {op[4]}"
    if k == WAIT:
        return f"wait {list(op[1])}"
    if k == COPY:
        return f"copy {_sym(op[2])} -> {_sym(op[1])}"
    return f"reduce {_sym(op[1])} (op) {_sym(op[2])} -> {_sym(op[3])}"


def _sym(s):
    return f"buf{s.buf}[{s.start}:{s.stop}]"


# A request is a list (cheaper to make and read than an object; one per message half):
R_RANK, R_SEND, R_A, R_B, R_PEER, R_PC, R_DONE, R_PARTNER, R_PREV, R_POST, R_END, R_WAITING, \
    R_NB, R_DATA, R_KNOW, R_CHK, R_NEXT, R_BLOCKED = range(18)


class Executor:
    """Run the plans of one call on symbolic buffers; :meth:`run` raises :class:`Failure`.

    ``plans``: one per rank (None: the rank makes no call). ``ranks``: per rank
    the call buffers' initial values, expected final values, roles and aliases
    (:class:`~.spec.RankSetup`); scratch starts undefined. Every buffer of every
    rank lives in one vector (``mem``), so that a step is a slice of it.
    """

    def __init__(self, plans, ranks, mode, user_op, itemsize=8, eager=0, know=False):
        self.N = N = len(plans)
        self.plans = plans
        self.mode = mode
        self.combine = mode.combine
        self.user_op = user_op
        self.itemsize = itemsize
        self.eager = eager
        total = 0
        layout = []
        for r in range(N):
            rs, plan = ranks[r], plans[r]
            if plan is None:
                layout.append(None)
                continue
            if plan.nargs != len(rs.init):
                raise Failure("arguments", f"rank {r}: the plan has {plan.nargs} call buffers, "
                                           f"the call {len(rs.init)}")
            alias = rs.alias or {}
            base = [0] * (plan.nargs + len(plan.scratch_sizes))
            for b in range(plan.nargs):
                if b not in alias:
                    base[b] = total
                    total += len(rs.init[b])
            for b, (tgt, start) in alias.items():
                base[b] = base[tgt] + start
            for i, n in enumerate(plan.scratch_sizes):
                base[plan.nargs + i] = total
                total += n
            layout.append(base)
        self.mem = mem = np.empty(total, dtype=np.int64)
        self.exp = exp = np.zeros(total, dtype=np.int64)
        self.base, self.chk, self.roles, self.bufs = [], [], [], []
        for r in range(N):
            rs, plan, base = ranks[r], plans[r], layout[r]
            if plan is None:
                for x in (self.base, self.chk, self.roles, self.bufs):
                    x.append([])
                continue
            alias = rs.alias or {}
            chk = []
            bufs = []
            for b in range(plan.nargs):
                n = len(rs.init[b])
                if b not in alias:
                    mem[base[b]:base[b] + n] = rs.init[b]
                    if rs.expect[b] is not None:
                        exp[base[b]:base[b] + n] = rs.expect[b]
                chk.append(rs.expect[b] is not None or b in alias)
                bufs.append(mem[base[b]:base[b] + n])
            for i, n in enumerate(plan.scratch_sizes):
                b = plan.nargs + i
                mem[base[b]:base[b] + n] = mode.undef(n)
                chk.append(False)
                bufs.append(mem[base[b]:base[b] + n])
            self.base.append(base)
            self.chk.append(chk)
            self.roles.append(list(rs.roles) + ["scratch"] * len(plan.scratch_sizes))
            self.bufs.append(bufs)
        self.track_know = know
        self.know = [1 << r for r in range(N)]
        self.events = [[] for _ in range(N)]
        self.messages = 0
        self.pend_r = self.pend_s = None

    # -- running -------------------------------------------------------------
    def run(self):
        """Execute every rank's plan to the end; raises :class:`Failure` on the first fault."""
        N = self.N
        self.pc = [0] * N
        self.wait = [None] * N
        self.nwait = [0] * N
        self.reqs = [[None] * (p.nreq if p is not None else 0) for p in self.plans]
        self.unwaited = [0] * N
        self.sendq, self.recvq = {}, {}
        self.last = [[None, None] for _ in range(N)]      # last send / receive posted
        self.npend = [0] * N
        self.pending = [[] for _ in range(N)]
        self.ready = deque(r for r in range(N) if self.plans[r] is not None)
        self.queued = [True] * N
        while self.ready:
            r = self.ready.popleft()
            self.queued[r] = False
            self._step(r)
        stuck = [r for r in range(N) if self.plans[r] is not None
                 and self.pc[r] < len(self.plans[r].ops)]
        if stuck:
            self._diagnose(stuck)
        for q in self.sendq.values():
            if q:
                s = q[0]
                raise Failure("unmatched", f"{self._at(s[R_RANK], s[R_PC])}: rank {s[R_PEER]} "
                                           f"never receives this message")
        for r in range(N):
            if self.unwaited[r]:
                left = [i for i, q in enumerate(self.reqs[r]) if q is not None]
                raise Failure("unwaited", f"rank {r}: request(s) {left} posted but never waited")
        if self.track_know:
            full = (1 << N) - 1
            for r in range(N):
                if self.know[r] != full:
                    missing = [q for q in range(N) if not self.know[r] >> q & 1][:8]
                    raise Failure("barrier", f"rank {r} may leave before rank(s) {missing} "
                                             f"entered (no chain of messages from them)")

    def _at(self, r, pc):
        return _where(r, pc, self.plans[r].ops[pc])

    def _step(self, r):
        ops = self.plans[r].ops
        n = len(ops)
        pc = self.pc[r]
        base = self.base[r]
        chk = self.chk[r]
        mem = self.mem
        post = self._post
        write = self._write
        nwait = self.nwait
        wait = self.wait
        events = self.events[r]
        while pc < n:
            if wait[r] is not None:
                if nwait[r]:
                    break
                for q in wait[r]:
                    if q[R_NB]:
                        self._unmark(r, q)
                wait[r] = None
                pc += 1
                continue
            op = ops[pc]
            k = op[0]
            if k == SENDRECV:
                s, rv = op[1], op[3]
                bs, br = base[s.buf], base[rv.buf]
                sa, sb, ra, rb = bs + s.start, bs + s.stop, br + rv.start, br + rv.stop
                if sa < rb and ra < sb and sb > sa and rb > ra:
                    raise Failure("race", f"{self._at(r, pc)}: the send and receive buffers "
                                          f"of one sendrecv overlap")
                rq = post(r, False, ra, rb, op[4], pc, False, chk[rv.buf])
                sq = post(r, True, sa, sb, op[2], pc, False, False)
                self._enter_wait(r, (sq, rq))
            elif k == SEND:
                s = op[1]
                bs = base[s.buf]
                self._enter_wait(r, (post(r, True, bs + s.start, bs + s.stop, op[2], pc, False,
                                          False),))
            elif k == RECV:
                s = op[1]
                bs = base[s.buf]
                self._enter_wait(r, (post(r, False, bs + s.start, bs + s.stop, op[2], pc, False,
                                          chk[s.buf]),))
            elif k == COPY:
                dst, src = op[1], op[2]
                if dst.stop - dst.start != src.stop - src.start:
                    raise Failure("size", f"{self._at(r, pc)}: copy of {src.size} elements "
                                          f"into {dst.size}")
                if dst.stop > dst.start:
                    d, sr = base[dst.buf] + dst.start, base[src.buf] + src.start
                    m = dst.stop - dst.start
                    if self.npend[r]:
                        self._busy(r, sr, sr + m, False, pc)
                        self._busy(r, d, d + m, True, pc)
                    write(r, d, d + m, mem[sr:sr + m], chk[dst.buf], pc)
                pc += 1
            elif k == REDUCE:
                lo, hi, out = op[1], op[2], op[3]
                m = lo.stop - lo.start
                if not (m == hi.stop - hi.start == out.stop - out.start):
                    raise Failure("size", f"{self._at(r, pc)}: reduce of {lo.size}, {hi.size} "
                                          f"elements into {out.size}")
                tgt = hi if self.user_op else out
                a, h, t = base[lo.buf] + lo.start, base[hi.buf] + hi.start, \
                    base[tgt.buf] + tgt.start
                if self.npend[r]:
                    self._busy(r, a, a + m, False, pc)
                    self._busy(r, h, h + m, False, pc)
                    self._busy(r, t, t + m, True, pc)
                L = mem[a:a + m]
                H = mem[h:h + m]
                res, bad = self.combine(L, H)
                if res is None:
                    d = self.mode.describe
                    raise Failure("operands", f"{self._at(r, pc)}: element {bad} combines "
                                              f"{d(L[bad])} (lower) with {d(H[bad])} (higher)")
                write(r, t, t + m, res, chk[tgt.buf], pc)
                events.append(m)
                pc += 1
            elif k == ISEND or k == IRECV:
                slot = op[3]
                if self.reqs[r][slot] is not None:
                    raise Failure("request", f"{self._at(r, pc)}: slot {slot} still holds a "
                                             f"request never waited")
                s = op[1]
                bs = base[s.buf]
                self.reqs[r][slot] = post(r, k == ISEND, bs + s.start, bs + s.stop, op[2], pc,
                                          True, k == IRECV and chk[s.buf])
                self.unwaited[r] += 1
                pc += 1
            elif k == WAIT:
                got = []
                reqs = self.reqs[r]
                for slot in op[1]:
                    q = reqs[slot]
                    if q is None:
                        raise Failure("request", f"{self._at(r, pc)}: slot {slot} holds no "
                                                 f"request (never posted or already waited)")
                    reqs[slot] = None
                    got.append(q)
                self.unwaited[r] -= len(got)
                self._enter_wait(r, tuple(got))
            else:                                   # pragma: no cover
                raise Failure("plan", f"rank {r} step {pc}: unknown operation {op!r}")
        self.pc[r] = pc

    def _enter_wait(self, r, reqs):
        self.wait[r] = reqs
        left = 0
        for q in reqs:
            if not q[R_DONE]:
                q[R_WAITING] = True
                left += 1
        self.nwait[r] = left
        self.events[r].append(reqs)

    def _complete(self, q):
        q[R_DONE] = True
        if q[R_WAITING]:
            r = q[R_RANK]
            self.nwait[r] -= 1
            if not self.nwait[r] and not self.queued[r]:
                self.queued[r] = True
                self.ready.append(r)

    # -- messages ------------------------------------------------------------
    def _post(self, r, is_send, a, b, peer, pc, nb, chk):
        N = self.N
        if not 0 <= peer < N:
            raise Failure("peer", f"{self._at(r, pc)}: no rank {peer} among {N}")
        q = [r, is_send, a, b, peer, pc, False, None, None, None, None, False, nb, None, 0, chk,
             None, None]
        if self.npend[r] and b > a:
            self._busy(r, a, b, not is_send, pc)
        if nb:
            self._mark(r, q)
        last = self.last[r]
        self.events[r].append(q)
        if is_send:
            prev = q[R_PREV] = last[0]
            if prev is not None:
                prev[R_NEXT] = q
            last[0] = q
            q[R_KNOW] = self.know[r]
            key = r * N + peer
            waiting = self.recvq.get(key)
            if waiting:
                self._match(q, waiting.popleft())
                return q
            if self.eager and (b - a) * self.itemsize <= self.eager:
                q[R_DATA] = self.mem[a:b].copy()
                q[R_DONE] = True
            queue = self.sendq.get(key)
            if queue is None:
                queue = self.sendq[key] = deque()
            queue.append(q)
        else:
            prev = q[R_PREV] = last[1]
            if prev is not None:
                prev[R_NEXT] = q
            last[1] = q
            key = peer * N + r
            waiting = self.sendq.get(key)
            if waiting:
                self._match(waiting.popleft(), q)
                return q
            queue = self.recvq.get(key)
            if queue is None:
                queue = self.recvq[key] = deque()
            queue.append(q)
        return q

    def _match(self, sq, rq):
        n = sq[R_B] - sq[R_A]
        if n != rq[R_B] - rq[R_A]:
            raise Failure("size", f"{self._at(sq[R_RANK], sq[R_PC])} sends {n} elements to a "
                                  f"receive of {rq[R_B] - rq[R_A]} "
                                  f"({self._at(rq[R_RANK], rq[R_PC])})")
        r = rq[R_RANK]
        if n:
            data = sq[R_DATA]
            if data is None:
                data = self.mem[sq[R_A]:sq[R_B]]
            self._write(r, rq[R_A], rq[R_B], data, rq[R_CHK], rq[R_PC])
        if self.track_know:
            self.know[r] |= sq[R_KNOW]
        sq[R_PARTNER] = rq
        rq[R_PARTNER] = sq
        self.messages += 1
        if not sq[R_DONE]:
            self._complete(sq)
        self._complete(rq)

    # -- buffers -------------------------------------------------------------
    def _write(self, r, a, b, values, chk, pc):
        mem = self.mem
        if chk:
            old = mem[a:b]
            bad = (old == self.exp[a:b]) & (values != old)
            if bad.any():
                i = int(np.argmax(bad))
                d = self.mode.describe
                buf, off = self._locate(r, a + i)
                role = self.roles[r][buf]
                what = ("writes its read-only input" if role == "in" else
                        "overwrites an element that already held its final value")
                raise Failure("overwrite", f"{self._at(r, pc)} {what}: buf{buf}[{off}] "
                                           f"held {d(old[i])}, now {d(values[i])}")
        mem[a:b] = values

    def _locate(self, r, g):
        """(buffer, index) of global element ``g`` of rank ``r``."""
        best = None
        for b, base in enumerate(self.base[r]):
            n = len(self.bufs[r][b])
            if base <= g < base + n and (best is None or base >= self.base[r][best]):
                best = b
        return best, g - self.base[r][best]

    def _mark(self, r, q):
        a, b = q[R_A], q[R_B]
        if a == b:
            return
        if self.pend_r is None:
            self.pend_r = np.zeros(len(self.mem), dtype=np.int32)
            self.pend_s = np.zeros(len(self.mem), dtype=np.int32)
        (self.pend_s if q[R_SEND] else self.pend_r)[a:b] += 1
        self.npend[r] += 1
        self.pending[r].append(q)

    def _unmark(self, r, q):
        a, b = q[R_A], q[R_B]
        if a == b:
            return
        (self.pend_s if q[R_SEND] else self.pend_r)[a:b] -= 1
        self.npend[r] -= 1
        self.pending[r].remove(q)

    def _busy(self, r, a, b, write, pc):
        """Fail if [a, b) touches the buffer of a pending request in a way MPI forbids."""
        if a == b:
            return
        hit = None
        if self.pend_r[a:b].any():
            hit = False
        elif write and self.pend_s[a:b].any():
            hit = True
        if hit is None:
            return
        other = "a pending request"
        for q in self.pending[r]:
            if q[R_SEND] == hit and q[R_A] < b and a < q[R_B]:
                other = self._at(r, q[R_PC])
                break
        buf, off = self._locate(r, a)
        how = "writes" if write else "reads"
        kind = "send" if hit else "receive"
        raise Failure("race", f"{self._at(r, pc)} {how} buf{buf}[{off}:{off + b - a}], the "
                              f"buffer of the pending {kind} posted at {other}")

    # -- when no rank can move ------------------------------------------------
    def _blocker(self, r):
        """(request, peer) rank r waits for: its first incomplete request."""
        for q in self.wait[r]:
            if not q[R_DONE]:
                return q, q[R_PEER]
        return None, None                                   # pragma: no cover

    def _diagnose(self, stuck):
        stuck_set = set(stuck)
        for r in stuck:
            q, p = self._blocker(r)
            if p not in stuck_set:
                what = "receive by" if q[R_SEND] else "message from"
                raise Failure("unmatched", f"{self._at(r, self.pc[r])} waits for a {what} "
                                           f"rank {p}, which has finished")
        # every stuck rank waits for another stuck rank: follow the edges to a cycle
        r = stuck[0]
        seen = {}
        path = []
        while r not in seen:
            seen[r] = len(path)
            path.append(r)
            r = self._blocker(r)[1]
        cycle = path[seen[r]:]
        lines = []
        for r in cycle:
            q, p = self._blocker(r)
            how = "a rendezvous send to" if q[R_SEND] else "a receive from"
            lines.append(f"{self._at(r, self.pc[r])} blocks on {how} rank {p}")
        ranks = ", ".join(map(str, cycle))
        raise Failure("deadlock", f"cycle of {len(cycle)} rank(s) [{ranks}] "
                                  f"({len(stuck)} stuck in all): " + "; ".join(lines))


def timing(ex):
    """Critical paths of an :class:`Executor`'s run: ``(steps, elements, reduced)``.

    Three prices of the same run, each the time at which the last rank
    finishes when a message costs (1, its elements, 0) and a local reduction
    (0, 0, its elements): the latency term (α), the bandwidth term (β per
    element) and the reduction term (γ per element) of the run's critical
    path. A rank sends one message at a time and receives one at a time, but
    sends and receives at once (a ``sendrecv`` is one step); a message starts
    when its send and its receive are both posted and the sender's and the
    receiver's previous messages are done, in the order each rank posted them.
    """
    N = ex.N
    events = ex.events
    pos = [0] * N
    t = [(0, 0, 0)] * N
    ready = deque(r for r in range(N) if events[r])
    queued = [True] * N

    def resolve(first, woken):
        todo = [first]
        while todo:
            m = todo.pop()
            if m is None:
                continue
            if not m[R_SEND]:
                m = m[R_PARTNER]
                if m is None:
                    continue
            rq = m[R_PARTNER]
            if m[R_END] is not None or rq is None or m[R_POST] is None or rq[R_POST] is None:
                continue
            ps, pr = m[R_PREV], rq[R_PREV]
            # The start is the later of four (steps, elements, reduced) triples, the maxima
            # written out: this is the sweep's innermost loop (a helper call per triple
            # costs more than the comparisons).
            a, b, g = m[R_POST]
            x = rq[R_POST]
            if x[0] > a:
                a = x[0]
            if x[1] > b:
                b = x[1]
            if x[2] > g:
                g = x[2]
            if ps is not None:
                x = ps[R_END]
                if x is None:
                    continue
                if x[0] > a:
                    a = x[0]
                if x[1] > b:
                    b = x[1]
                if x[2] > g:
                    g = x[2]
            if pr is not None:
                x = pr[R_END]
                if x is None:
                    continue
                if x[0] > a:
                    a = x[0]
                if x[1] > b:
                    b = x[1]
                if x[2] > g:
                    g = x[2]
            m[R_END] = rq[R_END] = (a + 1, b + m[R_B] - m[R_A], g)
            if m[R_BLOCKED]:                # ranks waiting for this message's end
                woken.extend(m[R_BLOCKED])
            if rq[R_BLOCKED]:
                woken.extend(rq[R_BLOCKED])
            todo.append(m[R_NEXT])
            todo.append(rq[R_NEXT])

    while ready:
        r = ready.popleft()
        evs = events[r]
        i, now = pos[r], t[r]
        woken = []
        while i < len(evs):
            x = evs[i]
            c = x.__class__
            if c is list:                   # a post
                x[R_POST] = now
                resolve(x, woken)
            elif c is tuple:                # a wait
                stop = False
                for q in x:
                    if q[R_END] is None:
                        got = q[R_BLOCKED]
                        if got is None:
                            q[R_BLOCKED] = [r]
                        elif r not in got:
                            got.append(r)
                        stop = True
                if stop:
                    break
                a, b, g = now
                for q in x:
                    e = q[R_END]
                    if e[0] > a:
                        a = e[0]
                    if e[1] > b:
                        b = e[1]
                    if e[2] > g:
                        g = e[2]
                now = (a, b, g)
            else:                           # a reduction of x elements
                now = (now[0], now[1], now[2] + x)
            i += 1
        pos[r], t[r] = i, now
        queued[r] = False
        for w in woken:
            if not queued[w]:
                queued[w] = True
                ready.append(w)
    for r in range(N):
        if pos[r] < len(events[r]):         # pragma: no cover - the run itself completed
            raise Failure("timing", f"rank {r}: the critical path did not resolve")
    return (max((x[0] for x in t), default=0), max((x[1] for x in t), default=0),
            max((x[2] for x in t), default=0))


def load(plan):
    """(messages, elements moved, elements reduced) of one rank's plan.

    Counted as the bench's plan model counts them: a ``sendrecv`` is one message of its
    larger half.
    """
    msgs = moved = reduced = 0
    if plan is None:
        return 0, 0, 0
    for op in plan.ops:
        k = op[0]
        if k == SEND or k == RECV or k == ISEND or k == IRECV:
            msgs += 1
            moved += op[1].stop - op[1].start
        elif k == SENDRECV:
            msgs += 1
            moved += max(op[1].stop - op[1].start, op[3].stop - op[3].start)
        elif k == REDUCE:
            reduced += op[1].stop - op[1].start
    return msgs, moved, reduced
