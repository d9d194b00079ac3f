"""The one base class for bad user input. The CLI turns an InputError into one clear message
and exit status 2; any other exception is a bug and keeps its traceback. Beside it, the
number checks that must not raise on any number the user can write (10**400 included)."""
import math


class InputError(ValueError):
    """Bad input; the message names the field and the value."""


class OverBudget(InputError):
    """A memory guard's refusal: the run's estimate exceeds the memory it may use (exit 2 like
    any InputError). Its own type lets a caller tell it from bad input: a sweep's check of a
    layout search ignores it for a stand-in layout, and a sweep point whose search had a
    layout refused is not given the best of the rest (the answer would depend on the memory
    left beside the other workers)."""


def to_float(x) -> float:
    """x as a float, inf beyond the float range (float(10**400) raises OverflowError, and
    np.isfinite refuses an int above 2**64)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def is_finite(v) -> bool:
    """Whether a number is finite as a float; an int beyond float's range is not
    (math.isfinite(10**400) raises OverflowError, which reached users as 'internal error')."""
    return math.isfinite(to_float(v))
