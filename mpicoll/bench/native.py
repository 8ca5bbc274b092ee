"""Force the MPI library's own algorithm for one collective (like for like).

``--native-algorithm ring`` makes the ``native[ring]`` rows run the MPI
library's ring, so the hand-written ring is compared with the library's:

- MPICH: ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``, written at run time through
  the MPI tool interface (MPI_T, via ctypes: mpi4py has no MPI_T API). MPICH
  reads it on every call; every rank writes the same value, as the variable's
  scope requires, and the old value is restored afterwards.
- Open MPI: ``coll_tuned_use_dynamic_rules`` (a bool) + ``coll_tuned_<coll>_algorithm``
  (an enum: names from the library, e.g. ``ring``, ``recursive_doubling``,
  ``basic_linear``, or the number), written through MPI_T before the forced rows'
  communicator is created: coll/tuned copies the forced choice into a
  communicator's module when it is created, so the rows run on a fresh
  ``Dup_with_info`` that also carries ``ompi_comm_coll_preference=tuned``
  (Open MPI 5): coll/tuned then serves that communicator's collectives even
  where a higher-priority component would (coll/han across nodes, hcoll, ucc).
  The old values are restored afterwards; communicators created before or after
  keep the library's own choice. Where MPI_T refuses the write, the launcher's
  environment must have set the variables
  (``mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm ring``,
  or ``OMPI_MCA_coll_tuned_...``): that is checked and recorded.

Every forced row records what was done (``native_forced`` in the result
records): the variables and values written, how (``MPI_T`` or
``environment``), the values they replaced, the communicator info, and the
equivalent launcher setting (``equivalent``) to reproduce the run without
mpicoll.

MPICH exposes its algorithm CVARs as plain ints without an MPI_T enum; their
values follow the order of the names in the variable's description (checked
against any such variable the environment set).
"""
import contextlib
import ctypes
import os
import re

from mpi4py import MPI

from .specs import Declared

__all__ = ["family", "forcing", "cvar_names", "CVAR_COLL", "ForceError"]

#: primitive -> the collective's name in MPICH CVARs / Open MPI MCA variables: its spec's
#: ``native_coll``.
CVAR_COLL = Declared("native_coll")

#: Open MPI: the communicator info key that puts coll/tuned first for one communicator.
OMPI_PREFERENCE = {"ompi_comm_coll_preference": "tuned"}


class ForceError(RuntimeError):
    """An MPI library's algorithm could not be forced (``--native-algorithm``)."""

    pass


def family():
    """'mpich', 'openmpi' or 'other', from MPI_Get_library_version."""
    v = MPI.Get_library_version()
    if "Open MPI" in v:
        return "openmpi"
    if "MPICH" in v and "Intel" not in v:
        return "mpich"
    return "other"


def cvar_names(primitive, fam=None):
    """The variables that select ``primitive``'s algorithm in this MPI library."""
    coll = CVAR_COLL.get(primitive)
    if coll is None:
        raise ForceError(f"--native-algorithm: no MPI library variable is known for {primitive}")
    fam = fam or family()
    if fam == "mpich":
        return [f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM"]
    if fam == "openmpi":
        return ["coll_tuned_use_dynamic_rules", f"coll_tuned_{coll}_algorithm"]
    return []


class _MPIT:
    """The few MPI_T control-variable calls needed, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL(MPI.__file__)
        prov = ctypes.c_int()
        rc = self.lib.MPI_T_init_thread(MPI.THREAD_SINGLE, ctypes.byref(prov))
        if rc:
            raise ForceError(f"MPI_T_init_thread failed (error {rc})")

    def close(self):
        self.lib.MPI_T_finalize()

    def index(self, name):
        idx = ctypes.c_int()
        if self.lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(idx)):
            return None
        return idx.value

    def info(self, idx):
        name = ctypes.create_string_buffer(512)
        desc = ctypes.create_string_buffer(16384)
        nlen, dlen = ctypes.c_int(512), ctypes.c_int(16384)
        verb, bind, scope = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        dtype, enum = ctypes.c_void_p(), ctypes.c_void_p()
        rc = self.lib.MPI_T_cvar_get_info(idx, name, ctypes.byref(nlen), ctypes.byref(verb),
                                          ctypes.byref(dtype), ctypes.byref(enum), desc,
                                          ctypes.byref(dlen), ctypes.byref(bind),
                                          ctypes.byref(scope))
        if rc:
            raise ForceError(f"MPI_T_cvar_get_info failed (error {rc})")
        return dtype.value, enum.value, desc.value.decode("utf-8", "replace")

    def enum_items(self, enum):
        num, ename, elen = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_int(256)
        self.lib.MPI_T_enum_get_info(ctypes.c_void_p(enum), ctypes.byref(num), ename,
                                     ctypes.byref(elen))
        items = {}
        for i in range(num.value):
            val, nm, ln = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_int(256)
            if not self.lib.MPI_T_enum_get_item(ctypes.c_void_p(enum), i, ctypes.byref(val),
                                                nm, ctypes.byref(ln)):
                items[nm.value.decode()] = val.value
        return items

    def ctype(self, idx):
        """The C type of a control variable (Open MPI's flags are C bools, not ints)."""
        dtype = self.info(idx)[0]
        for name, ct in (("INT", ctypes.c_int), ("C_BOOL", ctypes.c_bool),
                         ("UNSIGNED", ctypes.c_uint), ("LONG", ctypes.c_long),
                         ("UNSIGNED_LONG", ctypes.c_ulong), ("LONG_LONG", ctypes.c_longlong),
                         ("UNSIGNED_LONG_LONG", ctypes.c_ulonglong)):
            mt = getattr(MPI, name, None)
            if mt is not None and dtype == mt.handle:
                return ct
        return None

    def handle(self, idx):
        h, count = ctypes.c_void_p(), ctypes.c_int()
        rc = self.lib.MPI_T_cvar_handle_alloc(idx, None, ctypes.byref(h), ctypes.byref(count))
        if rc or count.value != 1:
            raise ForceError(f"MPI_T_cvar_handle_alloc failed (error {rc})")
        h.ctype = self.ctype(idx) or ctypes.c_int
        return h

    def read(self, h):
        v = getattr(h, "ctype", ctypes.c_int)()
        rc = self.lib.MPI_T_cvar_read(h, ctypes.byref(v))
        if rc:
            raise ForceError(f"MPI_T_cvar_read failed (error {rc})")
        return int(v.value)

    def write(self, h, value):
        ct = getattr(h, "ctype", ctypes.c_int)
        return self.lib.MPI_T_cvar_write(h, ctypes.byref(ct(value)))

    def free(self, h):
        self.lib.MPI_T_cvar_handle_free(ctypes.byref(h))


_DESC_ITEM = re.compile(r"^\s*([A-Za-z0-9_]+)\s+-\s")


def _choices(mpit, idx, name):
    """The choices of an int (enum-like) control variable: name -> int value."""
    dtype, enum, desc = mpit.info(idx)
    if dtype != MPI.INT.handle:
        raise ForceError(f"{name}: not an integer control variable")
    if enum:
        items = mpit.enum_items(enum)
        if items:
            return items
    names = [m.group(1) for m in map(_DESC_ITEM.match, desc.splitlines()[1:]) if m]
    if not names:
        raise ForceError(f"{name}: no algorithm names in its description")
    return {n: i for i, n in enumerate(names)}


def _check_mapping(mpit, var, choices):
    """If the launcher set ``var`` by name, its value must match our mapping."""
    env = os.environ.get(var)
    if env and env in choices:
        h = mpit.handle(mpit.index(var))
        try:
            got = mpit.read(h)
        finally:
            mpit.free(h)
        if got != choices[env]:
            raise ForceError(f"{var}={env} reads back as {got}, not {choices[env]}: "
                             "the name -> value mapping is not trustworthy here")


def _equivalent(fam, want):
    """The launcher setting that forces the same outside mpicoll."""
    if fam == "openmpi":
        return " ".join(f"--mca {v} {w}" for v, w in want.items())
    return " ".join(f"{v}={w}" for v, w in want.items())


def _env_forced(fam, want, value):
    """True if the launcher's environment already sets every variable of ``want``."""
    for v, w in want.items():
        got = os.environ.get(f"OMPI_MCA_{v}" if fam == "openmpi" else v)
        ok = {w, str(value)} if v == list(want)[-1] else {w, "true", "True"}
        if got not in ok:
            return False
    return True


@contextlib.contextmanager
def forcing(primitive, name, comm):
    """Run the block with the library's ``name`` algorithm for ``primitive``.

    Yields ``(comm, setting)``: a fresh duplicate of ``comm`` to call on and a
    dict recording what was forced and how. Every rank must enter together.
    """
    fam = family()
    var = cvar_names(primitive, fam)
    if not var:
        raise ForceError(f"--native-algorithm: don't know how to force algorithms in "
                         f"{MPI.Get_library_version().splitlines()[0]}")
    mpit = _MPIT()
    restore = []
    setting = {"primitive": primitive, "name": name, "library": fam}
    try:
        writes = [(var[0], 1)] if fam == "openmpi" else []
        target = var[-1]
        idx = mpit.index(target)
        if idx is None:
            raise ForceError(f"{target}: no such control variable in this MPI library")
        choices = _choices(mpit, idx, target)
        if fam == "mpich":
            _check_mapping(mpit, target, choices)
        value = int(name) if name.isdigit() else choices.get(name)
        if value is None:
            raise ForceError(f"--native-algorithm {name}: {target} accepts "
                             f"{', '.join(choices)}")
        writes.append((target, value))
        # What the launcher would set for the same effect (names, as users write them).
        want = {var[0]: "1", target: name} if fam == "openmpi" else {target: name}
        method, previous = "MPI_T", {}
        for vname, val in writes:
            vidx = mpit.index(vname)
            if vidx is None:
                raise ForceError(f"{vname}: no such control variable")
            h = mpit.handle(vidx)
            old = mpit.read(h)
            rc = mpit.write(h, val)
            if rc:
                mpit.free(h)
                method = None
                break
            restore.append((h, old))
            previous[vname] = old
        if method is None:       # not settable at run time: the launcher must have set it
            if not _env_forced(fam, want, value):
                how = (f"`mpirun {_equivalent(fam, want)} ...` (or OMPI_MCA_* variables)"
                       if fam == "openmpi" else f"`{_equivalent(fam, want)} mpiexec ...`")
                raise ForceError(f"{target} cannot be set at run time here; launch with {how}")
            method = "environment"
        setting.update(variable=target, value=value, method=method,
                       variables={v: val for v, val in writes}, previous=previous,
                       equivalent=_equivalent(fam, want))
        if fam == "openmpi":
            # coll/tuned reads the forced values when a communicator is created; the
            # preference makes it serve this one even where han/hcoll/ucc rank higher.
            info = MPI.Info.Create()
            for k, v in OMPI_PREFERENCE.items():
                info.Set(k, v)
            try:
                fresh = comm.Dup_with_info(info)
            finally:
                info.Free()
            setting["comm_info"] = dict(OMPI_PREFERENCE)
        else:
            fresh = comm.Dup()
        try:
            yield fresh, setting
        finally:
            fresh.Free()
    finally:
        for h, old in reversed(restore):
            mpit.write(h, old)
            mpit.free(h)
        mpit.close()
