"""Real service processes on loopback (an ECDF server, the collect aggregator), for demos, tests and benchmarks.

What it does
    :class:`ServiceProcess` starts one ``python -m pairwise COMMAND ...
    --listen HOST:PORT --exit-with-parent`` process on a free loopback port
    (``PORT`` 0), waits for the JSON line ``{"event": "listening", "host":
    ..., "port": ...}`` the service prints on stdout once it accepts
    connections, and keeps its stderr in a temporary file
    (:meth:`ServiceProcess.logs`).  It can stop the process (SIGTERM, a
    clean shutdown), kill it (SIGKILL, a crash) and restart it on the same
    port with the same arguments, hence the same ``--state``.  Each service
    wraps it: :class:`pairwise.protocols.ecdf.processes.ServerProcesses` (m
    ECDF servers), :class:`pairwise.protocols.collect.processes.AggregatorProcess`.

    ``--exit-with-parent`` makes the service exit when the process that
    started it does, even after a SIGKILL of that parent.

Security model
    Loopback only; nothing secret crosses these calls (certificates are
    files the caller made).
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import tempfile
import time

from pairwise.dp.errors import PairwiseError

__all__ = ["ServiceProcess", "ServiceUnavailable", "stop_all"]


class ServiceUnavailable(PairwiseError, ConnectionError):
    """A service process did not start, or exited during startup (the message carries its log)."""


class ServiceProcess:
    """One real service process (see the module docstring).

    ``command``: the ``pairwise`` subcommand words (``["ecdf", "serve"]``);
    ``args``: its other arguments (not ``--listen``); ``label``: for messages
    (``"server 0"``); ``error``: the exception class raised when the process
    does not start (a subclass of :class:`ServiceUnavailable`'s bases).
    """

    def __init__(
        self,
        command: list[str],
        args: list[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        label: str = "service",
        startup_timeout: float = 60.0,
        error: type[Exception] = ServiceUnavailable,
        start: bool = True,
    ) -> None:
        self.command = list(command)
        self.args = list(args)
        self.host = host
        self.label = label
        self.startup_timeout = float(startup_timeout)
        self.error = error
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile(mode="w+")
        self.address: tuple[str, int] = (host, int(port))
        self.listening: dict = {}
        if start:
            self.start()

    # ------------------------------------------------------------------ lifecycle
    def spawn(self, port: int) -> None:
        """Start the process on ``port`` without waiting for it (see :meth:`wait_listening`)."""
        argv = [
            sys.executable,
            "-m",
            "pairwise",
            *self.command,
            "--listen",
            f"{self.host}:{port}",
            "--exit-with-parent",
            *self.args,
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, text=True)

    def start(self, port: int | None = None) -> None:
        """Start the process (on ``port``, default: the current address's) and wait until it listens."""
        self.spawn(self.address[1] if port is None else port)
        self.address = self.wait_listening(time.monotonic() + self.startup_timeout)

    def wait_listening(self, deadline: float) -> tuple[str, int]:
        """Read the process's stdout until its ``listening`` line (its address) or ``deadline``."""
        p = self.proc
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.error(f"{self.label} did not start within the startup timeout; log: {self.logs()}")
                if sel.select(timeout=min(left, 0.5)):
                    line = p.stdout.readline()
                    if not line:
                        raise self.error(f"{self.label} exited during startup; log: {self.logs()}")
                    try:
                        msg = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(msg, dict) and msg.get("event") == "listening":
                        self.listening = msg
                        return msg["host"], int(msg["port"])
                elif p.poll() is not None:
                    raise self.error(f"{self.label} exited during startup; log: {self.logs()}")
        finally:
            sel.close()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        """Everything the process wrote to stderr so far."""
        f = self._log
        if f.closed:
            return ""
        f.flush()
        f.seek(0)
        text = f.read()
        f.seek(0, 2)
        return text

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process if it runs (SIGTERM asks for a clean shutdown)."""
        if self.running:
            self.proc.send_signal(sig)

    def kill(self, *, hard: bool = False) -> int | None:
        """Stop the process: SIGTERM (a clean shutdown), or SIGKILL with ``hard=True`` (a crash).

        Returns its exit status.  A process that ignores SIGTERM for 10 s is killed.
        """
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        if p.stdout:
            p.stdout.close()
        return p.returncode

    def restart(self) -> None:
        """Start the process again on its port (and with its arguments, hence its state), after :meth:`kill`."""
        if self.running:
            raise RuntimeError(f"{self.label} is still running; kill it first")
        port = self.address[1]
        deadline = time.monotonic() + self.startup_timeout
        while True:  # the port may take a moment to be free again after a crash
            self.spawn(port)
            try:
                self.address = self.wait_listening(deadline)
                return
            except self.error:
                if time.monotonic() >= deadline or "address already in use" not in self.logs():
                    raise
                self.proc.wait(timeout=10)
                time.sleep(0.2)

    def close(self) -> None:
        """Stop the process (if running) and drop its log."""
        self.kill()
        self._log.close()

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stop_all(services: list[ServiceProcess]) -> None:
    """SIGTERM every running service first, then wait for each: they shut down in parallel."""
    for s in services:
        s.signal(signal.SIGTERM)
    for s in services:
        s.close()
