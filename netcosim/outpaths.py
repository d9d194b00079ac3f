"""Where commands write: every output destination is checked before anything runs, and files
are written whole.

* ``check_dir(path, label, files)``: an output directory (created with its parents at the
  end). Refused up front (``InputError``, exit 2, one line): a path whose nearest existing
  ancestor is a file, a place nothing can be created in (read-only file system, permissions,
  ``/proc``), a name longer than the file system takes, the directory itself being a file, or
  one of ``files`` inside it being a directory.
* ``check_file(path, label, suffixes)``: an output file; refused up front when it is a
  directory, its folder does not exist or cannot be written, or its extension is not one of
  ``suffixes``.
* ``inputs`` (both checks): files the command reads; an output at one's place is refused
  (it would replace the input).
* ``check_distinct(*(path, label))``: the outputs of one command at different places;
  refused up front when two name the same path (also spelt differently, or via a symlink).
* ``write_file(path, label, write)``: ``write(tmp)`` into a temporary file beside ``path``,
  then an atomic rename: a failure leaves no half-written file (and the earlier file, if any,
  untouched). An ``OSError`` there (disk full, a file system gone read-only while running) is
  an ``OutputError``: one line and exit status 1 from the CLI, without a traceback.

``label`` names the destination as the user gave it (``--out 'x'``, ``--trace 'y'``).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from topo.errors import InputError


class OutputError(Exception):
    """Writing a result failed after the run started (exit 1, one line, no traceback)."""


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _existing_ancestor(p: Path) -> Path:
    q = p
    while not os.path.lexists(q):
        if q.parent == q:
            break
        q = q.parent
    return q


def _check_names(p: Path, label: str) -> None:
    anc = _existing_ancestor(p.absolute())
    limit = _name_max(anc if anc.is_dir() else anc.parent)
    for part in p.parts:
        if len(os.fsencode(part)) > limit:
            short = part if len(part) <= 40 else part[:37] + "..."
            raise InputError(f"{label}: the name {short!r} has {len(os.fsencode(part))} bytes; "
                             f"the file system takes at most {limit}")


def _probe(folder: Path, label: str) -> None:
    """Create and remove a directory in ``folder``: the only test that sees read-only file
    systems, permissions (also for root) and pseudo file systems alike."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".netcosim-probe-", dir=folder))
    except OSError as e:
        raise InputError(f"{label}: cannot write in {str(folder)!r} ({_why(e)})") from None


def _not_an_input(p: Path, label: str, inputs) -> None:
    """Refuse an output at the place of a file the command reads: writing it would replace
    the input (``export S.toml --json S.toml`` left a fabric where the scenario was)."""
    for q in inputs:
        if q and os.path.exists(q) and os.path.exists(p) and os.path.samefile(p, q):
            raise InputError(f"{label}: {str(p)!r} is the input file {str(q)!r}; writing "
                             f"there would replace it, so give the output another place")


def check_dir(path, label: str, files=(), inputs=()) -> Path:
    """The output directory ``path``, checked (see the module docstring); nothing is created.
    ``inputs``: files the command reads, refused as the place of one of ``files``."""
    p = Path(path)
    if not str(path).strip():
        raise InputError(f"{label}: an empty path")
    _check_names(p, label)
    if os.path.lexists(p):
        if not p.is_dir():
            raise InputError(f"{label}: exists and is not a directory")
        for name in files:
            if (p / name).is_dir():
                raise InputError(f"{label}: {str(p / name)!r} is a directory, where the "
                                 f"file {name} goes")
            _not_an_input(p / name, label, inputs)
        _probe(p, label)
        return p
    anc = _existing_ancestor(p.absolute())
    if not anc.is_dir():
        raise InputError(f"{label}: {str(anc)!r} is a file, not a directory")
    _probe(anc, label)
    return p


def check_file(path, label: str, suffixes=None, inputs=()) -> Path:
    """The output file ``path``, checked (see the module docstring); nothing is created.
    ``inputs``: files the command reads, refused as ``path``."""
    p = Path(path)
    if not str(path).strip():
        raise InputError(f"{label}: an empty path")
    _check_names(p, label)
    if p.is_dir():
        raise InputError(f"{label}: is a directory, expected a file name")
    _not_an_input(p, label, inputs)
    if suffixes is not None:
        ext = p.suffix.lower().lstrip(".")
        if ext not in suffixes:
            raise InputError(f"{label}: unknown file type {p.suffix or '(no extension)'!r}; "
                             f"expected one of {', '.join('.' + s for s in sorted(suffixes))}")
    folder = p.parent
    if not folder.exists():
        raise InputError(f"{label}: folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise InputError(f"{label}: {str(folder)!r} is a file, not a directory")
    _probe(folder, label)
    return p


def check_distinct(*dests) -> None:
    """``dests``: (path or None, label) of each output a command writes. Two at one path
    would have the second write replace the first, so the run reported both but left one
    (``export --graphml F --json F``)."""
    seen = {}
    for path, label in dests:
        if not path:
            continue
        key = os.path.realpath(path)  # absolute, "./" and symlinks resolved
        if key in seen:
            raise InputError(f"{label}: the same path as {seen[key]}; give each output its "
                             f"own")
        seen[key] = label


def write_file(path, label: str, write) -> Path:
    """``write(tmp_path)`` then rename onto ``path`` (the temporary file keeps the extension:
    writers that choose a format from it, as matplotlib does, see the same one)."""
    p = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.stem[:60]}.tmp-", suffix=p.suffix,
                                   dir=p.parent if str(p.parent) else ".")
        os.close(fd)
        write(tmp)
        umask = os.umask(0)  # mkstemp makes 0600; the file gets the usual mode
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
        tmp = None
    except OSError as e:
        raise OutputError(f"{label}: cannot write {str(p)!r} ({_why(e)})") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)
    return p


def write_text(path, label: str, text: str) -> Path:
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return write_file(path, label, w)
