"""What the vector collectives' implementations share: the v side parsed and checked."""
from mpi4py import MPI

from ..args.buffers import as_array, check_no_alias, same_dtype, same_memory
from ..args.vbuffers import layout, parse_vspec
from ..core.errors import ArgumentError

__all__ = ["v_side", "check_counts_match", "send_side"]


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
