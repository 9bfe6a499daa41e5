"""2PC through the real aggregator's relay with the ``tls`` pair channel: ciphertext only, tampering fails both users.

The aggregator runs in this process (so the test can read what its relay
forwards through ``relay_tap`` and, in one test, make the relay flip a byte);
users are threads calling :func:`pairwise.protocols.collect.join` over real
mutual-TLS sockets, each with its own ``user`` certificate and only its own
value.  With epsilon = 64 per pair the kendall k-RR noise changes a value
with probability below 1e-27, so the result is checked exactly against
Python ints.
"""

from __future__ import annotations

import threading

import pytest

from pairwise.mpc.tls import TLSConfig, create_certificate, create_certificates
from pairwise.protocols.collect import Collector, join
from pairwise.protocols.collect import relay as relay_mod
from pairwise.protocols.collect.aggregator import Aggregator
from pairwise.protocols.collect.wire import TaskFailed

T = 60.0
N = 6
X = [3, 8, 1, 9, 4, 7]
Y = [2, 9, 2, 5, 6, 1]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    create_certificate(d, "agg", "server")
    create_certificate(d, "analyst", "collector")
    create_certificates(d, [f"user{i}" for i in range(N)], "user")
    return d


def run_task(pki, tap=None, *, epsilon=64.0):
    agg = Aggregator("127.0.0.1", 0, tls=TLSConfig(pki, "agg"), timeout=T, relay_tap=tap, log=lambda m: None)
    agg.start_in_thread()
    try:
        with Collector(f"127.0.0.1:{agg.port}", tls=TLSConfig(pki, "analyst"), server_name="agg") as c:
            task = c.create(
                "ustat-2pc",
                {
                    "statistic": "kendall",
                    "lower": [0, 0],
                    "upper": [15, 15],
                    "decimals": [0, 0],
                    "epsilon": epsilon,
                    "pairs_per_user": 1,
                    "min_users": N,
                    "timeout": 30,
                    "pair_channel": "tls",
                },
                task_id="k1",
            )
            assert task["spec"]["pair_channel"] == "tls"
            outs = [None] * N

            def user(i):
                try:
                    outs[i] = join(
                        f"127.0.0.1:{agg.port}",
                        "k1",
                        X[i],
                        Y[i],
                        tls=TLSConfig(pki, f"user{i}"),
                        server_name="agg",
                        max_epsilon=100,
                        budget=500,
                        timeout=T,
                        wait=T,
                    )
                except BaseException as exc:  # noqa: BLE001
                    outs[i] = exc

            ts = [threading.Thread(target=user, args=(i,), daemon=True) for i in range(N)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(4 * T)
                assert not t.is_alive()
            try:
                result = c.result("k1", wait=T)
            except TaskFailed as exc:
                result = exc
        return outs, result
    finally:
        agg.stop_thread()


def sign(v):
    return (v > 0) - (v < 0)


def test_relay_forwards_only_ciphertext_and_the_result_is_exact(pki):
    seen: dict[str, bytearray] = {}

    def tap(session, direction, data):
        seen.setdefault(f"{session}/{direction}", bytearray()).extend(data)

    outs, result = run_task(pki, tap)
    assert isinstance(result, dict), result
    assert not any(isinstance(o, BaseException) for o in outs), outs
    assert result["pairs_completed"] == result["pairs_planned"] == N // 2 and result["pairs_dropped"] == 0
    # every session's user costs were measured (TLS handshake, base OTs, execution)
    sessions = [s for o in outs for s in o.sessions]
    assert len(sessions) == N and all(s["costs"]["tls_cpu"] > 0 and s["costs"]["setup_cpu"] > 0 for s in sessions)
    # the exact value: mean over the planned pairs of sign(x1-x2) sign(y1-y2); garbler = (x1, y1)
    by_user = {f"user{i}": (X[i], Y[i]) for i in range(N)}
    pairs = {(s["session"], s["role"], o_name) for o_name, o in zip(by_user, outs) for s in o.sessions}
    garblers = {sid: name for sid, role, name in pairs if role == "garbler"}
    evaluators = {sid: name for sid, role, name in pairs if role == "evaluator"}
    vals = [
        sign(by_user[garblers[s]][0] - by_user[evaluators[s]][0])
        * sign(by_user[garblers[s]][1] - by_user[evaluators[s]][1])
        for s in garblers
    ]
    assert result["estimate"] == pytest.approx(sum(vals) / len(vals))
    # the relay saw TLS records only: application data after the handshake, no pairwise magic, no names of inputs
    assert len(seen) == N  # two directions per session
    for data in seen.values():
        data = bytes(data)
        assert b"PAIRWISE" not in data  # the 2PC hello travels inside the tunnel
        assert len(data) > 1000


TAMPERED = "discard this session's results"  # the end of every TamperedStream message


class FlipInRecord:
    """A relay direction's writer that flips one byte inside a TLS record's ciphertext, past ``after`` bytes.

    It parses the users' framing on the fly (frame = length:uint32 || TLS records, record = 5-byte header ||
    body) to pick the 20th byte of the first record body of the first frame that starts after ``after``.
    """

    def __init__(self, after: int) -> None:
        self.after, self.pos, self.head, self.next_frame, self.target = after, 0, bytearray(), 0, None

    def __call__(self, data: bytes) -> bytes:
        out = bytearray(data)
        for i in range(len(out)):
            p = self.pos + i
            if self.target is None and p >= self.next_frame:
                self.head.append(out[i])
                if len(self.head) == 4:
                    n = int.from_bytes(self.head, "big")
                    start = self.next_frame
                    self.next_frame, self.head = start + 4 + n, bytearray()
                    if start >= self.after and n >= 60:
                        self.target = start + 4 + 5 + 20
            if self.target == p:
                out[i] ^= 0x01
                self.target = -1  # done
        self.pos += len(data)
        return bytes(out)


def tampering(monkeypatch, flipper_for):
    real_splice = relay_mod.Relay.splice

    async def splice(self, a, b, session="", idle_timeout=None):
        flip = flipper_for()
        orig = b.write_bytes
        b.write_bytes = lambda data: orig(flip(data))  # a -> b: the garbler's bytes to the evaluator
        return await real_splice(self, a, b, session, idle_timeout)

    monkeypatch.setattr(relay_mod.Relay, "splice", splice)


def test_a_relay_that_flips_a_ciphertext_byte_fails_both_users_with_tampering(pki, monkeypatch):
    tampering(monkeypatch, lambda: FlipInRecord(3000))
    outs, result = run_task(pki)
    states = [s for o in outs if not isinstance(o, BaseException) for s in o.sessions]
    assert len(states) == N and all(s.get("state") == "failed" for s in states), states
    assert all(TAMPERED in s["error"] for s in states), [s["error"] for s in states]  # both sides of every pair
    assert isinstance(result, TaskFailed) and "no pair completed" in str(result), result


def test_a_relay_that_flips_any_byte_fails_both_users(pki, monkeypatch):
    """Wherever the flip lands: in the TLS handshake (AuthenticationError), in a record (TamperedStream on both
    sides), or in the relay's own framing (the receiver: TamperedStream; its partner may then see only the end
    of the stream, PeerClosed), the session fails on both sides and no value is reported."""
    state = {"n": 0}

    def anywhere():
        state["n"] += 1
        flipped = []

        def flip(data):
            if not flipped and len(data) > 100:
                flipped.append(True)
                b = bytearray(data)
                b[(37 * state["n"]) % len(b)] ^= 0x01
                return bytes(b)
            return data

        return flip

    tampering(monkeypatch, anywhere)
    outs, result = run_task(pki)
    states = [s for o in outs if not isinstance(o, BaseException) for s in o.sessions]
    assert len(states) == N and all(s.get("state") == "failed" for s in states), states
    assert isinstance(result, TaskFailed), result
