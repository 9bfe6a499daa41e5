"""Two Yao parties in one process (a GarblerSession here, an EvaluatorSession in a thread) for the 2PC tests."""

from __future__ import annotations

import queue
import threading

from pairwise.circuits.ir import Circuit
from pairwise.mpc.channel import MemoryChannel, TranscriptChannel
from pairwise.mpc.twopc import EXEC, EvaluatorSession, GarblerSession

WAIT = 30.0  # bound on any wait for the worker thread (the code under test answers in far less)


EXEC_HEADER = EXEC  # the execution header of mpc/twopc/wire.py (80 bytes)


class Pair:
    """A GarblerSession here and an EvaluatorSession in a worker thread, over a MemoryChannel pair.

    ``run(circuit, g_inputs, e_inputs, **kw)`` runs one execution on both sides
    and returns (garbler result, evaluator result); an exception on either side
    is re-raised (the garbler's first).  ``garbler_channel`` /
    ``evaluator_channel`` may be wrapped (e.g. in a TranscriptChannel).
    """

    def __init__(self, *, timeout: float = 10.0, transcript: bool = False, **kw) -> None:
        a, b = MemoryChannel.pair(timeout=timeout)
        if transcript:
            a, b = TranscriptChannel(a), TranscriptChannel(b)
        self.garbler_channel, self.evaluator_channel = a, b
        self.broken = False
        self._jobs: queue.Queue = queue.Queue()
        self._results: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._evaluator_loop, args=(b, kw), daemon=True)
        self._thread.start()
        self.garbler = GarblerSession(a, **kw)
        ok, value = self._results.get(timeout=WAIT)
        if not ok:
            raise value
        self.evaluator: EvaluatorSession = value

    def _evaluator_loop(self, ch, kw) -> None:
        try:
            session = EvaluatorSession(ch, **kw)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self._results.put((False, exc))
            return
        self._results.put((True, session))
        while True:
            job = self._jobs.get()
            if job is None:
                return
            circuit, inputs, kw2 = job
            try:
                self._results.put((True, session.run(circuit, inputs, **kw2)))
            except BaseException as exc:  # noqa: BLE001
                self._results.put((False, exc))

    def run_both(
        self,
        circuit_g: Circuit,
        g_inputs,
        circuit_e: Circuit,
        e_inputs,
        *,
        g_kw: dict | None = None,
        e_kw: dict | None = None,
    ):
        """Run with possibly different circuits/options on the two sides; returns ((ok, value), (ok, value))."""
        self._jobs.put((circuit_e, e_inputs, e_kw or {}))
        try:
            g = (True, self.garbler.run(circuit_g, g_inputs, **(g_kw or {})))
        except Exception as exc:  # noqa: BLE001
            g = (False, exc)
        e = self._results.get(timeout=WAIT)
        if not (g[0] and e[0]):
            self.broken = True
        return g, e

    def run(self, circuit: Circuit, g_inputs, e_inputs, **kw):
        g, e = self.run_both(circuit, g_inputs, circuit, e_inputs, g_kw=kw, e_kw=kw)
        for ok, value in (g, e):
            if not ok:
                raise value
        return g[1], e[1]

    def close(self) -> None:
        self._jobs.put(None)
        self.garbler.close()
        self.evaluator.close()
        self._thread.join(WAIT)
