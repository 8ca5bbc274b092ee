"""Sizes with K/M/G suffixes, nccl-tests' dtype and op names, size sweeps."""
import math
import re

import numpy as np

from ..core.ops import OP_NAMES, parse_op  # re-exported: the bench's --op names

__all__ = ["parse_size", "fmt_size", "size_sweep", "parse_dtype", "dtype_label",
           "parse_op", "OP_NAMES", "parse_range", "iterations"]

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*$", re.I)


def parse_size(text):
    """'8' -> 8, '4K' -> 4096, '1M' / '1MiB' / '1MB' -> 1048576 (binary, as nccl-tests)."""
    if isinstance(text, int):
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"expected a size such as 8, 4K, 1M or 2G; got {text!r}")
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value != int(value):
        raise ValueError(f"expected a whole number of bytes; got {text!r}")
    return int(value)


def fmt_size(n):
    """4096 -> '4 KiB' (exact multiples only), else bytes."""
    if n is None:
        return "-"
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult} {unit}"
    return f"{n} B"


def size_sweep(minbytes, maxbytes, stepfactor):
    """minbytes, minbytes*f, ... up to maxbytes (as nccl-tests' -b/-e/-f)."""
    if minbytes < 0 or maxbytes < minbytes:
        raise ValueError(f"expected 0 <= minbytes <= maxbytes; got {minbytes} and {maxbytes}")
    if stepfactor < 1:
        raise ValueError(f"expected a step factor >= 1; got {stepfactor}")
    sizes, s = [], minbytes
    while s <= maxbytes:
        sizes.append(s)
        if stepfactor == 1 or s == 0:
            break
        s = int(s * stepfactor) if int(s * stepfactor) > s else s + 1
    return sizes


def parse_range(text, *, sizes=False):
    """'2..10000' -> (2, 10000); '2,4,8' -> [2, 4, 8]; sizes take K/M/G suffixes."""
    conv = parse_size if sizes else int
    text = str(text).strip()
    if ".." in text:
        lo, hi = (conv(t) for t in text.split("..", 1))
        if hi < lo:
            raise ValueError(f"expected LOW..HIGH with LOW <= HIGH; got {text!r}")
        return (lo, hi)
    return [conv(t) for t in text.split(",") if t.strip()]


#: nccl-tests' type names and NumPy's, -> NumPy dtype name.
_DTYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int16": "int16",
           "uint16": "uint16", "int32": "int32", "int": "int32", "uint32": "uint32",
           "int64": "int64", "uint64": "uint64", "half": "float16", "float16": "float16",
           "float": "float32", "float32": "float32", "double": "float64", "float64": "float64"}


def parse_dtype(name):
    """The NumPy dtype of a dtype name (nccl-tests' or NumPy's); ValueError for others."""
    key = str(name).strip().lower()
    if key not in _DTYPES:
        raise ValueError(f"expected a dtype among {', '.join(sorted(_DTYPES))}; got {name!r}")
    return np.dtype(_DTYPES[key])


def dtype_label(dtype):
    """nccl-tests' name for the table ('float' for float32)."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(
        np.dtype(dtype).name, np.dtype(dtype).name)


def iterations(nbytes, iters, warmup, large):
    """(iters, warmup) for a message of ``nbytes``: both shrink in proportion above ``large``.

    At most ``iters``/``warmup``; never fewer than min(iters, 5) timed and
    min(warmup, 1) warm-up calls.
    """
    if large <= 0 or nbytes <= large:
        return iters, warmup
    scale = large / nbytes
    return (max(min(iters, 5), math.ceil(iters * scale)),
            max(min(warmup, 1), math.ceil(warmup * scale)))
