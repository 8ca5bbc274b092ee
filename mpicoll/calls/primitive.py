"""What a primitive is to mpicoll: one :class:`Primitive`, defined by its module in ``calls/``.

A primitive's module holds every fact about the collective that is not an
algorithm (the algorithms live in :mod:`mpicoll.coll`):

- ``api``: its functions' *binders* — ``def allreduce(sendbuf, recvbuf=None,
  op=MPI.SUM)`` whose signature and docstring are the public function's and
  whose body says which parameters are buffers and what the implementation
  gets (``return (sendbuf, recvbuf), (op,)``). The blocking function, its
  nonblocking ``i`` form and its persistent ``_init`` form are generated from
  it (:mod:`mpicoll.api`), with ``comm=`` and ``algorithm=`` added.
- ``run(call, bufs, *args, algorithm)``: the one implementation behind every
  face — validation inside ``call.checking()``, the agreement
  (``call.settle()``), the launch (:func:`mpicoll.engine.launch.run_call`).
  ``bufs`` is a zero-argument callable returning the buffers, so that parsing
  errors are held and agreed like any other.
- ``methods``: mpi4py's methods (``def Allreduce(comm, call, bnd, algorithm,
  sendbuf, recvbuf, op=MPI.SUM)``), parsing mpi4py's buffer forms and calling
  ``run``; :class:`mpicoll.P2PComm`'s blocking, ``I...`` and ``..._init``
  methods are generated from their signatures (:mod:`mpicoll.comm`).
- ``call_arrays``: its algorithms' arguments on one rank with arrays as
  lengths, for recording plans without a communicator.
- ``spec``: its bench and test spec (:class:`mpicoll.calls.spec.Spec`): buffer
  layout, exact input and expected output, bus-bandwidth factor, and how
  mpi4py, NCCL and torch.distributed run the same collective and what the MPI
  libraries call it (the bench's reference columns and ``--native-algorithm``), and
  SMPI's trace action and MPICH's rule for it (``bench simulate``'s native rows).
- ``auto``: the rule ``algorithm="auto"`` follows where the tuning table does not
  decide (:class:`mpicoll.core.rules.Auto`: ordered ``Rule(algorithm, condition)``
  entries whose description, :data:`mpicoll.DEFAULTS_TABLE`, is written from the
  same thresholds). None: the first hand-written algorithm that takes the op.
- ``symbolic(k)``: what a call must leave, for ``python -m mpicoll.verify``: given
  a :class:`mpicoll.verify.spec.Symbolic` (the case, its symbolic values, helpers),
  every rank's algorithm arguments, its buffers' initial and expected final values
  and their roles. None: the verifier cannot check this primitive's algorithms.
  It and the spec's expected output must agree (``tests/test_specs_agree.py``
  evaluates it on the spec's input data).
- ``soak(k)``: one random case of ``python -m mpicoll.testing.soak``: given a
  :class:`mpicoll.testing.soak.SoakCase` (the drawn case, this rank's input, the
  public functions, helpers that make the soak's seeded draws), the call run with
  mpicoll and natively (mpi4py on the same communicator): ``(got, want)``, compared
  bitwise by the soak, or the text of a failure (``"scatter modified the root's
  sendbuf"``). None: the soak does not draw this primitive.
- ``count_kind``: what ``count`` means to ``call_arrays`` and the algorithms:
  ``"block"`` (one rank's block: gather, scatter, alltoall and the v primitives'
  even counts), ``"vector"`` (every rank's whole vector, reduced or split among
  the ranks: bcast, reduce, allreduce, reduce_scatter, the scans), None (no
  data: barrier). The verifier picks its counts by it.
- ``in_place``: its algorithms take the in-place form themselves (the in-place
  buffer passed as None); otherwise the face runs them on a copy, and the
  verifier does not try it.
"""
import inspect

from ..core import registry

__all__ = ["Primitive", "define", "DEFINED", "BUFFER_NAMES", "binder_parts"]

#: Parameter names that are buffers (memo keys, by identity) in binders and methods.
BUFFER_NAMES = ("sendbuf", "recvbuf", "buf")

#: name -> :class:`Primitive`, in definition order.
DEFINED = {}


class Primitive:
    """One collective, defined by its module in ``calls/``: :mod:`mpicoll.calls.primitive`."""

    __slots__ = ("name", "run", "api", "methods", "call_arrays", "spec", "vspecs", "reduces",
                 "auto", "symbolic", "soak", "count_kind", "in_place")

    def __init__(self, name, *, run, api, call_arrays, methods=(), spec=None, vspecs=False,
                 reduces=False, auto=None, symbolic=None, soak=None, count_kind="block",
                 in_place=False):
        self.name = name
        self.run = run
        self.api = tuple(api)
        self.methods = tuple(methods)
        self.call_arrays = call_arrays
        self.spec = spec
        self.vspecs = vspecs          # buffers are v-buffer specs: the memo keys on their parts
        self.reduces = reduces        # it takes an op
        self.auto = auto              # auto's rule (core.rules.Auto), or None
        self.symbolic = symbolic      # the verifier's spec (see the module docstring)
        self.soak = soak              # the soak's case (see the module docstring)
        self.count_kind = count_kind  # "block", "vector" or None (see the module docstring)
        self.in_place = in_place      # its algorithms take the in-place form themselves


def define(primitive):
    """Define ``primitive`` (a :class:`Primitive`) in the registry; return it."""
    registry.define(primitive.name, primitive.call_arrays, reduces=primitive.reduces,
                    auto=primitive.auto)
    DEFINED[primitive.name] = primitive
    if primitive.spec is not None:
        primitive.spec.name = primitive.name
    return primitive


def binder_parts(fn, skip=0):
    """(parameters, buffer parameter names, other parameters) of a binder or method.

    Only the parameters after the first ``skip`` ones count.
    """
    params = list(inspect.signature(fn).parameters.values())[skip:]
    bufs = [p.name for p in params if p.name in BUFFER_NAMES]
    others = [p for p in params if p.name not in BUFFER_NAMES]
    return params, bufs, others
