"""The MPI library's own collectives in the simulation: SMPI's implementations of them.

A native call is one collective action per rank (sizes in bytes, the
replay's ``MPI_BYTE``), which SMPI runs with the algorithm its settings name:

- ``native[ompi]``: SMPI's Open MPI selector (``--cfg=smpi/coll-selector:ompi``),
  Open MPI's ``coll/tuned`` decision rules;
- ``native[mpich]``: MPICH's decision rules as SMPI writes them
  (``smpi_mpich_selector.cpp``), applied here and the chosen algorithm forced
  (``--cfg=smpi/allreduce:rab_rdb`` ...): SimGrid 3.32's own ``mpich``
  selector crashes in the replay for allreduce and bcast (it first builds
  SMP communicators and dereferences the replay's ``MPI_OP_NULL``), so its
  flat branch — what MPICH runs on one rank per node — is taken.

Each primitive's spec declares its action and MPICH's rule for it
(:meth:`mpicoll.calls.spec.Spec.smpi_actions`, :meth:`~mpicoll.calls.spec.Spec.mpich_choice`
in ``mpicoll/calls/<primitive>.py``); a primitive without them has no native rows.

SMPI's replay reduces nothing (its op is ``MPI_OP_NULL``): the reduction
work of a native reducing call is added as one local step after it, of the
bytes its algorithm reduces on the critical path (:func:`reduced_bytes`; an
estimate for Open MPI's choices: ``n(p-1)/p``).
"""
from mpicoll.calls import DEFINED
from mpicoll.calls.spec import Spec
from mpicoll.core.views import LiveView

__all__ = ["SELECTORS", "mpich_choice", "actions", "settings", "reduced_bytes", "PRIMITIVES"]

SELECTORS = ("mpich", "ompi")


def _writes_actions(p):
    spec = DEFINED[p].spec
    return spec is not None and type(spec).smpi_actions is not Spec.smpi_actions


#: The primitives whose spec writes SMPI's action for them (native rows), read at each use.
PRIMITIVES = LiveView(lambda: DEFINED, lambda p: True if p in DEFINED and _writes_actions(p)
                      else None, "Primitives with native rows in the simulation.")


def _spec(primitive):
    if primitive not in PRIMITIVES:
        raise ValueError(f"native: no SMPI action written for {primitive} "
                         f"(supported: {', '.join(PRIMITIVES)})")
    return DEFINED[primitive].spec


def mpich_choice(primitive, nranks, nbytes, itemsize):
    """SMPI's MPICH algorithm for one call (``nbytes``: the bench's unit, :func:`actions`)."""
    alg = _spec(primitive).mpich_choice(nranks, nbytes, itemsize)
    if alg is None:
        raise ValueError(f"native[mpich]: no rules for {primitive}")
    return alg


def settings(primitive, selector, nranks, nbytes, itemsize):
    """(``--cfg`` settings, algorithm name) of a native call."""
    if selector == "ompi":
        return ("--cfg=smpi/coll-selector:ompi",), "ompi"
    if selector == "mpich":
        alg = mpich_choice(primitive, nranks, nbytes, itemsize)
        return (f"--cfg=smpi/{primitive}:{alg}",), alg
    raise ValueError(f"native selector: expected one of {', '.join(SELECTORS)}; got {selector!r}")


def reduced_bytes(primitive, algorithm, nranks, nbytes):
    """Bytes one rank reduces along the critical path of a native reducing call (0: none)."""
    N = nranks
    if not DEFINED[primitive].reduces or N < 2:
        return 0
    lg = (N - 1).bit_length()
    if algorithm in ("rdb", "binomial"):
        return nbytes * lg
    return nbytes * (N - 1) // N


def actions(primitive, rank, nranks, nbytes, root=0):
    """The TI action lines of one native call on ``rank``.

    ``nbytes``: the bench's size — the vector (allreduce, bcast, reduce), all
    ranks' blocks together (allgather, reduce_scatter).
    """
    return _spec(primitive).smpi_actions(rank, nranks, nbytes, root)
