"""A toy primitive in one file: ``allgather_twin``, allgather under another name.

Importing this module (``--import tests/support/toy_primitive.py`` for the demo
and the bench, ``MPICOLL_TEST_PLUGINS`` for the generated test matrix) is all
it takes: the primitive gets its functions (``mpicoll.allgather_twin``,
``iallgather_twin``, ``allgather_twin_init``), its ``P2PComm`` methods, a place
in the registry, and two algorithms (a neighbour exchange written here, and
the MPI library's own), and every tool lists, runs and checks it (the soak
too: it has a soak case).
"""
from mpi4py import MPI

import mpicoll
from mpicoll.calls import Primitive
from mpicoll.calls import allgather as _allgather


def allgather_twin(sendbuf, recvbuf=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank (allgather's twin)."""
    return (sendbuf, recvbuf), ()


def Allgather_twin(comm, call, bnd, algorithm, sendbuf, recvbuf):
    _allgather.Allgather(comm, call, bnd, algorithm, sendbuf, recvbuf)


class TwinSpec(_allgather.AllgatherSpec):
    function = "allgather_twin"


def soak(k):
    """The soak's case (``python -m mpicoll.testing.soak``): as ``comm.Allgather``."""
    got = k.run(k.api.allgather_twin, k.mine, None, inout=k.own_row)
    want = k.empty(k.size, k.c)
    k.comm.Allgather(k.mine, want)
    return got, want


mpicoll.define_primitive(Primitive(
    "allgather_twin", run=_allgather.run, api=(allgather_twin,), methods=(Allgather_twin,),
    call_arrays=_allgather.call_arrays, spec=TwinSpec(), soak=soak))


@mpicoll.register("allgather_twin", "native")
def twin_native(ctx, sendbuf, recvbuf):
    """The MPI library's own ``MPI_Allgather``."""
    ctx.mpi.Allgather(MPI.IN_PLACE if sendbuf is None else sendbuf, recvbuf)


@mpicoll.register("allgather_twin", "neighbours")
def twin_neighbours(ctx, sendbuf, recvbuf):
    """Every rank sends its block to every other rank directly, one peer per step.

    Cost: (N-1)(α + nβ); N-1 steps.
    """
    size, rank, c = ctx.size, ctx.rank, sendbuf.size
    ctx.copy(recvbuf[rank * c:(rank + 1) * c], sendbuf)
    for s in range(1, size):
        to, frm = (rank + s) % size, (rank - s) % size
        ctx.sendrecv(recvbuf[rank * c:(rank + 1) * c], to, recvbuf[frm * c:(frm + 1) * c], frm)
