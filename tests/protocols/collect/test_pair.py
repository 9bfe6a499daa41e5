"""One pair of users through a relay (protocols.collect.pair.run_pair).

With epsilon = 64 the k-RR noise of the kendall kernel changes the value with
probability below 1e-27, so the evaluator's output must be the exact kernel
sign(x1 - x2) * sign(y1 - y2) (Python ints as the reference); with a small
epsilon only the range is checked.  The relay is two threads over memory
channels that forward each direction independently.
"""

from __future__ import annotations

import threading

import pytest

from pairwise.circuits.kernels import pack_pair
from pairwise.circuits.noise import noisy_kernel
from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.errors import AccessDenied, ChannelError, TamperedStream
from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.protocols.collect.pair import run_pair, tls_pair_channel

T = 30.0
BITS = 8


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    for name in ("u1", "u2", "u3"):
        create_certificate(d, name, "user")
    create_certificate(d, "other-role", "client")
    return d


def relay(flip_frame: int | None = None):
    a, ra = MemoryChannel.pair(timeout=T)
    b, rb = MemoryChannel.pair(timeout=T)

    def pump(src, dst, flip):
        i = 0
        while True:
            try:
                f = src.recv(T)
            except ChannelError:
                dst.close()
                return
            if flip is not None and i == flip:
                f = f[:-1] + bytes([f[-1] ^ 1])
            i += 1
            try:
                dst.send(f)
            except ChannelError:
                return

    for args in ((ra, rb, flip_frame), (rb, ra, None)):
        threading.Thread(target=pump, args=args, daemon=True).start()
    return a, b


def both(fa, fb):
    out = [None, None]

    def wrap(i, f):
        try:
            out[i] = f()
        except BaseException as exc:  # noqa: BLE001
            out[i] = exc

    ts = [threading.Thread(target=wrap, args=(i, f), daemon=True) for i, f in enumerate((fa, fb))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(4 * T)
        assert not t.is_alive()
    return out


def sign(v):
    return (v > 0) - (v < 0)


def pair(pki, nc, x, y, *, flip=None, evaluator_name="u2", pinned="u2"):
    a, b = relay(flip)
    kw = dict(task_id="task-1", pair_id=7, circuit=nc.circuit, timeout=T)
    return both(
        lambda: run_pair(
            lambda: tls_pair_channel(a, role="garbler", partner=pinned, tls=TLSConfig(pki, "u1"), timeout=T),
            role="garbler",
            value=pack_pair(*x, BITS, False),
            **kw,
        ),
        lambda: run_pair(
            lambda: tls_pair_channel(b, role="evaluator", partner="u1", tls=TLSConfig(pki, evaluator_name), timeout=T),
            role="evaluator",
            value=pack_pair(*y, BITS, False),
            **kw,
        ),
    )


@pytest.mark.parametrize("x,y", [((10, 20), (30, 5)), ((7, 7), (7, 9)), ((200, 1), (3, 0)), ((1, 1), (2, 2))])
def test_exact_kernel_at_huge_epsilon(pki, x, y):
    nc = noisy_kernel("kendall", BITS, False, epsilon=64)
    (g_out, g_cost), (e_out, e_cost) = pair(pki, nc, x, y)
    assert g_out is None
    assert nc.codes[e_out] == sign(x[0] - y[0]) * sign(x[1] - y[1])
    for c in (g_cost, e_cost):
        assert c.tls_cpu > 0 and c.setup_cpu > 0 and c.run_cpu > 0
        assert c.wire_sent > 0 and c.wire_received > 0
        assert c.wall >= c.cpu - 1e-3 and c.wait >= 0
    assert g_cost.wire_sent == e_cost.wire_received and e_cost.wire_sent == g_cost.wire_received


def test_noisy_output_in_range_at_small_epsilon(pki):
    nc = noisy_kernel("kendall", BITS, False, epsilon=0.5)
    (_, _), (e_out, _) = pair(pki, nc, (1, 2), (3, 4))
    assert e_out in (0, 1, 2)


def test_tampering_relay_fails_both_users_and_no_output(pki):
    nc = noisy_kernel("kendall", BITS, False, epsilon=1.0)
    g, e = pair(pki, nc, (1, 2), (3, 4), flip=6)
    assert isinstance(g, TamperedStream) and isinstance(e, TamperedStream), (g, e)


def test_wrong_partner_is_refused_by_both(pki):
    nc = noisy_kernel("kendall", BITS, False, epsilon=1.0)
    g, e = pair(pki, nc, (1, 2), (3, 4), evaluator_name="u3")  # the garbler expects u2; u3 answers
    assert isinstance(g, AccessDenied) and isinstance(e, AccessDenied), (g, e)


def test_a_partner_certificate_of_another_role_is_refused(pki):
    nc = noisy_kernel("kendall", BITS, False, epsilon=1.0)
    g, e = pair(pki, nc, (1, 2), (3, 4), evaluator_name="other-role", pinned="other-role")
    assert isinstance(g, AccessDenied) and "role" in str(g), g
    assert isinstance(e, AccessDenied), e


def test_bad_role_and_missing_certificate_are_refused_before_anything_is_sent(pki):
    from pairwise.protocols.collect.wire import CollectError

    a, peer = MemoryChannel.pair()
    with pytest.raises(ValueError, match="role"):
        tls_pair_channel(a, role="dealer", partner="u2", tls=TLSConfig(pki, "u1"))
    with pytest.raises(CollectError, match="needs this user's certificate"):
        tls_pair_channel(a, role="garbler", partner="u2", tls=None)
    nc = noisy_kernel("kendall", BITS, False, epsilon=1.0)
    with pytest.raises(ValueError, match="role"):
        run_pair(lambda: a, role="dealer", task_id="t", pair_id=1, circuit=nc.circuit, value=0, timeout=1.0)
    assert peer.messages_received == 0 and a.messages_sent == 0
