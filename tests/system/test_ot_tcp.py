"""OT between two real processes over loopback TCP: base OTs, IKNP COTs, labels, chosen OT, dead peer.

The parent is the garbler (COT sender); the child (``python -c``) is the
evaluator (COT receiver) and writes its outputs to an ``.npz`` file (loaded
with ``allow_pickle=False``) so the parent can check the relation
t = q xor r*Delta on every transfer.
"""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

from pairwise.mpc.aes import random_blocks
from pairwise.mpc.channel import PeerClosed, TCPListener, handshake
from pairwise.mpc.ot import COTSender
from tests.support.processes import CHILD_TIMEOUT, finish, read_line, spawn

EVALUATOR = """
from pairwise.mpc.ot import COTReceiver
port, out, n_random, n_labels, n_chosen = int(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:6])
ch = TCPChannel.connect("127.0.0.1", port, deadline=20, timeout=20)
info = handshake(ch, "evaluator", "ot-over-tcp", extra=b"ot-test", peer_role="garbler")
cot = COTReceiver(ch, info.run_id)
cot.setup()
r, t = cot.recv_random(n_random)
x = (np.frombuffer(os.urandom(n_labels), dtype=np.uint8) & 1).astype(bool)
active = cot.recv_labels(x)
b = (np.frombuffer(os.urandom(n_chosen), dtype=np.uint8) & 1).astype(bool)
got = cot.recv_chosen(b)
np.savez(out, r=r, t=t, x=x, active=active, b=b, got=got)
say(done=True, sent=ch.bytes_sent, received=ch.bytes_received)
ch.close()
"""


def test_cots_labels_and_chosen_ot_between_processes(tmp_path):
    n_random, n_labels, n_chosen = 100_000, 777, 300
    out = tmp_path / "evaluator.npz"
    delta = random_blocks(1)[0]
    delta[0] |= np.uint64(1)
    m0, m1 = random_blocks(n_chosen), random_blocks(n_chosen)
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(EVALUATOR, lst.port, out, n_random, n_labels, n_chosen)
        try:
            with lst.accept(CHILD_TIMEOUT) as ch:
                info = handshake(ch, "garbler", "ot-over-tcp", extra=b"ot-test", peer_role="evaluator")
                cot = COTSender(ch, delta, info.run_id)
                cot.setup()
                q = cot.send_random(n_random)
                zero = cot.send_labels(n_labels)
                cot.send_chosen(m0, m1)
                report = read_line(child)
                assert report["done"]
                assert report["sent"] == ch.bytes_received and report["received"] == ch.bytes_sent
            assert child.wait(CHILD_TIMEOUT) == 0, child.stderr.read()
        finally:
            finish(child)
    with np.load(out, allow_pickle=False) as z:
        r, t, x, active, b, got = (z[k] for k in ("r", "t", "x", "active", "b", "got"))
    assert np.array_equal(t, q ^ (r[:, None].astype(np.uint64) * delta))
    assert np.all((q ^ t)[r] == delta)
    assert np.array_equal(active, zero ^ (x[:, None].astype(np.uint64) * delta))
    assert np.array_equal(got, np.where(b[:, None], m1, m0))


def test_evaluator_killed_mid_extension_raises_peer_closed():
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            from pairwise.mpc.ot import COTReceiver
            ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=20, timeout=20)
            cot = COTReceiver(ch, "kill-mid-ot")
            cot.setup()
            say(ready=True)
            time.sleep(60)
            """,
            lst.port,
        )
        try:
            with lst.accept(CHILD_TIMEOUT, recv_timeout=CHILD_TIMEOUT) as ch:
                delta = random_blocks(1)[0]
                delta[0] |= np.uint64(1)
                cot = COTSender(ch, delta, "kill-mid-ot")
                cot.setup()
                assert read_line(child)["ready"]
                killer = threading.Timer(0.3, lambda: os.kill(child.pid, signal.SIGKILL))
                killer.start()
                try:
                    # waiting for the evaluator's extension matrix when it dies: a connection
                    # error at once, not a hang and not the 20 s timeout
                    with pytest.raises(PeerClosed):
                        cot.send_labels(1000)
                finally:
                    killer.join()
        finally:
            finish(child)
