"""What the vector collectives' runs share: the v side parsed and checked; the launch."""
from mpi4py import MPI

from ..args.buffers import as_array, check_no_alias, is_in_place, same_dtype, same_memory
from ..args.vbuffers import layout, parse_vspec
from ..core.blocks import offsets
from ..core.errors import ArgumentError
from ..device.arrays import empty
from ..engine.launch import run_call
from ..sched.inspect import Len

__all__ = ["v_side", "check_counts_match", "send_side", "gathered_send", "gathered", "launch",
           "v_counts", "v_whole"]


def v_side(argname, spec, size, *, receive):
    """A v-buffer spec (or VSpec) -> (VSpec, flat array, counts, displs).

    None and MPI.IN_PLACE come back as (spec, None, None, None).
    """
    v = parse_vspec(argname, spec)
    if v is None or v is MPI.IN_PLACE:
        return v, None, None, None
    flat = v.flat = as_array(argname, v.flat, writable=receive)
    counts, displs = layout(argname, v, size, receive=receive)
    return v, flat, counts, displs


def check_counts_match(argname, given, sent, what):
    """The counts a rank gave (``given``) against what the ranks really have (``sent``)."""
    if given == sent:
        return
    bad = [i for i in range(len(sent)) if given[i] != sent[i]]
    shown = "; ".join(f"{argname}[{i}] = {given[i]} but rank {i} {what} {sent[i]}"
                      for i in bad[:4])
    more = f" (and {len(bad) - 4} more)" if len(bad) > 4 else ""
    raise ArgumentError(f"{argname}: do not match the ranks' buffers - {shown}{more}",
                        MPI.ERR_COUNT)


def send_side(sendbuf, recv_flat):
    """``sendbuf`` (not in place) checked against the receive buffer of the same call."""
    data = as_array("sendbuf", sendbuf)
    if recv_flat is not None:
        same_memory("sendbuf", data, "recvbuf", recv_flat)
        same_dtype("sendbuf", data, "recvbuf", recv_flat)
        check_no_alias("sendbuf", data, "recvbuf", recv_flat)
    return data


def gathered_send(sendbuf, rv, rflat, rcounts, me, whose):
    """A gathering call's (sendbuf array, its count); in place: (None, recvbuf block ``me``'s)."""
    if is_in_place(sendbuf):
        if rv is None:
            raise ArgumentError(
                f"recvbuf: expected the receive buffer (sendbuf=MPI.IN_PLACE takes {whose} "
                f"block from it); got None", MPI.ERR_BUFFER)
        return None, rcounts[me]
    data = send_side(sendbuf, rflat)
    return data, data.size


def gathered(data, rv, rflat, rcounts, rdispls, counts):
    """(output, send, recv, displs) once ``counts`` are known: recvbuf allocated or checked.

    recvbuf None is allocated: a 1-D array, the blocks back to back in rank order.
    """
    if rv is None:
        rflat = empty(data, sum(counts))
        return rflat, data, rflat, offsets(counts)[:-1]
    check_counts_match("recvbuf counts", rcounts, counts, "sends")
    return rv.obj, data, rflat, rdispls


def launch(call, algorithm, counts, settled, root=None):
    """Choose by the mean block, agree, run on ``settled()``'s (output, send, recv, displs)."""
    with call.checking():
        out, send, recv, displs = settled()     # checked with the others (counts known now)
        total = sum(counts)
        like = send if send is not None else recv
        fn = call.choose(algorithm, nbytes=total * like.itemsize // call.size, count=total,
                         dtype=like.dtype, root=root, counts=counts, like=(send, recv))
    call.settle()
    rooted = () if root is None else (root,)
    run_call(call, total, like.itemsize, fn, send, recv, counts, displs, *rooted)
    return out


def v_counts(size, count, counts):
    """``call_arrays``' per-rank counts: ``counts``, or ``count`` for every rank."""
    return [count] * size if counts is None else [int(c) for c in counts]


def v_whole(cs, here):
    """``call_arrays``' whole v-buffer where ``here``: (Len, back-to-back displs); else Nones."""
    return (Len(sum(cs)), offsets(cs)[:-1]) if here else (None, None)
