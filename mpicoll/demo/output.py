"""Output helpers of the demo: rank-ordered printing, styling, array formatting, agreed checks.

Arrays may live on a device (``--device gpu``: CuPy); :func:`host` copies one
to NumPy explicitly (CuPy refuses implicit conversion), so :func:`fmt` and
:func:`same` take host and device arrays alike.
"""
import os
import sys

import numpy as np

from ..device import arrays as _device

__all__ = ["Out", "CheckFailed", "agree", "fmt", "fmt_list", "fmt_value", "same", "host",
           "on_host"]


class CheckFailed(Exception):
    """A result or a traffic count disagreed with its reference (raised on every rank)."""


class Out:
    """Prints on rank 0 only; :meth:`ranked` collects one text per rank, printed in rank order."""

    def __init__(self, comm, color="auto"):
        self.comm = comm
        self.rank = comm.Get_rank()
        if color == "auto":
            color = ("always" if self.rank == 0 and sys.stdout.isatty()
                     and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
                     else "never")
        self.fancy = comm.bcast(color == "always", root=0)

    def say(self, text=""):
        """Print ``text`` on rank 0."""
        if self.rank == 0:
            print(text, flush=True)

    def ranked(self, text):
        """Every rank passes its text (or None); rank 0 prints them in rank order."""
        texts = self.comm.gather(text, root=0)
        if self.rank == 0:
            for t in texts:
                if t is not None:
                    print(t)
            sys.stdout.flush()

    def _style(self, text, code):
        return f"\033[{code}m{text}\033[0m" if self.fancy else text

    def heading(self, text):
        """Print a blank line, then ``text`` as a heading (bold when styled), on rank 0."""
        self.say()
        self.say(self._style(f"== {text} ==", "1"))

    def good(self, text):
        """``text`` styled as good news (green when styled)."""
        return self._style(text, "32")

    def bad(self, text):
        """``text`` styled as bad news (bold red when styled)."""
        return self._style(text, "31;1")

    def mark(self):
        """A check mark (``ok`` when plain), styled as good news."""
        return self.good("✓" if self.fancy else "ok")


def agree(comm, problems):
    """Raise :class:`CheckFailed` on every rank if any rank found a problem."""
    every = comm.allgather(list(problems))
    flat = [f"rank {r}: {p}" for r, ps in enumerate(every) for p in ps]
    if flat:
        raise CheckFailed("; ".join(flat))


def on_host(a):
    """Where ``--device cpu``'s data lives: the identity (``--device gpu``: ``cupy.asarray``)."""
    return a


def host(a):
    """``a`` as a NumPy array: a device array is copied to the host, a host one returned as is."""
    ad = _device.adapter_of(a)
    return np.asarray(a) if ad is None else ad.asnumpy(a)


def fmt(a):
    """One array on one line, NumPy style: ``[1. 2. 3. 4. 5.]`` (long ones elided)."""
    return np.array2string(host(a), max_line_width=10**6, threshold=64, edgeitems=3)


def fmt_list(arrays):
    """A list of arrays laid out like the seed's printed tensor lists."""
    return "[\n" + ",\n".join("    " + fmt(a) for a in arrays) + "\n]"


def fmt_value(v):
    """A Fraction as ``15`` or ``7.5`` or ``13.33``."""
    if v.denominator == 1:
        return str(v.numerator)
    return f"{float(v):.2f}".rstrip("0").rstrip(".")


def same(got, want):
    """Equal results: bitwise for integers, to rounding for floats (sums in another order)."""
    got, want = host(got), host(want)
    if got.shape != want.shape:
        return False
    if got.dtype.kind in "fc":
        eps = np.finfo(got.dtype).eps
        return bool(np.allclose(got, want, rtol=16 * eps, atol=0, equal_nan=True))
    return bool(np.array_equal(got, want))
