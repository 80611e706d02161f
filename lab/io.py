"""Atomic file writes: every file the lab writes goes through a temporary file in the same folder and a rename,
so an interrupted write never leaves a partial file where a reader expects a whole one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on any error it is removed.

    The file gets the usual permissions (0666 less the umask; ``mkstemp`` alone would leave 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def check_writable(path: str | os.PathLike, label: str, *, folder: bool = False) -> Path:
    """Refuse, before any work, an output path this process cannot write: :class:`lab.checks.ConfigError` naming
    ``label`` (the option or argument as the user typed it), the path and what is allowed. Leaves nothing behind:
    the nearest existing folder is probed with a temporary folder that is removed at once (``os.access`` says yes
    to root for ``/proc``)."""
    from lab.checks import bad_value

    path = Path(path)
    if str(path).strip() == "":
        raise bad_value(label, str(path), "a non-empty path")
    if folder and path.exists() and not path.is_dir():
        raise bad_value(label, str(path), "a folder (this path is a file)")
    if not folder and path.is_dir():
        raise bad_value(label, str(path), "a file path (this path is a folder)")
    probe = (path if folder else path.parent).absolute()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise bad_value(label, str(path), f"a path under a folder ({probe} is a file)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".lab-probe-", dir=probe))
    except OSError as exc:
        raise bad_value(label, str(path), f"a path this user can write ({probe}: {exc.strerror})") from None
    return path
