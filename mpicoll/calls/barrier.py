"""barrier: no rank leaves before every rank has entered (``MPI_Barrier``)."""
from ..core.rules import Auto, Rule
from ..engine.launch import run_call
from ..engine.nonblocking import empty_request
from .primitive import Primitive, define
from .spec import Spec


def barrier():
    """Block until every rank of ``comm`` has called barrier."""
    return (), ()


def run(call, bufs, algorithm):
    """The barrier implementation (every face): validate, agree, launch."""
    with call.checking():
        fn = call.choose(algorithm)
    call.settle()
    if call.size == 1:
        call.ctx()                     # recorded for traffic()
        if call.kind is not None:
            empty_request(call, None)
        return
    run_call(call, 0, 0, fn)


def Barrier(comm, call, bnd, algorithm):
    """mpi4py's ``Barrier``: :func:`run`."""
    run(call, None, algorithm)


def call_arrays(size, rank, count, root=0, counts=None, op=None):
    """Barrier's algorithm arguments: none."""
    return ()


class BarrierSpec(Spec):
    """The bench and test spec of barrier: no data."""

    raw = "comm.Barrier()"
    native_coll = "barrier"
    torch_fn = "barrier"

    def layout(self, nbytes, itemsize, n):
        """No data: count 0, block 0."""
        return 0, 0

    def alloc(self, c):
        """No buffers."""
        pass

    def io(self, c):
        """No input, no output."""
        return None, None

    def args(self, c):
        """No arguments."""
        return ()

    def raw_call(self, c, comm):
        """``comm.Barrier()``."""
        return lambda: comm.Barrier()

    def torch_call(self, c, fn, send, recv, op, group):
        """``dist.barrier()``."""
        return lambda: fn(group=group)


def symbolic(k):
    """The verifier's spec: no buffers; every exit follows every entry (its executor checks)."""
    return [k.Rank((), [], [], []) for _ in range(k.N)]


def soak(k):
    """The soak's case: the barrier, then ``comm.Barrier``; nothing to compare."""
    k.api.barrier(**k.kw)
    k.comm.Barrier()
    return k.nothing()


#: auto's rule.
AUTO = Auto(Rule("dissemination"))

PRIMITIVE = define(Primitive("barrier", run=run, api=(barrier,), methods=(Barrier,),
                             count_kind=None,
                             call_arrays=call_arrays, spec=BarrierSpec(),
                             auto=AUTO, symbolic=symbolic, soak=soak))
