"""The fingerprint every rank contributes to a call's agreement step.

One fixed-size ``int64`` vector per rank and call, gathered with a single
native ``Allgather`` on the private communicator by :meth:`Call.settle`. It
carries this rank's validation outcome and what the ranks must agree on: the
primitive under its face (``allreduce``, ``iallreduce``, ``allreduce_init``:
:func:`face_name`), the algorithm, op, dtype, count and root, and for checked
mode also the recvcounts and the call's sequence number on the communicator. Names
are packed as bytes, so every rank can decode every other rank's fingerprint
and the mismatch message is built from the gathered matrix alone: it is the
same text on every rank.

Pure functions, no communication: unit-testable on synthetic matrices.
"""
import struct
import zlib

import numpy as np
from mpi4py import MPI

from ..core.errors import ArgumentError

__all__ = ["L", "SETTLE", "EXCHANGE", "FLAG_ERROR", "FLAG_CHECKED", "FLAG_RECORDED", "FLAG_IPC",
           "FLAG_PERSISTENT", "face_name", "face_flags", "build", "build_bytes", "matrix",
           "differences", "mismatch_message", "CollectiveMismatchError", "op_code", "dtype_code"]

MAGIC = 0x6D63_6F6C_6C00          # "mcoll" + phase byte
# phases: the agreement before running / Reduce_scatter's count exchange
SETTLE, EXCHANGE = 1, 2

# Columns of the vector.
# FLAGS and PAYLOAD come last: on the fast path every rank's vector is byte-identical
# (same call, no error, same mode), which settle() checks with one bytes comparison.
# The first twelve words depend only on what is called (cached per call signature).
C_MAGIC, C_PRIM, C_ALGO, C_OP, C_DTYPE, C_ROOT, C_COUNTS, C_SEQ, C_COUNT, C_FLAGS, C_PAYLOAD = \
    0, 1, 4, 8, 9, 10, 11, 12, 13, 14, 15
_PRIM_WORDS, _ALGO_WORDS = 3, 4    # 16 and 24 bytes of name, then a CRC of the whole name
L = 16                             # int64 words per rank (128 bytes)

FLAG_ERROR = 1       # validation failed on this rank
FLAG_CHECKED = 2     # this rank runs in checked mode
FLAG_RECORDED = 4    # the call-description fields (algorithm .. recvcounts) are filled
FLAG_IPC = 8         # device buffers through the ipc protocol (compared between a node's ranks)
FLAG_PERSISTENT = 16  # a persistent ..._init call: it took a persistent request tag
IPC_EAGER_SHIFT = 8  # with FLAG_IPC, the flags' higher bits carry the ipc eager limit (bytes)

_NONE = -1           # root / recvcounts of calls without one


class CollectiveMismatchError(ArgumentError):
    """The ranks made calls that do not match.

    The ranks called different collectives, chose different algorithms for one call, or
    passed a different op, dtype, count or root (any mode with an agreement step: ``agree``
    and ``checked``); in checked mode also different recvcounts or call numbers.

    Raised with the same message on every rank, before anything is sent.
    ``differences`` lists ``(field, {value: [ranks]})``.
    """

    def __init__(self, message, error_class=MPI.ERR_OTHER, differences=()):
        super().__init__(message, error_class)
        self.differences = list(differences)

    def __reduce__(self):
        return (type(self), (self.message, self.Get_error_class(), self.differences))


# -- packing ------------------------------------------------------------------

_packed = {}


def _pack(text, words):
    """Text -> ``words`` int64: its first 8*(words-1) bytes and a CRC of all of it."""
    key = (text, words)
    out = _packed.get(key)
    if out is None:
        raw = text.encode("utf-8", "replace")
        head = np.frombuffer(raw[:8 * (words - 1)].ljust(8 * (words - 1), b"\0"), np.int64)
        out = tuple(int(v) for v in head) + (zlib.crc32(raw),)
        _packed[key] = out
    return out


def _unpack(row):
    head = np.asarray(row[:-1], dtype=np.int64).tobytes().rstrip(b"\0")
    return head.decode("utf-8", "replace")


def face_name(primitive, kind):
    """The name a call travels under.

    ``allreduce`` (blocking), ``iallreduce`` (nonblocking, ``kind`` "start"),
    ``allreduce_init`` (persistent, "init").
    The primitive's name, not the function's: ``reduce_scatter_block`` calls
    travel as ``reduce_scatter`` (their recvcounts tell them apart in checked mode).

    The face is part of what the ranks must agree on: a blocking call and a
    persistent ``_init`` call meet in the same ``Allgather`` agreement, and
    would otherwise agree -- then one rank runs the algorithm and the other
    waits for ``Start`` (a hang). (A nonblocking call's agreement is an
    ``Iallgather``, which never meets a blocking one: see :mod:`mpicoll.engine.call`.)
    """
    if kind is None:
        return primitive
    return "i" + primitive if kind == "start" else primitive + "_init"


def face_flags(kind):
    """The flags a call's face sets.

    :data:`FLAG_PERSISTENT` for a persistent ``_init`` call ("init"), none otherwise.
    """
    return FLAG_PERSISTENT if kind == "init" else 0


_FACE_NAMES = {}


def _primitive_display(row):
    """A primitive's name from its words: whole where known, else those 16 bytes.

    Known names are looked up by their words; only the first 16 bytes travel.
    """
    if not _FACE_NAMES:
        from ..core.registry import PRIMITIVES
        for p in PRIMITIVES:
            for kind in (None, "start", "init"):
                name = face_name(p, kind)
                _FACE_NAMES[_pack(name, _PRIM_WORDS)] = name
    return _FACE_NAMES.get(tuple(int(v) for v in row)) or _unpack(row)


def op_code(op):
    """Display name of an op as it travels in the fingerprint."""
    if op is None:
        return ""
    from ..core.ops import op_name
    name = op_name(op)
    if name == "user op":
        return "user op (commutative)" if op.is_commutative else "user op (non-commutative)"
    return f"MPI.{name}"


def dtype_code(dtype):
    """The NumPy type string of ``dtype`` (``'<f8'``; "" for None), as the fingerprint packs it."""
    return "" if dtype is None else np.dtype(dtype).str


def counts_code(counts):
    if counts is None:
        return _NONE
    return zlib.crc32(np.asarray(counts, dtype=np.int64).tobytes())


# -- building -----------------------------------------------------------------

_STATIC = struct.Struct("<12q")
DYNAMIC = struct.Struct("<4q")   # call number, count, flags, payload
_static = {}
_op_words = {}
_dtype_words = {}


def _op_word(op):
    if op is None:
        return 0
    key = (op.handle, op.is_commutative)
    w = _op_words.get(key)
    if w is None:
        w = _op_words[key] = _pack(op_code(op), 2)[1]      # CRC only; decoded via the ops table
    return w


def _dtype_word(dtype):
    if dtype is None:
        return 0
    w = _dtype_words.get(dtype)
    if w is None:
        w = _dtype_words[dtype] = _pack(dtype_code(dtype), 2)[0]   # dtype.str, 8 bytes
    return w


def _static_words(phase, primitive, desc):
    if desc is None:
        return _STATIC.pack(MAGIC | phase, *_pack(primitive, _PRIM_WORDS),
                            *(0,) * _ALGO_WORDS, 0, 0, _NONE, _NONE)
    algorithm, op, dtype, _, root, counts = desc
    key = (phase, primitive, algorithm, None if op is None else (op.handle, op.is_commutative),
           dtype, root, None if counts is None else tuple(counts))
    raw = _static.get(key)
    if raw is None:
        if len(_static) > 4096:        # bounded: distinct call signatures of a program
            _static.clear()
        raw = _static[key] = _STATIC.pack(
            MAGIC | phase, *_pack(primitive, _PRIM_WORDS), *_pack(algorithm or "", _ALGO_WORDS),
            _op_word(op), _dtype_word(dtype), _NONE if root is None else root,
            counts_code(counts))
    return raw


def build_bytes(phase, seq, primitive, flags, desc=None, payload=0):
    """This rank's fingerprint as ``L`` little-endian int64 (bytes, 128 of them).

    ``flags``: FLAG_* bits (error, checked, ipc, persistent). ``desc``: None when
    validation did not get as far as describing the call, else
    ``(algorithm, op, dtype, count, root, counts)``.
    """
    if desc is None:
        count = 0
    else:
        count = desc[3]
        flags |= FLAG_RECORDED
    return _static_words(phase, primitive, desc) + DYNAMIC.pack(seq, count, flags, payload)


def static_bytes(primitive, desc):
    """The part of a settle fingerprint that identical calls share, and its count."""
    return _static_words(SETTLE, primitive, desc), desc[3]


def build(phase, seq, primitive, flags, desc=None, payload=0):
    """:func:`build_bytes` as an int64 NumPy vector."""
    return np.frombuffer(build_bytes(phase, seq, primitive, flags, desc, payload),
                         dtype="<i8").astype(np.int64)


def matrix(raw, size):
    """Gathered bytes -> (size, L) int64 array."""
    return np.frombuffer(bytes(raw), dtype="<i8").astype(np.int64).reshape(size, L)


# -- comparing ----------------------------------------------------------------

_OP_NAMES = {}


def _op_display(code):
    if not _OP_NAMES:
        from ..core.ops import OPS
        names = [f"MPI.{n}" for n, _ in OPS.values()]
        names += ["", "user op (commutative)", "user op (non-commutative)"]
        for n in names:
            _OP_NAMES[_pack(n, 2)[1]] = n or "none"
    return _OP_NAMES.get(int(code), f"op #{int(code):x}")


_PHASES = {SETTLE: "a collective",
           EXCHANGE: "a count exchange (v-collectives, Reduce_scatter's recvcounts)"}

# (field, columns, error class, display) in report order; structural fields first.
_FIELDS = [
    ("phase", slice(C_MAGIC, C_MAGIC + 1), MPI.ERR_OTHER,
     lambda r: _PHASES.get(int(r[0]) & 0xFF, f"unknown ({int(r[0])})")),
    ("primitive", slice(C_PRIM, C_PRIM + _PRIM_WORDS), MPI.ERR_OTHER, _primitive_display),
    ("call number", slice(C_SEQ, C_SEQ + 1), MPI.ERR_OTHER, lambda r: f"#{int(r[0])}"),
    ("algorithm", slice(C_ALGO, C_ALGO + _ALGO_WORDS), MPI.ERR_OTHER, _unpack),
    ("op", slice(C_OP, C_OP + 1), MPI.ERR_OP, lambda r: _op_display(r[0])),
    ("dtype", slice(C_DTYPE, C_DTYPE + 1), MPI.ERR_TYPE,
     lambda r: str(np.dtype(np.int64(r[0]).tobytes().rstrip(b"\0").decode())) if r[0] else "none"),
    ("count", slice(C_COUNT, C_COUNT + 1), MPI.ERR_COUNT, lambda r: f"{int(r[0])} elements"),
    ("root", slice(C_ROOT, C_ROOT + 1), MPI.ERR_ROOT,
     lambda r: "none" if r[0] == _NONE else f"{int(r[0])}"),
    ("recvcounts", slice(C_COUNTS, C_COUNTS + 1), MPI.ERR_COUNT,
     lambda r: "none" if r[0] == _NONE else f"list with checksum {int(r[0]):08x}"),
]
_STRUCTURAL = ("phase", "primitive", "call number")
# Compared in agree mode too: free (the words are exchanged anyway), and ranks
# that run different collectives or algorithms, or pass a different dtype,
# count, op or root, would otherwise hang, truncate or return garbage.
_AGREE_FIELDS = ("phase", "primitive", "algorithm", "op", "dtype", "count", "root")
# Their columns, for the fast comparison in all_agree.
_AGREE_COLS = np.r_[C_MAGIC:C_ALGO + _ALGO_WORDS, C_OP, C_DTYPE, C_ROOT, C_COUNT]


def differences(every, checked):
    """Fields on which the gathered fingerprints disagree.

    ``every``: (N, L) int64. Agree mode compares phase, primitive,
    algorithm, op, dtype, count and root; checked mode every field (recvcounts
    and the call number too). Structural fields (phase, primitive,
    call number) are always compared; the call description only when every
    rank recorded it. Returns ``[(field, errclass, {display: [ranks]})]``.
    """
    out = []
    recorded = bool(np.all(every[:, C_FLAGS] & FLAG_RECORDED))
    for name, cols, eclass, show in _FIELDS:
        if not checked and name not in _AGREE_FIELDS:
            continue
        if name not in _STRUCTURAL and not recorded:
            continue
        block = every[:, cols]
        if np.all(block == block[0]):
            continue
        groups = {}
        for r in range(every.shape[0]):
            groups.setdefault(show(block[r]), []).append(r)
        out.append((name, eclass, groups))
        if name in ("phase", "primitive"):
            break                   # the rest differs as a consequence
    return out


def all_agree(every, checked):
    """Fast path: True when no rank failed validation and nothing needs reporting."""
    if np.any(every[:, C_FLAGS] & FLAG_ERROR):
        return False
    cols = every[:, :C_FLAGS] if checked else every[:, _AGREE_COLS]
    if not np.all(cols == cols[0]):
        return False
    return bool(np.all(every[:, C_MAGIC] == every[0, C_MAGIC]))


def any_checked(every):
    return bool(np.any(every[:, C_FLAGS] & FLAG_CHECKED))


def primitives(every):
    return [_primitive_display(row) for row in every[:, C_PRIM:C_PRIM + _PRIM_WORDS]]


def payloads(every):
    return [int(v) for v in every[:, C_PAYLOAD]]


def ranks_text(ranks):
    """[0, 1, 2, 5] -> '0-2, 5'."""
    parts, start, prev = [], None, None
    for r in list(ranks) + [None]:
        if start is not None and (r is None or r != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if r is not None and start is None:
            start = r
        prev = r
    return ", ".join(parts)


def mismatch_message(every, diffs, limit=8):
    """The text every rank raises: which ranks disagree on what (same on every rank)."""
    prims = primitives(every)
    seqs = set(int(v) for v in every[:, C_SEQ])
    where = f"call #{seqs.pop()} on this communicator, " if len(seqs) == 1 else ""
    if len(set(prims)) == 1:
        head = f"mpicoll.{prims[0]}: the ranks' arguments do not match"
    else:
        head = "mpicoll: the ranks called different collectives"
    lines = []
    for name, _, groups in diffs:
        items = sorted(groups.items(), key=lambda kv: kv[1][0])
        shown = [f"{value} on rank{'s' if len(rs) > 1 else ''} {ranks_text(rs)}"
                 for value, rs in items[:limit]]
        if len(items) > limit:
            shown.append(f"... {len(items) - limit} more values")
        lines.append(f"{name}: " + "; ".join(shown))
    mode = "checked" if any_checked(every) else "agree"
    return f"{head} ({where}{mode} mode; nothing was sent) - " + " | ".join(lines)
