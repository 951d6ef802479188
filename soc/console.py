"""Drive the firmware console of a running simulation through a pty.

No pexpect: ``pty.openpty`` + ``subprocess`` + ``select``.  The simulator's
serial2console module reads its stdin and writes its stdout, which here are the
pty's slave side; we hold the master.  Everything returned is the text the
terminal shows (``atomflash.console_text``: colours stripped, lines the
firmware's line editor erased gone).

    with SimConsole(gw) as con:           # gw: the gateware (run) directory
        con.wait_prompt(timeout=120)      # boot
        out = con.command("info")         # text between the echoed command and the next prompt
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from atomflash import console_text
from atomflash.console_text import PROMPT
from atomflash.simctl import SimDeadline, keep_niceness


class ConsoleTimeout(AssertionError):
    pass


class SimConsole:
    def __init__(self, gateware_dir: Path, plusargs=(), log: Path | None = None, cwd: Path | None = None):
        self.gw = Path(gateware_dir)
        self.cwd = Path(cwd) if cwd is not None else self.gw  # atomflash.simctl.prepare_run_dir makes others
        self.plusargs = list(plusargs)
        self.log_path = log
        self.buf = ""          # ANSI-stripped output not yet consumed
        self.pending = ""      # an escape sequence cut by a read boundary
        self.transcript = ""   # everything, ANSI-stripped
        self.proc = None
        self.t_start = None
        self.times = []        # (wall seconds, line) of every command(): the log's .times file, for profiling

    # -- process -------------------------------------------------------------
    def start(self):
        master, slave = pty.openpty()
        cmd = [str(self.gw / "obj_dir" / "Vsim"), *self.plusargs]
        self.proc = subprocess.Popen(cmd, cwd=self.cwd, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, close_fds=True)
        keep_niceness(self.proc.pid)    # a nice'd campaign's simulators yield to the rest of the machine
        os.close(slave)
        self.fd = master
        self.t_start = time.monotonic()
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None
        if self.log_path is not None:
            Path(self.log_path).write_text(self.transcript)
            if self.t_start is not None:
                self.times.append((time.monotonic() - self.t_start, "(the whole run: boot, commands, stop)"))
                Path(self.log_path).with_suffix(".times").write_text(
                    "".join(f"{t:8.2f} s  {line}\n" for t, line in self.times))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- I/O -----------------------------------------------------------------
    def _read(self, timeout: float) -> bool:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the simulator exited
            data = b""
        if not data:
            raise ConsoleTimeout(f"simulator exited (rc={self.proc.poll()}); output so far:\n{self.transcript[-3000:]}")
        raw = self.pending + data.decode("utf-8", "replace")
        cut = console_text.unfinished_escape(raw)
        if cut >= 0:
            raw, self.pending = raw[:cut], raw[cut:]
        else:
            self.pending = ""
        self.buf = console_text.append(self.buf, raw)
        self.transcript = console_text.append(self.transcript, raw)
        return True

    def _until(self, found, what: str, timeout: float):
        """Read until ``found()`` returns something (not None); return it."""
        deadline = SimDeadline(timeout, self.proc.pid if self.proc is not None else None)
        while (got := found()) is None:
            if deadline.expired():
                raise ConsoleTimeout(f"timed out after {timeout} s of the simulator's time waiting for {what}; "
                                     f"output so far:\n{self.transcript[-3000:]}")
            self._read(0.5)
        return got

    def expect(self, pattern: str | re.Pattern, timeout: float = 30.0) -> re.Match:
        """Consume output up to and including the first match of ``pattern``."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        m = self._until(lambda: rx.search(self.buf), repr(rx.pattern), timeout)
        self.before = self.buf[:m.start()]
        self.buf = self.buf[m.end():]
        return m

    def wait_prompt(self, timeout: float = 30.0) -> str:
        """Wait for the prompt; returns what came before it."""
        self.expect(re.escape(PROMPT), timeout)
        return self.before

    def send(self, text: str):
        # serial2console forwards bytes as they arrive; the UART RX FIFO is
        # small, so feed a character at a time.
        for ch in text.encode():
            os.write(self.fd, bytes([ch]))
            time.sleep(0.002)

    def command(self, line: str, timeout: float = 30.0) -> str:
        """Type ``line`` + Enter, return its output (without the echoed line
        and the next prompt)."""
        t0 = time.monotonic()
        self.send(line + "\r")
        out = self.output_of(line, timeout)
        self.times.append((time.monotonic() - t0, line))
        return out

    def output_of(self, line: str, timeout: float = 30.0) -> str:
        """The output of ``line``, typed already, up to the next prompt (`console_text.command_output`)."""
        out, end = self._until(lambda: console_text.command_output(self.buf, line),
                               f"the output of {line!r}", timeout)
        self.buf = self.buf[end:]
        return out
