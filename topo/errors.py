"""The one base class for bad user input. The CLI turns an InputError into one clear message
and exit status 2; any other exception is a bug and keeps its traceback."""


class InputError(ValueError):
    """Bad input; the message names the field and the value."""
