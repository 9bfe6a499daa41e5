"""Child processes that never outlive their parent, and SIGTERM as a clean, catchable exit.

What it does
    * :func:`spawn` starts a child (``subprocess.Popen``) and tells it its
      parent's pid in ``PAIRWISE_PARENT_PID``; a child that calls
      :func:`bind_to_parent` at startup (``python -m pairwise`` and the ustat
      worker do) asks Linux to send it SIGTERM when that parent dies
      (``prctl(PR_SET_PDEATHSIG)``), and exits at once if the parent is
      already gone.  So even a parent killed with SIGKILL leaves no worker
      behind.  (The signal follows the *thread* that spawned the child: spawn
      from the main thread or another long-lived one.)
    * :func:`exit_on_sigterm` makes SIGTERM raise :class:`Terminated` (a
      ``KeyboardInterrupt``) in the main thread, so ``finally`` blocks run and
      children are stopped exactly as on Ctrl-C.
    * :func:`terminate` stops children: SIGTERM, a grace period, then SIGKILL,
      and reaps them (no zombies).

Security model: none of its own; no secret crosses these calls.
On systems without ``prctl`` the parent-death binding is skipped; the
parent's own SIGTERM/SIGINT handling still stops its children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["Terminated", "spawn", "bind_to_parent", "exit_on_sigterm", "terminate", "PARENT_ENV"]

PARENT_ENV = "PAIRWISE_PARENT_PID"
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread like Ctrl-C's KeyboardInterrupt."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated(f"terminated by signal {signum}")


def exit_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def bind_to_parent() -> None:
    """If started by :func:`spawn`: get SIGTERM when the parent dies; exit now if it already has."""
    value = os.environ.pop(PARENT_ENV, None)  # not inherited by our own children
    if not value or not sys.platform.startswith("linux"):
        return
    try:
        parent = int(value)
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (ValueError, OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the binding took effect
        os._exit(143)


def spawn(args: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)`` for a child that should die with this process."""
    env = dict(kwargs.pop("env", None) or os.environ)
    env[PARENT_ENV] = str(os.getpid())
    return subprocess.Popen(args, env=env, **kwargs)


def terminate(procs, grace: float = 3.0) -> None:
    """SIGTERM every live child, wait up to ``grace`` seconds in total, SIGKILL the rest, reap all.

    The children's pipes are left to whoever reads them (``communicate`` in
    another thread returns once the child is gone).
    """
    procs = [p for p in procs if p is not None]
    for p in procs:
        if p.poll() is None:
            try:
                p.terminate()
            except OSError:
                pass
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL did not take within 5 s
            pass
