"""Where the driver JVM that `etl` launches writes: a pipe that a thread of `etl` copies to stderr.

pyspark launches the driver JVM with this process's stdout and stderr, and the JVM's children
(Spark's Python workers) inherit them. Two things go wrong with that:
- the job's own stdout (`--json`) would get the JVM's output: a crash's "A fatal error has been
  detected" banner, which JDK 17 writes to stdout whatever its flags say;
- whoever reads the job's output through a pipe (cron mailing it, Airflow's BashOperator, a test
  harness) sees its end only when the last holder of the pipe exits, and the JVM exits about
  0.4 s after `etl`: HotSpot waits up to 300 ms at exit for threads blocked in native code (py4j's
  and Netty's sockets), and Spark's shutdown hooks delete its temporary folders through `rm`
  processes. That was most of a scheduled run's last phase (docs/performance.md, "Third pass").
So the JVM is launched with both on a pipe of this process, whose bytes a thread copies to
stderr as they come (with JSON logs, stderr is the JSON relay: etl.logs.relay_stderr). The
command's end is the end of its output. What the JVM writes after `etl` has exited (its
shutdown) is not shown; everything the job decides is written before that.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import select
import sys
import threading
from typing import Iterator


class OutputRelay:
    """A pipe whose reading end a daemon thread copies to `target_fd` until `finish()`."""

    def __init__(self, target_fd: int):
        self._target = os.dup(target_fd)
        self._read, self.write_fd = os.pipe()
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._copy, name="driver JVM output", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Copy what is already in the pipe, then stop (the JVM may still hold it open)."""
        if self._thread.is_alive():
            os.write(self._wake_write, b"x")
            self._thread.join(1.0)

    def _copy(self) -> None:
        while True:
            ready, _, _ = select.select([self._read, self._wake_read], [], [])
            if self._read in ready and not self._copied():
                return  # every writer closed it: the JVM has exited
            if self._wake_read in ready:
                while select.select([self._read], [], [], 0)[0] and self._copied():
                    pass
                return

    def _copied(self) -> bool:
        """Copy what one read returns; False at the pipe's end (every writer closed it)."""
        data = os.read(self._read, 65536)
        if not data:
            return False
        while data:
            try:
                data = data[os.write(self._target, data):]
            except OSError:
                break  # stderr is gone (a daemon closed it): what the JVM says is dropped
        return True


@contextlib.contextmanager
def launched_into_a_relay() -> Iterator[None]:
    """Within this block, a process started inherits a relay (OutputRelay) as stdout and stderr,
    which is copied to this process's stderr until it exits. This process's own stdout and
    stderr are back as they were outside the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    relay = started_relay()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(relay.write_fd, 1)
        os.dup2(relay.write_fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, relay.write_fd):
            os.close(fd)


def started_relay() -> OutputRelay:
    """A relay to this process's stderr, finished when this process exits. Whoever hands its
    `write_fd` to a process it starts closes it then (the relay ends when every writer has)."""
    relay = OutputRelay(2)
    atexit.register(relay.finish)
    return relay
