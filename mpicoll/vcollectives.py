"""The functional API of the vector collectives and the scans: ``mpicoll.gatherv(...)`` and friends.

The conventions of :mod:`mpicoll.collectives` hold (argument names after
mpi4py, ``algorithm``, ``comm``, ``MPI.IN_PLACE`` where MPI allows it,
:class:`mpicoll.ArgumentError` on every rank before any message). The v
side of a call is an mpi4py v-buffer spec (:mod:`mpicoll.args.vbuffers`):
``buf``, ``[buf, counts]``, ``[buf, (counts, displs)]``,
``[buf, counts, displs]``, ``[buf, counts, datatype]``,
``[buf, (counts, displs), datatype]`` or ``[buf, counts, displs, datatype]``;
a plain array splits into N near-equal blocks, as in mpi4py. Counts and
displacements are in elements. Receive blocks must not overlap; gaps
between them and blocks out of rank order are fine (gaps are never written).

The vector collectives agree on counts before any message: each rank
contributes its own count (or, for alltoallv, a checksum of its counts) to
one exchange (:meth:`Call.exchange`, the agreement step's Allgather), so
binomial trees know every block's size on every rank, and counts that do
not match across ranks (a root's ``recvcounts[i]`` against rank i's
``sendbuf``, or alltoallv's ``sendcounts`` against the peers'
``recvcounts``) raise on every rank instead of truncating or hanging. This
costs one more small Allgather per call, in every check mode, and is
blocking also in the nonblocking forms. A repeated call on the same arrays
and counts replays the exchange too, then its bound steps
(:func:`mpicoll.engine.memo.run_specs`).

The ``_name(call, bufs, ...)`` functions are the one implementation behind
these functions and :class:`mpicoll.P2PComm` (through
:mod:`mpicoll._comm_v`); ``bufs`` returns the raw buffers, parsed inside the
checking block so that parsing errors are agreed like any other.
"""
from mpi4py import MPI

from .engine import memo as _memo
from . import coll as _coll  # noqa: F401  (importing it fills the registry)
from .args.buffers import as_array, check_no_alias, check_root, same_dtype, same_memory
from .device.arrays import empty
from .core.errors import ArgumentError
from .args.vbuffers import layout, parse_vspec
from .collectives import _allreduce, _is_in_place, _not_in_place, _run, _snapshot
from .core.blocks import offsets

__all__ = ["gatherv", "scatterv", "allgatherv", "alltoallv", "scan", "exscan"]


def _v_side(argname, spec, size, *, receive):
    """A v-buffer spec (or VSpec) -> (VSpec, flat array, counts, displs); None and
    MPI.IN_PLACE come back as (spec, None, None, None)."""
    v = parse_vspec(argname, spec)
    if v is None or v is MPI.IN_PLACE:
        return v, None, None, None
    flat = v.flat = as_array(argname, v.flat, writable=receive)
    counts, displs = layout(argname, v, size, receive=receive)
    return v, flat, counts, displs


def _check_counts(argname, given, sent, what):
    """The counts a rank gave (``given``) against what the ranks really have (``sent``)."""
    if given == sent:
        return
    bad = [i for i in range(len(sent)) if given[i] != sent[i]]
    shown = "; ".join(f"{argname}[{i}] = {given[i]} but rank {i} {what} {sent[i]}"
                      for i in bad[:4])
    more = f" (and {len(bad) - 4} more)" if len(bad) > 4 else ""
    raise ArgumentError(f"{argname}: do not match the ranks' buffers - {shown}{more}",
                        MPI.ERR_COUNT)


def _send_side(sendbuf, recv_flat):
    """sendbuf (not in place) checked against the receive buffer of the same call."""
    data = as_array("sendbuf", sendbuf)
    if recv_flat is not None:
        same_memory("sendbuf", data, "recvbuf", recv_flat)
        same_dtype("sendbuf", data, "recvbuf", recv_flat)
        check_no_alias("sendbuf", data, "recvbuf", recv_flat)
    return data


# -- gatherv ---------------------------------------------------------------

def _gatherv(call, bufs, root, algorithm):
    mine = -1
    with call.checking():
        root = check_root(root, call.size)
        is_root = call.rank == root
        sendbuf, recvbuf = bufs()
        rv = rflat = rcounts = rdispls = None
        if is_root:
            rv, rflat, rcounts, rdispls = _v_side("recvbuf", recvbuf, call.size, receive=True)
            if rv is MPI.IN_PLACE:
                raise ArgumentError("recvbuf: expected the root's receive buffer; got MPI.IN_PLACE",
                                    MPI.ERR_BUFFER)
        if _is_in_place(sendbuf):
            if not is_root:
                raise _not_in_place("sendbuf", "on the root")
            if rv is None:
                raise ArgumentError(
                    "recvbuf: expected the receive buffer (sendbuf=MPI.IN_PLACE takes the root's "
                    "block from it); got None", MPI.ERR_BUFFER)
            data = None
            mine = rcounts[root]
        else:
            data = _send_side(sendbuf, rflat)
            mine = data.size
    counts = call.exchange(mine)        # every rank's count, on every rank
    with call.checking():
        total = sum(counts)
        out = None
        if is_root:
            if rv is None:              # allocate: the blocks back to back, in rank order
                out = rflat = empty(data, total)
                rdispls = offsets(counts)[:-1]
            else:
                _check_counts("recvbuf counts", rcounts, counts, "sends")
                out = rv.obj
        like = data if data is not None else rflat
        fn = call.choose(algorithm, nbytes=total * like.itemsize // call.size, count=total,
                         dtype=like.dtype, root=root, counts=counts, like=(data, rflat))
    call.settle()
    _run(call, total, like.itemsize, fn, data, rflat, counts, rdispls, root)
    return out


def gatherv(sendbuf, recvbuf=None, root=0, *, comm=None, algorithm=None):
    """Gather every rank's ``sendbuf`` (any size, zero included) into ``recvbuf`` on ``root``.

    ``recvbuf`` (root only): a v-buffer spec; block i (``counts[i]``
    elements at ``displs[i]``) receives rank i's sendbuf; None allocates a
    1-D array with the blocks back to back in rank order. Returns the
    receive buffer on the root, None elsewhere. ``sendbuf=MPI.IN_PLACE`` on
    the root: its block is already in place.
    Per rank, N = 3: ``[1]``, ``[]``, ``[3 3]`` -> root gets ``[1 3 3]``.
    """
    return _memo.run_specs("gatherv", _gatherv, comm, algorithm, (sendbuf, recvbuf), (root,), (root,))


# -- scatterv --------------------------------------------------------------

def _scatterv(call, bufs, root, algorithm):
    mine = -1
    with call.checking():
        root = check_root(root, call.size)
        is_root = call.rank == root
        sendbuf, recvbuf = bufs()
        sflat = scounts = sdispls = None
        if is_root:
            sv, sflat, scounts, sdispls = _v_side("sendbuf", sendbuf, call.size, receive=False)
            if sv is None or sv is MPI.IN_PLACE:
                raise ArgumentError(
                    f"sendbuf: expected the root's send buffer (a v-buffer spec); got "
                    f"{'None' if sv is None else 'MPI.IN_PLACE'}", MPI.ERR_BUFFER)
        if _is_in_place(recvbuf):
            if not is_root:
                raise _not_in_place("recvbuf", "on the root")
            out = dest = None
            mine = scounts[root]
        else:
            if recvbuf is None:
                raise ArgumentError(
                    "recvbuf: expected an array to receive this rank's block (every rank "
                    "needs one; it sets this rank's count); got None", MPI.ERR_BUFFER)
            out = recvbuf
            dest = as_array("recvbuf", recvbuf, writable=True)
            if is_root:
                same_memory("recvbuf", dest, "sendbuf", sflat)
                same_dtype("recvbuf", dest, "sendbuf", sflat)
                check_no_alias("sendbuf", sflat, "recvbuf", dest)
            mine = dest.size
    counts = call.exchange(mine)
    with call.checking():
        total = sum(counts)
        if is_root:
            _check_counts("sendbuf counts", scounts, counts, "receives")
        like = dest if dest is not None else sflat
        fn = call.choose(algorithm, nbytes=total * like.itemsize // call.size, count=total,
                         dtype=like.dtype, root=root, counts=counts, like=(sflat, dest))
    call.settle()
    _run(call, total, like.itemsize, fn, sflat, dest, counts, sdispls, root)
    return out


def scatterv(sendbuf, recvbuf, root=0, *, comm=None, algorithm=None):
    """Send block i of ``sendbuf`` on ``root`` into ``recvbuf`` on rank i; return recvbuf.

    ``sendbuf`` (root only): a v-buffer spec (send blocks may overlap).
    Every rank's ``recvbuf`` size is its count. ``recvbuf=MPI.IN_PLACE`` on
    the root leaves its block in sendbuf (and returns None there).
    Per rank, N = 3, counts [1, 0, 2]: root's ``[1 3 3]`` -> ``[1]``, ``[]``, ``[3 3]``.
    """
    return _memo.run_specs("scatterv", _scatterv, comm, algorithm, (sendbuf, recvbuf), (root,), (root,))


# -- allgatherv ------------------------------------------------------------

def _allgatherv(call, bufs, algorithm):
    mine = -1
    with call.checking():
        rank = call.rank
        sendbuf, recvbuf = bufs()
        rv, rflat, rcounts, rdispls = _v_side("recvbuf", recvbuf, call.size, receive=True)
        if rv is MPI.IN_PLACE:
            raise ArgumentError("recvbuf: expected a receive buffer; got MPI.IN_PLACE",
                                MPI.ERR_BUFFER)
        if _is_in_place(sendbuf):
            if rv is None:
                raise ArgumentError(
                    "recvbuf: expected the receive buffer (sendbuf=MPI.IN_PLACE takes this "
                    "rank's block from it); got None", MPI.ERR_BUFFER)
            data = None
            mine = rcounts[rank]
        else:
            data = _send_side(sendbuf, rflat)
            mine = data.size
    counts = call.exchange(mine)
    with call.checking():
        total = sum(counts)
        if rv is None:                  # allocate: the blocks back to back, in rank order
            out = rflat = empty(data, total)
            rdispls = offsets(counts)[:-1]
        else:
            _check_counts("recvbuf counts", rcounts, counts, "sends")
            out = rv.obj
        fn = call.choose(algorithm, nbytes=total * rflat.itemsize // call.size, count=total,
                         dtype=rflat.dtype, counts=counts, like=(data, rflat))
    call.settle()
    _run(call, total, rflat.itemsize, fn, data, rflat, counts, rdispls)
    return out


def allgatherv(sendbuf, recvbuf=None, *, comm=None, algorithm=None):
    """Gather every rank's ``sendbuf`` (any size) into ``recvbuf`` on every rank.

    ``recvbuf``: a v-buffer spec (each rank's own displacements), or None
    to allocate a 1-D array with the blocks back to back in rank order.
    ``sendbuf=MPI.IN_PLACE``: this rank's block is already in recvbuf.
    Per rank, N = 3: ``[1]``, ``[]``, ``[3 3]`` -> ``[1 3 3]`` everywhere.
    """
    return _memo.run_specs("allgatherv", _allgatherv, comm, algorithm, (sendbuf, recvbuf), (), ())


# -- alltoallv -------------------------------------------------------------

_P = (1 << 61) - 1      # a Mersenne prime: checksums of counts live modulo it


def _mix(x):
    """splitmix64's finaliser: a well-spread 64-bit value for each (rank, peer) pair."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) % _P


def _pair_checksum(rank, size, sendcounts, recvcounts):
    """Σ_j w(rank, j)·sendcounts[j] - Σ_i w(i, rank)·recvcounts[i] (mod P).

    Summed over all ranks it is 0 when every rank i's sendcounts[j] equals
    rank j's recvcounts[i]; any mismatch leaves it non-zero but for a
    chance of about 2^-61.
    """
    s = sum(_mix(rank * size + j) * c for j, c in enumerate(sendcounts))
    r = sum(_mix(i * size + rank) * c for i, c in enumerate(recvcounts))
    return (s - r) % _P


def _alltoallv(call, bufs, algorithm):
    mine = 0
    with call.checking():
        size, rank = call.size, call.rank
        sendbuf, recvbuf = bufs()
        rv, rflat, rcounts, rdispls = _v_side("recvbuf", recvbuf, size, receive=True)
        if rv is None or rv is MPI.IN_PLACE:
            raise ArgumentError(
                f"recvbuf: expected a v-buffer spec (alltoallv cannot allocate: the receive "
                f"counts are the caller's); got {'None' if rv is None else 'MPI.IN_PLACE'}",
                MPI.ERR_BUFFER)
        in_place = _is_in_place(sendbuf)
        if in_place:                    # sent from a snapshot of recvbuf, with its layout
            sflat, scounts, sdispls = rflat, rcounts, rdispls
        else:
            sv, sflat, scounts, sdispls = _v_side("sendbuf", sendbuf, size, receive=False)
            if sv is None:
                raise ArgumentError("sendbuf: expected a v-buffer spec or MPI.IN_PLACE; got None",
                                    MPI.ERR_BUFFER)
            same_memory("sendbuf", sflat, "recvbuf", rflat)
            same_dtype("sendbuf", sflat, "recvbuf", rflat)
            check_no_alias("sendbuf", sflat, "recvbuf", rflat)
            if scounts[rank] != rcounts[rank]:
                raise ArgumentError(
                    f"sendbuf counts[{rank}] = {scounts[rank]} but recvbuf counts[{rank}] = "
                    f"{rcounts[rank]}: this rank's block to itself must match", MPI.ERR_COUNT)
        mine = _pair_checksum(rank, size, scounts, rcounts)
    sums = call.exchange(mine)
    with call.checking():
        if sum(sums) % _P:
            raise ArgumentError(
                "sendbuf/recvbuf counts: do not match between ranks (rank i's sendcounts[j] "
                "must equal rank j's recvcounts[i]); nothing was sent", MPI.ERR_COUNT)
        # Each rank's counts are its own: nothing about them is equal on every rank,
        # so auto looks at N only and checked mode has no count to compare.
        fn = call.choose(algorithm, nbytes=0, count=0, dtype=rflat.dtype, like=(sflat, rflat))
    call.settle()
    pro = None
    if in_place:
        sflat, pro = _snapshot(rflat)
    _run(call, sum(scounts) + sum(rcounts), rflat.itemsize, fn, sflat, rflat, scounts, sdispls,
         rcounts, rdispls, prologue=pro, local=True)
    return rv.obj


def alltoallv(sendbuf, recvbuf, *, comm=None, algorithm=None):
    """Send block j of ``sendbuf`` to rank j; block i of ``recvbuf`` comes from rank i.

    Both are v-buffer specs: rank i's ``sendcounts[j]`` must equal rank j's
    ``recvcounts[i]`` (checked on every rank). ``sendbuf=MPI.IN_PLACE``:
    recvbuf's blocks are sent and replaced. Returns recvbuf's buffer.
    Per rank, N = 2: ``[[a0 b0 b0], [1, 2]]``, ``[[c1], [0, 1]]`` ->
    ``[a0]``, ``[b0 b0 c1]`` (with recvcounts ``[1, 0]`` and ``[2, 1]``).
    """
    return _memo.run_specs("alltoallv", _alltoallv, comm, algorithm, (sendbuf, recvbuf), (), ())


# -- scan / exscan ---------------------------------------------------------

def _scan(call, bufs, op, algorithm):
    """Scan and exscan (``call.primitive`` says which): one vector in, one out, an op —
    validated exactly as allreduce is, so the allreduce implementation serves."""
    return _allreduce(call, bufs, op, algorithm)


def scan(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None):
    """Inclusive prefix reduction: rank i gets ranks 0..i's ``sendbuf`` reduced with ``op``.

    Any op, in rank order. ``sendbuf=MPI.IN_PLACE`` reduces ``recvbuf`` in place.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> ``[1 1]``, ``[3 3]``, ``[6 6]``.
    """
    return _memo.run("scan", _scan, comm, algorithm, (sendbuf, recvbuf), (op,), (op,))


def exscan(sendbuf, recvbuf=None, op=MPI.SUM, *, comm=None, algorithm=None):
    """Exclusive prefix reduction: rank i gets ranks 0..i-1's ``sendbuf`` reduced with ``op``.

    Rank 0's result is undefined in MPI: its ``recvbuf`` is left as it was
    (an allocated one is uninitialised). ``sendbuf=MPI.IN_PLACE`` takes the
    input from ``recvbuf``.
    Per rank, N = 3, SUM: ``[1 1]``, ``[2 2]``, ``[3 3]`` -> (rank 0: as it was), ``[1 1]``, ``[3 3]``.
    """
    return _memo.run("exscan", _scan, comm, algorithm, (sendbuf, recvbuf), (op,), (op,))
