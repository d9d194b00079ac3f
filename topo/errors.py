"""The one base class for bad user input. The CLI turns an InputError into one clear message
and exit status 2; any other exception is a bug and keeps its traceback."""


class InputError(ValueError):
    """Bad input; the message names the field and the value."""


def is_finite(v) -> bool:
    """Whether a number is finite as a float. An int beyond float's range is not (and
    math.isfinite(10**400) raises OverflowError, which reached users as 'internal error')."""
    try:
        return v == v and abs(float(v)) != float("inf")
    except OverflowError:
        return False
