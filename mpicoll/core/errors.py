"""Exceptions raised by mpicoll.

:class:`ArgumentError` is both a :class:`ValueError` and an ``MPI.Exception``
carrying the MPI error class that MPI itself would report (``MPI.ERR_ROOT``,
``MPI.ERR_COUNT``, ...), so code written against mpi4py's error handling and
plain Python code can both catch it.
"""
from mpi4py import MPI

__all__ = ["ArgumentError", "ArgumentTypeError", "NotSchedulable", "describe", "non_negative"]


class ArgumentError(MPI.Exception, ValueError):
    """A collective was called with bad arguments; nothing was sent.

    The message names the argument, what was expected and what was given.
    ``Get_error_class()`` returns the matching MPI error class.
    """

    def __init__(self, message, error_class=MPI.ERR_ARG):
        MPI.Exception.__init__(self, error_class)
        self.message = message

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):
        return (type(self), (self.message, self.Get_error_class()))


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument has the wrong Python type (also a :class:`TypeError`)."""

    def __init__(self, message, error_class=MPI.ERR_TYPE):
        super().__init__(message, error_class)


class NotSchedulable(TypeError):
    """An algorithm did something a plan cannot record.

    It then runs directly, on the real arrays: one that touches data itself, or reads
    peers' memory.
    """


def describe(obj):
    """Short description of a user value for error messages."""
    shape = getattr(obj, "shape", None)
    dtype = getattr(obj, "dtype", None)
    if shape is not None and dtype is not None:
        kind = f"{type(obj).__module__.split('.')[0]}.{type(obj).__name__}"
        return f"{kind} of shape {tuple(shape)} and dtype {dtype}"
    text = repr(obj)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(obj).__name__} {text}"


def non_negative(argname, value, what="count"):
    """``value`` as an int >= 0 (a count or displacement), else the error naming ``argname``.

    Not an integer (bools included) -> :class:`ArgumentTypeError`; negative ->
    :class:`ArgumentError`; both with MPI's ``ERR_COUNT``.
    """
    import operator
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ArgumentTypeError(
            f"{argname}: expected a non-negative integer {what}; got {value!r}", MPI.ERR_COUNT)
    try:
        value = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{argname}: expected a non-negative integer {what}; got {describe(value)}",
            MPI.ERR_COUNT) from None
    if value < 0:
        raise ArgumentError(f"{argname}: expected a non-negative {what}; got {value}",
                            MPI.ERR_COUNT)
    return value
