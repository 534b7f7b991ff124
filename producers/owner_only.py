"""Owner-only files: the data directory and everything under it is 0700 (directories) / 0600 (files).

The evidence is read through one gate that logs every read; a file another local account can read
is a read the gate never sees. Two ways keep it owner-only:

- the services (every ``blackbox`` command, ``serve``, ``consume``, ``otlp``) set the process umask to
  :data:`SERVICE_UMASK` at start (:func:`owner_only_umask`), so whatever they create, chdb's files
  included, is owner-only;
- the agent's process is not ours to change: what the Recorder writes there (the spool, local blobs:
  claim checks and key records) is created with explicit modes (:func:`private_dirs`,
  :func:`create_private`), whatever the agent's umask.

At start, :func:`warn_if_too_open` names what is already too open (a data directory created by an
older release, or by hand) in a warning; it changes nothing (``chmod -R go-rwx DIR`` does).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "SERVICE_UMASK",
    "create_private",
    "owner_only_umask",
    "private_dirs",
    "too_open",
    "warn_if_too_open",
]

logger = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SERVICE_UMASK = 0o077
_CHECK_DEPTH = 2  # the data directory, its rooms and what is directly in them: cheap at every start
_SHOWN = 10


def owner_only_umask() -> int:
    """Set the process umask to :data:`SERVICE_UMASK` (services only); returns the previous one."""
    return os.umask(SERVICE_UMASK)


def private_dirs(path: Path) -> None:
    """``path`` and every missing parent, created 0700 (an existing directory is left as it is)."""
    path = Path(path)
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, DIR_MODE)  # mkdir's mode passes through the umask; this does not


def create_private(path: Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """Open (creating it 0600 whatever the umask) ``path`` with ``flags``; returns the descriptor."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:  # the umask cannot widen a mode, but an existing file may be
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def too_open(root: Path, *, depth: int = _CHECK_DEPTH) -> list[str]:
    """What under ``root`` (``root`` itself and ``depth`` levels down) a group or other may use, each as
    ``"<path> (<mode>)"``; symlinks are not followed."""
    found: list[str] = []
    root = Path(root)

    def visit(path: Path, level: int) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            return
        if st.st_mode & 0o077:
            found.append(f"{path} ({stat.S_IMODE(st.st_mode):04o})")
        if level < depth and stat.S_ISDIR(st.st_mode):
            try:
                children = sorted(os.listdir(path))
            except OSError:
                return
            for name in children:
                visit(path / name, level + 1)

    visit(root, 0)
    return found


def warn_if_too_open(root: Path) -> list[str]:
    """Log one warning naming what under ``root`` is readable beyond its owner; returns the list."""
    found = too_open(root)
    if found:
        more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        logger.warning(
            "the data directory is readable beyond its owner: %s%s - another local account can read the "
            "evidence without passing the access gate; fix with: chmod -R go-rwx %s",
            ", ".join(found[:_SHOWN]),
            more,
            root,
        )
    return found
