"""Plans as SMPI time-independent (TI) traces: one action a line, one file per rank.

Actions written (SMPI 3.32's replay; sizes in bytes: ``init`` without a
datatype makes the replay's default datatype ``MPI_BYTE``)::

    R init
    R send DST TAG BYTES       R recv SRC TAG BYTES
    R isend DST TAG BYTES      R irecv SRC TAG BYTES
    R wait SRC DST TAG         (the request of the message SRC -> DST with TAG)
    R sleep SECONDS            (local work: a copy, a reduction, a round's step)
    R finalize

Plan operations map as:

- SEND/RECV: ``send``/``recv``; ISEND/IRECV: ``isend``/``irecv`` and their
  WAIT a ``wait`` per request;
- SENDRECV: ``isend``, a blocking ``recv``, then the send's ``wait``
  (MPI_Sendrecv's halves overlap, as the engines' do; one action fewer than
  two requests, which the replay's time at N = 1,024 notices);
- COPY / REDUCE: ``sleep`` of :meth:`.calibrate.LocalCosts.copy_s` /
  ``reduce_s`` of the bytes they touch (left out when that is 0);
- before every operation that ends a round (SEND, RECV, SENDRECV, WAIT:
  :meth:`~mpicoll.sched.plan.Plan.rounds`), a ``sleep`` of the executor's
  per-round cost; at the start, one of the per-call cost. Consecutive local
  steps are written as one ``sleep`` of their sum (the same time, fewer events).

Messages between two ranks go one at a time, in order, as on an MPI library's
connection (TCP, a shared-memory queue): SMPI would run every posted request
at once and share the link max-min fairly among them, so a pipelined chain
of 64 KiB segments arrived all together at the end, not one after another
(a bcast ``pipeline`` over 4 shaped links replayed 2.5x slower than measured).
So a send to a rank that an earlier send of this rank still goes to first
waits for that earlier send (``wait``; the plan's own wait of it is then not
written again), and the receives a run of nonblocking operations posts are
written first in that run, so that a rank never waits on its send before
posting the receives it had already posted in the plan (their relative order
is kept: tags pair them). Messages to different ranks still share the rank's
link, as they do on one NIC.

Tags carry the matching order: the k-th message from rank a to rank b has
tag k on both sides, which is how MPI's non-overtaking rule pairs the
plans' messages (they use one tag per call), and keeps every request's
``(src, dst, tag)`` key — the replay's only handle on it — unique.

A zero-byte receive is written with size ``1e-9``: the replay probes for
the size of a receive of size <= 0 (a blocking probe, even in ``irecv``),
and the fraction is truncated to a count of 0 when the request is made.
"""
import os

from mpicoll.sched.plan import COPY, IRECV, ISEND, RECV, REDUCE, SEND, SENDRECV, WAIT

__all__ = ["fifo_order", "plan_lines", "write_rank", "write_list", "ZERO_RECV",
           "traffic_of_lines", "in_flight"]

#: the size written for a zero-byte receive (see the module doc)
ZERO_RECV = "1e-9"


def _recv_size(nbytes):
    return str(nbytes) if nbytes else ZERO_RECV


def _sleep(rank, seconds):
    return f"{rank} sleep {seconds:.12g}"


_BLOCKING = (SEND, RECV, SENDRECV, WAIT)


def fifo_order(ops):
    """``ops`` with the IRECVs of each run of nonblocking operations moved to its front.

    A run ends at an operation that blocks (SEND, RECV, SENDRECV, WAIT). The
    IRECVs keep their order, as do the other operations (see the module doc).
    """
    out, run_recvs, run_rest = [], [], []
    for op in ops:
        if op[0] in _BLOCKING:
            out += run_recvs + run_rest
            run_recvs, run_rest = [], []
            out.append(op)
        elif op[0] == IRECV:
            run_recvs.append(op)
        else:
            run_rest.append(op)
    return out + run_recvs + run_rest


def plan_lines(plan, itemsize, costs=None):
    """The TI actions of one rank's :class:`~mpicoll.sched.plan.Plan` (without init/finalize).

    ``costs``: a :class:`~.calibrate.LocalCosts` (None: communication only).
    """
    r = plan.rank
    sent, recvd = {}, {}          # peer -> messages so far (the next tag)
    slots = {}                    # request slot -> "src dst tag"
    going = {}                    # peer -> the slot of this rank's send still going to it
    peer_of = {}                  # the slot of a send -> its peer
    waited = set()                # slots waited before the plan's own wait (one at a time)
    out = []
    per_round = costs.round_s if costs is not None else 0.0
    pending = [0.0]               # local seconds not yet written

    def tag_to(peer):
        t = sent.get(peer, 0)
        sent[peer] = t + 1
        return t

    def tag_from(peer):
        t = recvd.get(peer, 0)
        recvd[peer] = t + 1
        return t

    def emit(line):
        if pending[0] > 0:
            out.append(_sleep(r, pending[0]))
            pending[0] = 0.0
        out.append(line)

    def one_at_a_time(peer):
        slot = going.pop(peer, None)
        if slot is not None:
            emit(f"{r} wait {slots[slot]}")
            waited.add(slot)

    for op in fifo_order(plan.ops):
        kind = op[0]
        if kind in _BLOCKING:
            pending[0] += per_round
        if kind in (SEND, ISEND):
            one_at_a_time(op[2])
        elif kind == SENDRECV:
            one_at_a_time(op[2])
        if kind == SEND:
            emit(f"{r} send {op[2]} {tag_to(op[2])} {op[1].size * itemsize}")
        elif kind == RECV:
            emit(f"{r} recv {op[2]} {tag_from(op[2])} {_recv_size(op[1].size * itemsize)}")
        elif kind == SENDRECV:
            _, sbuf, dst, rbuf, src = op
            rt, st = tag_from(src), tag_to(dst)
            emit(f"{r} isend {dst} {st} {sbuf.size * itemsize}")
            out.append(f"{r} recv {src} {rt} {_recv_size(rbuf.size * itemsize)}")
            out.append(f"{r} wait {r} {dst} {st}")
        elif kind == ISEND:
            t = tag_to(op[2])
            slots[op[3]] = f"{r} {op[2]} {t}"
            going[op[2]] = op[3]
            peer_of[op[3]] = op[2]
            emit(f"{r} isend {op[2]} {t} {op[1].size * itemsize}")
        elif kind == IRECV:
            t = tag_from(op[2])
            slots[op[3]] = f"{op[2]} {r} {t}"
            emit(f"{r} irecv {op[2]} {t} {_recv_size(op[1].size * itemsize)}")
        elif kind == WAIT:
            first = True
            for s in op[1]:
                key = slots.pop(s)
                peer = peer_of.pop(s, None)
                if peer is not None and going.get(peer) == s:
                    del going[peer]
                if s in waited:
                    waited.discard(s)
                    continue
                line = f"{r} wait {key}"
                if first:
                    emit(line)
                    first = False
                else:
                    out.append(line)
        elif kind == COPY and costs is not None:
            pending[0] += costs.copy_s(op[1].size * itemsize)
        elif kind == REDUCE and costs is not None:
            pending[0] += costs.reduce_s(op[1].size * itemsize)
    if pending[0] > 0:
        out.append(_sleep(r, pending[0]))
    if slots:
        raise ValueError(f"rank {r}: requests never waited for: {sorted(slots)}")
    return out


def write_rank(path, rank, lines, call_s=0.0):
    """Write one rank's trace file: ``init``, the per-call cost, ``lines``, ``finalize``."""
    with open(path, "w") as f:
        f.write(f"{rank} init\n")
        if call_s > 0:
            f.write(_sleep(rank, call_s) + "\n")
        for line in lines:
            f.write(line)
            f.write("\n")
        f.write(f"{rank} finalize\n")


def traffic_of_lines(lines):
    """``(sent_msgs, sent_bytes, recv_msgs, recv_bytes)`` read back from TI lines."""
    t = [0, 0, 0, 0]
    for line in lines:
        parts = line.split()
        if len(parts) < 5:
            continue
        action = parts[1]
        if action in ("send", "isend"):
            t[0] += 1
            t[1] += int(parts[4])
        elif action in ("recv", "irecv"):
            t[2] += 1
            t[3] += 0 if parts[4] == ZERO_RECV else int(parts[4])
    return tuple(t)


def write_list(directory, paths):
    """The list file ``smpirun -replay`` reads: one trace file per rank, in rank order."""
    path = os.path.join(directory, "traces.list")
    with open(path, "w") as f:
        for p in paths:
            f.write(os.path.abspath(p) + "\n")
    return path


def in_flight(plan):
    """(most peers sent to, most peers received from) with messages in flight on one rank.

    A blocking SEND or RECV counts one while it runs; a SENDRECV one of each.
    Messages to (or from) one peer go one at a time (see the module doc), so
    they count as one. Where either is above 1, SMPI shares the rank's link
    among the peers' messages (max-min fair), while the α-β closed forms send
    one message after another.
    """
    sends, recvs = {}, {}         # peer -> messages in flight to / from it
    most_s = most_r = 0
    slot_of = {}
    for op in plan.ops:
        kind = op[0]
        if kind in (ISEND, IRECV):
            table = sends if kind == ISEND else recvs
            table[op[2]] = table.get(op[2], 0) + 1
            slot_of[op[3]] = (table, op[2])
        blocking_s = kind == SEND and op[2] not in sends or kind == SENDRECV and op[2] not in sends
        recv_peer = op[2] if kind == RECV else op[4] if kind == SENDRECV else None
        blocking_r = recv_peer is not None and recv_peer not in recvs
        most_s = max(most_s, len(sends) + blocking_s)
        most_r = max(most_r, len(recvs) + blocking_r)
        if kind == WAIT:
            for s in op[1]:
                table, peer = slot_of.pop(s)
                table[peer] -= 1
                if not table[peer]:
                    del table[peer]
    return most_s, most_r
