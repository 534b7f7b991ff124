"""Worker processes die with their parent, however the parent dies (SIGKILL included).

The parent holds the only write end of a pipe; every worker gets the read end and a daemon thread
that blocks reading it. Nothing is ever written, so the read returns only at end-of-file, which the
kernel signals when the last write end closes: when the parent exits, by any means. The worker then
leaves with :func:`os._exit` - its main thread is blocked on the pool's call queue, whose write end
every sibling also holds, so it would never see end-of-file by itself (that is how workers outlived
a SIGKILLed ``blackbox consume``).

Why a pipe and not ``prctl(PR_SET_PDEATHSIG)``: the pipe works on every POSIX system, has no race
(a worker started after the parent died reads end-of-file at once), and does not fire when merely
the *thread* that spawned the worker exits, which the Linux parent-death signal does. A worker
holds no consumer and commits nothing; work it had in hand is redelivered to the next consumer and
deduplicated by the idempotent sinks.

The write end is not inheritable and is never passed to a spawned child, so only the parent holds
it; a child made with a bare ``fork()`` (never done here) would inherit it and delay the exit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext

__all__ = ["Lifeline", "watch_parent"]


class Lifeline:
    """The parent's side: create before spawning workers, :meth:`close` after they are shut down."""

    def __init__(self, ctx: BaseContext) -> None:
        self._reader, self._writer = ctx.Pipe(duplex=False)

    @property
    def child_end(self) -> Connection:
        """Pass to each worker (e.g. as the pool initializer's argument) for :func:`watch_parent`."""
        return self._reader

    def close(self) -> None:
        self._writer.close()
        self._reader.close()


def watch_parent(lifeline: Connection) -> None:
    """In a worker (a pool ``initializer``): exit this process as soon as the parent is gone."""

    def wait() -> None:
        while True:
            try:
                lifeline.recv_bytes()
            except (EOFError, OSError):
                break
        with contextlib.suppress(OSError):
            os.write(2, f"blackbox worker {os.getpid()}: parent process is gone; exiting\n".encode())
        os._exit(1)

    threading.Thread(target=wait, name="blackbox-lifeline", daemon=True).start()
