"""A command's standard streams as the remote command protocol uses them: pipes (stdout and stderr
apart), or a terminal (`tty=true`: a pseudo-terminal for stdin, stdout and stderr together, resized
when the client's terminal is, as kubelet's TTY streams)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import select
import signal
import struct
import termios
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

STDOUT, STDERR = 1, 2


@dataclass
class ProcessIo:
    proc: asyncio.subprocess.Process
    outputs: list[tuple[asyncio.StreamReader, int]]
    """Each output stream with its channel."""
    terminal: int | None = None
    """The pseudo-terminal's master end (tty)."""
    transport: asyncio.BaseTransport | None = None
    """What reads the terminal on the event loop."""

    async def write(self, data: bytes) -> None:
        if self.terminal is not None:
            await asyncio.to_thread(_write_all, self.terminal, data)
        elif self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    def close_stdin(self) -> None:
        if self.terminal is None and self.proc.stdin is not None:
            self.proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self.terminal is None or self.proc.returncode is not None:
            return
        fcntl.ioctl(self.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGWINCH)  # podman re-reads its terminal's size

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()  # off the event loop first, then the descriptor
            self.transport = None
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.close(self.terminal)
            self.terminal = None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:  # the terminal's buffer is full: wait for the command to read
            select.select([], [fd], [], 1.0)


async def start(argv: Sequence[str], env: Mapping[str, str], *, stdin: bool, tty: bool) -> ProcessIo:
    if not tty:
        pipe = asyncio.subprocess.PIPE
        given = pipe if stdin else asyncio.subprocess.DEVNULL
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=given, stdout=pipe, stderr=pipe, env=dict(env)
        )
        assert proc.stdout is not None and proc.stderr is not None
        return ProcessIo(proc, [(proc.stdout, STDOUT), (proc.stderr, STDERR)])
    master, slave = os.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=slave, stdout=slave, stderr=slave, env=dict(env), start_new_session=True
        )
    finally:
        os.close(slave)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    pipe_file = os.fdopen(master, "rb", buffering=0, closefd=False)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe_file)
    return ProcessIo(proc, [(reader, STDOUT)], terminal=master, transport=transport)
