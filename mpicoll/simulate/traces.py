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

__all__ = ["plan_lines", "write_rank", "write_list", "ZERO_RECV", "traffic_of_lines", "in_flight"]

#: the size written for a zero-byte receive (see the module doc)
ZERO_RECV = "1e-9"


def _recv_size(nbytes):
    return str(nbytes) if nbytes else ZERO_RECV


def _sleep(rank, seconds):
    return f"{rank} sleep {seconds:.12g}"


def plan_lines(plan, itemsize, costs=None):
    """The TI actions of one rank's :class:`~mpicoll.sched.plan.Plan` (without init/finalize).

    ``costs``: a :class:`~.calibrate.LocalCosts` (None: communication only).
    """
    r = plan.rank
    sent, recvd = {}, {}          # peer -> messages so far (the next tag)
    slots = {}                    # request slot -> "src dst tag"
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

    for op in plan.ops:
        kind = op[0]
        if kind in (SEND, RECV, SENDRECV, WAIT):
            pending[0] += per_round
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
            emit(f"{r} isend {op[2]} {t} {op[1].size * itemsize}")
        elif kind == IRECV:
            t = tag_from(op[2])
            slots[op[3]] = f"{op[2]} {r} {t}"
            emit(f"{r} irecv {op[2]} {t} {_recv_size(op[1].size * itemsize)}")
        elif kind == WAIT:
            first = True
            for s in op[1]:
                line = f"{r} wait {slots.pop(s)}"
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
    """(most sends, most receives) one rank has posted and not yet completed at once.

    A blocking SEND or RECV counts one while it runs; a SENDRECV one of each.
    Where either is above 1, SMPI shares the rank's link among the messages
    (max-min fair), while the α-β closed forms send one message after another.
    """
    sends = recvs = most_s = most_r = 0
    kinds = {}
    for op in plan.ops:
        kind = op[0]
        if kind == ISEND:
            sends += 1
            kinds[op[3]] = "s"
        elif kind == IRECV:
            recvs += 1
            kinds[op[3]] = "r"
        most_s = max(most_s, sends + (kind in (SEND, SENDRECV)))
        most_r = max(most_r, recvs + (kind in (RECV, SENDRECV)))
        if kind == WAIT:
            for s in op[1]:
                if kinds.pop(s) == "s":
                    sends -= 1
                else:
                    recvs -= 1
    return most_s, most_r
