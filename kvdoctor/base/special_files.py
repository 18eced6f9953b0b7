"""Paths that exist but are no regular file or directory: reading a FIFO blocks until a writer comes, a device
never ends. Named and never read."""

from __future__ import annotations

import os
import stat

KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"))  # fmt: skip


def special_kind(path: str | os.PathLike) -> str | None:
    """'a FIFO', 'a socket', ... for such a path (symlinks followed); None for a file, a directory or no path."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in KINDS if test(mode)), "not a file")


FIFO_WAIT_S = 10.0


def fifo_as_stdin(path: str, seconds: float = FIFO_WAIT_S) -> bool:
    """Make the FIFO at `path` this process's stdin when something writes into it within `seconds`
    (`explain <(kubectl logs POD)`, a process's pipe) and say so; False for a FIFO nobody writes to, whose plain
    read would block for ever. Its read end is the one opened here: opening it again once the writer is done
    would wait for another writer."""
    import select

    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    readable, _, _ = select.select([descriptor], [], [], seconds)
    if not readable:
        os.close(descriptor)
        return False
    os.set_blocking(descriptor, True)
    os.dup2(descriptor, 0)
    os.close(descriptor)
    return True
