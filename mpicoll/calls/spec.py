"""A primitive's bench and test spec: buffer layout, exact data, expected results, bus factor.

nccl-tests' model (``src/common.cu`` + one spec per collective): the size of
a row is the bytes of the operation's largest buffer (the whole vector for
bcast/reduce/allreduce/scan/exscan, all N blocks for gather/allgather/
scatter/reduce_scatter/alltoall and their v variants); ``count`` its
elements. algbw = size / time; busbw = algbw x :meth:`Spec.busbw`.

Check data are exact whatever the summation order: every rank's input is a
small non-negative integer pattern whose reduction (SUM, PROD, MIN, MAX) is
known in closed form and representable without rounding in the dtype
(integer SUM wraps modulo 2^bits, identically in any order); the case object
(:class:`mpicoll.bench.specs.Case`) provides it as ``red_input`` and
``red_expected``. Outputs are filled with a sentinel (:func:`sentinel`:
NaN, or the dtype's maximum, which inputs never take) before a checked call,
so an element the algorithm never wrote is counted wrong.

A spec names the blocking function that runs the primitive (``function``)
and the positional arguments it takes for a case (:meth:`Spec.args`); the
bench and the tests call it through the public face.

It also says how other libraries run the same collective, for the bench's
reference columns: the plain mpi4py call (:attr:`Spec.raw`,
:meth:`Spec.raw_call`), the collective's name in the MPI libraries' algorithm
variables (:attr:`Spec.native_coll`), NCCL's call (:attr:`Spec.nccl_method`,
:meth:`Spec.nccl_args`), torch.distributed's (:attr:`Spec.torch_fn`,
:meth:`Spec.torch_call`), and SMPI's (the trace action of ``bench simulate``'s native
rows, :meth:`Spec.smpi_actions`, and MPICH's choice of algorithm as SMPI writes its rules,
:meth:`Spec.mpich_choice`). These are the primitive's own (:data:`OWN`): a
subclass does not inherit them, since a spec subclassed for its layout (scan
from allreduce, a plug-in's twin) is another collective.
"""
import numpy as np

__all__ = ["Spec", "RootedBlocks", "blocks_data", "cap", "sentinel", "all_but_own",
           "in_place_torch", "PRIME", "OWN"]

PRIME = 7919           # block stride of the data pattern: neighbouring blocks differ

#: The attributes a spec class declares for its own primitive only (not inherited).
OWN = ("raw", "raw_call", "native_coll", "nccl_method", "nccl_args", "torch_fn",
       "torch_call", "smpi_actions", "mpich_choice")


def cap(dtype):
    """Inputs take values in [0, cap): exact in the dtype and below its sentinel."""
    if dtype.kind in "iu":
        return min(int(np.iinfo(dtype).max), 1 << 24)
    return 1 << min(np.finfo(dtype).nmant + 1, 31)


def sentinel(dtype):
    """What outputs hold before a checked call (inputs never take it)."""
    return np.nan if dtype.kind == "f" else np.iinfo(dtype).max


def blocks_data(a, k, dtype):
    """Data of block ``a`` (int or array), elements ``k``: distinct neighbours, exact."""
    return ((np.asarray(a, dtype=np.int64) * PRIME + k) % cap(dtype)).astype(dtype)


class Spec:
    """Defaults shared by the primitives; each primitive's spec fills in its layout and call.

    ``rooted``: the call takes a root; ``reduces``: it takes an op; ``blocked``:
    the size holds N blocks of one rank each. ``function``: the blocking function
    of the public face that runs it (default: the primitive's name).
    """

    name = ""
    function = None
    rooted = False
    reduces = False
    blocked = False
    #: The plain mpi4py call that runs it, as text (the bench's ``raw`` column; None: none).
    raw = None
    #: Its name in MPICH's ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` and Open MPI's
    #: ``coll_tuned_<coll>_algorithm`` (``--native-algorithm``; None: no such variable).
    native_coll = None
    #: The ``cupy.cuda.nccl.NcclCommunicator`` method that runs it (the bench's ``nccl``
    #: column; None: NCCL has no such collective).
    nccl_method = None
    #: The ``torch.distributed`` function that runs it (the bench's torch columns; None:
    #: torch has none).
    torch_fn = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        # Another primitive's calls would run the wrong collective: each class declares its own.
        for attr in OWN:
            if attr not in cls.__dict__:
                setattr(cls, attr, Spec.__dict__[attr])

    def busbw(self, n):
        """nccl-tests' bus-bandwidth factor at ``n`` ranks (None: no bandwidth)."""
        return None

    def layout(self, nbytes, itemsize, n):
        """(count, block): elements in the size, elements per rank's block."""
        if self.blocked:
            block = max(1, nbytes // (n * itemsize)) if nbytes else 0
            return n * block, block
        count = max(1, nbytes // itemsize) if nbytes else 0
        return count, count

    def call_count(self, case):
        """The ``count`` that ``algorithm="auto"`` sees (one rank's block, or the vector)."""
        return case.block if self.blocked else case.count

    def call_nbytes(self, case):
        """The ``nbytes`` that ``algorithm="auto"`` sees: one rank's block, or the vector."""
        return self.call_count(case) * case.dtype.itemsize

    def alloc(self, case):
        """Allocate ``case.send`` and ``case.recv`` (None where this rank has none).

        With ``case.am.empty(n, dtype)``, or ``case.am.empty_on(mine, n, dtype)`` for a
        buffer some ranks only have: every rank makes the same calls (shared-memory buffers
        are made collectively).
        """
        raise NotImplementedError

    def io(self, case):
        """(input array or None, output array or None) on this rank."""
        return case.send, case.recv

    def input_fn(self, case):
        """Global element index -> this rank's input value."""
        raise NotImplementedError

    def output_fn(self, case):
        """Global element index -> this rank's expected output value."""
        raise NotImplementedError

    def args(self, case):
        """The positional arguments of :attr:`function` for this case."""
        raise NotImplementedError

    def raw_call(self, case, comm):
        """A zero-argument callable making the mpi4py call :attr:`raw` on ``case``'s buffers."""
        raise NotImplementedError(f"{self.name or type(self).__name__}: its spec declares no "
                                  f"plain mpi4py call (Spec.raw and Spec.raw_call)")

    def nccl_args(self, case, send, recv, dtype, op, stream):
        """The arguments of :attr:`nccl_method` for ``case``, in NCCL's order and counts.

        ``send``/``recv``: the buffers' device addresses (0 where a rank has none);
        ``dtype``/``op``: NCCL's codes; ``stream``: a CUDA stream handle.
        """
        raise NotImplementedError(f"{self.name or type(self).__name__}: its spec declares no "
                                  f"NCCL call (Spec.nccl_method and Spec.nccl_args)")

    def torch_call(self, case, fn, send, recv, op, group):
        """A zero-argument callable: ``fn`` (:attr:`torch_fn`) on ``case``'s buffers.

        ``send``/``recv``: tensors sharing the case's arrays (None where a rank has
        none); ``op``: the ``dist.ReduceOp``; ``group``: the process group. The
        caller waits for the device afterwards.
        """
        raise NotImplementedError(f"{self.name or type(self).__name__}: its spec declares no "
                                  f"torch.distributed call (Spec.torch_fn and Spec.torch_call)")

    def smpi_actions(self, rank, n, nbytes, root):
        """SMPI's time-independent trace lines of one call on ``rank`` (None: none written).

        ``nbytes``: the bench's size (the vector, or all ranks' blocks together), in the
        replay's ``MPI_BYTE``; ``bench simulate``'s ``native[...]`` rows replay them.
        """
        return None

    def mpich_choice(self, n, nbytes, itemsize):
        """MPICH's algorithm for one call, as SMPI writes MPICH's rules (None: none written).

        The name of SMPI's implementation (``--cfg=smpi/<primitive>:<name>``), from
        SimGrid's ``smpi_mpich_selector.cpp``; ``nbytes`` as in :meth:`smpi_actions`.
        """
        return None


def all_but_own(self, n):
    """nccl-tests' factor: (n - 1) / n."""
    return (n - 1) / n


def in_place_torch(fn, send, target, **kw):
    """A zero-argument callable: ``send`` copied into ``target``, then ``fn(target, **kw)``."""
    def run():
        target.copy_(send)
        fn(target, **kw)
    return run


class RootedBlocks(Spec):
    """Gather's and scatter's base: N blocks on the root, one a rank; ``(send, recv, root)``."""

    rooted = blocked = True
    busbw = all_but_own

    def args(self, c):
        """The arguments: ``(send, recv, root)``."""
        return (c.send, c.recv, c.root)


class VCounts:
    """Mixin of the v specs: equal counts, blocks back to back.

    The blocks lie as OSU's v-benchmarks lay them out, passed in mpi4py's
    ``[buf, counts]`` form.
    """

    def alloc(self, c):
        super().alloc(c)
        c.vcounts = [c.block] * c.n
