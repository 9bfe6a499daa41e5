"""Mutual TLS for channels (mpc.tls, mpc.channel) and ``pairwise certs``.

Certificates are checked with an independent reader (``cryptography``'s x509
parser and OpenSSL's own verification through ``ssl``); connections run over
real loopback sockets, one party in a thread of the test (the multi-process
cases are in tests/system/test_tls_processes.py).  Every wait has a timeout; no test
measures time.

Tests that start processes are in tests/system/test_tls_cli.py.
"""

from __future__ import annotations

import os
import socket
import ssl
import stat
import threading

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pairwise.mpc.channel import (
    AccessDenied,
    AuthenticationError,
    ChannelTimeout,
    InsecureTransport,
    TCPChannel,
    TCPListener,
    handshake,
)
from pairwise.mpc.tls import (
    ROLE_ARC,
    CertificateError,
    TLSConfig,
    create_certificate,
    is_loopback,
    list_certificates,
    throwaway_credentials,
)

WAIT = 20.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """One CA with a party of each role, and a stranger from another CA."""
    d = tmp_path_factory.mktemp("pki")
    for name, role in (("server-0", "server"), ("server-1", "server"), ("alice", "querier"), ("bob", "client")):
        create_certificate(d, name, role)
    other = tmp_path_factory.mktemp("other-ca")
    create_certificate(other, "alice", "querier")  # same name and role, wrong CA
    cfg = {n: TLSConfig(d, n) for n in ("server-0", "server-1", "alice", "bob")}
    return d, other, cfg


def serve(listener: TCPListener, count: int, **accept_kw):
    """Accept ``count`` connections in a thread; each accepted one answers b"pong" to one frame.

    Returns (thread, outcomes): outcomes gets ("ok", identity) or ("error", exception) per connection.
    """
    outcomes: list = []

    def run():
        for _ in range(count):
            try:
                ch = listener.accept(WAIT, **accept_kw)
            except Exception as exc:  # noqa: BLE001 - recorded for the test
                outcomes.append(("error", exc))
                continue
            try:
                if ch.recv() == b"ping":
                    ch.send(b"pong")
                outcomes.append(("ok", ch.peer_identity))
            except Exception as exc:  # noqa: BLE001
                outcomes.append(("error", exc))
            finally:
                ch.close()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, outcomes


def ping(port: int, **kw) -> bytes:
    with TCPChannel.connect("127.0.0.1", port, deadline=WAIT, timeout=WAIT, **kw) as ch:
        ch.send(b"ping")
        return ch.recv()


# --------------------------------------------------------------------------- certificates


def test_certificate_carries_name_role_and_chains_to_the_ca(pki):
    d, _, _ = pki
    cert = x509.load_pem_x509_certificate((d / "bob.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    cert.verify_directly_issued_by(ca)  # raises if not signed by this CA
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "bob"
    eku = {o.dotted_string for o in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value}
    assert eku == {
        ExtendedKeyUsageOID.SERVER_AUTH.dotted_string,
        ExtendedKeyUsageOID.CLIENT_AUTH.dotted_string,
        f"{ROLE_ARC}.3",
    }  # role client
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # OpenSSL itself accepts the chain in strict mode
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    assert ctx.cert_store_stats()["x509_ca"] == 1


def test_key_files_are_private_and_never_overwritten(pki, tmp_path):
    d, _, _ = pki
    for fn in ("ca.key", "alice.key", "bob.key"):
        assert stat.S_IMODE(os.stat(d / fn).st_mode) == 0o600, fn
    before = (d / "bob.pem").read_bytes(), (d / "bob.key").read_bytes()
    with pytest.raises(CertificateError, match="already exists; refusing to overwrite"):
        create_certificate(d, "bob", "querier")
    assert ((d / "bob.pem").read_bytes(), (d / "bob.key").read_bytes()) == before
    ca_before = (d / "ca.pem").read_bytes()
    create_certificate(d, "carol", "client")  # reuses the CA
    assert (d / "ca.pem").read_bytes() == ca_before


@pytest.mark.parametrize("name", ["", "a b", "-x", "x" * 65, "ca", "CA", "../etc", "x/y"])
def test_bad_names_refused(tmp_path, name):
    with pytest.raises(CertificateError, match="name"):
        create_certificate(tmp_path, name, "client")
    assert not any(tmp_path.iterdir())  # nothing written, not even a CA


def test_bad_role_days_and_dirs_refused(tmp_path):
    with pytest.raises(CertificateError, match="role must be one of"):
        create_certificate(tmp_path, "x", "admin")
    with pytest.raises(CertificateError, match="validity"):
        create_certificate(tmp_path, "x", "client", days=0)
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(CertificateError, match="not a directory"):
        create_certificate(f, "x", "client")
    half = tmp_path / "half"
    create_certificate(half, "x", "client")
    (half / "ca.key").unlink()
    with pytest.raises(CertificateError, match="ca.key does not"):
        create_certificate(half, "y", "client")


def test_tls_config_errors_name_the_fix(pki, tmp_path):
    d, other, _ = pki
    with pytest.raises(CertificateError, match="no such directory"):
        TLSConfig(tmp_path / "missing", "alice")
    with pytest.raises(CertificateError, match="nobody.pem is missing.*pairwise certs create"):
        TLSConfig(d, "nobody")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for fn in ("alice.pem", "alice.key"):
        (mixed / fn).write_bytes((other / fn).read_bytes())
        os.chmod(mixed / fn, 0o600)
    (mixed / "ca.pem").write_bytes((d / "ca.pem").read_bytes())
    with pytest.raises(CertificateError, match="not signed by the CA"):
        TLSConfig(mixed, "alice")
    loose = tmp_path / "loose"
    create_certificate(loose, "x", "client")
    os.chmod(loose / "x.key", 0o644)
    with pytest.raises(CertificateError, match="too open"):
        TLSConfig(loose, "x")


def test_list_certificates(pki):
    d, _, _ = pki
    roles = {c["name"]: c["role"] for c in list_certificates(d)}
    assert {"server-0": "server", "alice": "querier", "bob": "client"}.items() <= roles.items()


# --------------------------------------------------------------------------- connections


def test_mutual_tls_exposes_both_identities(pki):
    _, _, cfg = pki
    with TCPListener("127.0.0.1", 0, tls=cfg["server-0"]) as lst:
        th, outcomes = serve(lst, 1)
        with TCPChannel.connect(
            "127.0.0.1",
            lst.port,
            deadline=WAIT,
            timeout=WAIT,
            tls=cfg["alice"],
            peer_roles="server",
            peer_names="server-0",
        ) as ch:
            assert ch.secure and ch.peer_identity.name == "server-0" and ch.peer_identity.role == "server"
            assert ch._sock.version() == "TLSv1.3"
            ch.send(b"ping")
            assert ch.recv() == b"pong"
            assert ch.stats() == {"bytes_sent": 8, "bytes_received": 8, "messages_sent": 1, "messages_received": 1}
        th.join(WAIT)
    assert outcomes[0][0] == "ok" and (outcomes[0][1].name, outcomes[0][1].role) == ("alice", "querier")


def test_refused_connections_get_a_clear_error_and_the_server_keeps_serving(pki, tmp_path):
    """Without a certificate, with one from another CA, with a role that is not allowed: each is refused
    with a message on the connecting side, and the next valid peer is served."""
    d, other, cfg = pki
    with TCPListener("127.0.0.1", 0, tls=cfg["server-0"]) as lst:
        th, outcomes = serve(lst, 5, peer_roles={"querier"})
        # 1. plaintext pairwise peer (no certificate at all)
        with TCPChannel.connect("127.0.0.1", lst.port, deadline=WAIT, timeout=WAIT) as ch:
            with pytest.raises(AuthenticationError, match="requires mutual TLS.*--tls DIR --name NAME"):
                handshake(ch, "querier", "s")
        # 2. a TLS client without any certificate (raw ssl, trusting our CA)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=str(d / "ca.pem"))
        with socket.create_connection(("127.0.0.1", lst.port), timeout=WAIT) as raw:
            with ctx.wrap_socket(raw) as s:
                with pytest.raises((ssl.SSLError, ConnectionError)):  # an alert or EOF: not our client's wording
                    s.sendall(b"\0\0\0\4ping")
                    s.recv(100)  # TLS 1.3: the server's verdict arrives after the client's handshake
        # 3. a certificate from another CA, from a client that *does* trust our CA
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=str(d / "ca.pem"))
        ctx.load_cert_chain(str(other / "alice.pem"), str(other / "alice.key"))
        with socket.create_connection(("127.0.0.1", lst.port), timeout=WAIT) as raw:
            with ctx.wrap_socket(raw) as s:
                with pytest.raises(ssl.SSLError, match="(?i)unknown ca"):
                    s.sendall(b"\0\0\0\4ping")
                    s.recv(100)
        # 4. a valid certificate whose role is not allowed: told why
        with pytest.raises(
            AccessDenied,
            match="'server-0'.*refused this connection: role 'client' of 'bob' "
            "is not allowed here \\(allowed: querier\\)",
        ):
            ping(lst.port, tls=cfg["bob"])
        # 5. the server still serves a valid querier
        assert ping(lst.port, tls=cfg["alice"]) == b"pong"
        th.join(WAIT)
    kinds = [(k, type(v).__name__) for k, v in outcomes]
    assert kinds == [
        ("error", "AuthenticationError"),
        ("error", "AuthenticationError"),
        ("error", "AuthenticationError"),
        ("error", "AccessDenied"),
        ("ok", "PeerIdentity"),
    ], outcomes
    assert "did not start a TLS handshake" in str(outcomes[0][1])
    assert "sent no certificate" in str(outcomes[1][1])
    assert "signed by another CA" in str(outcomes[2][1])


def test_client_pins_the_peer_name_and_role(pki):
    _, _, cfg = pki
    with TCPListener("127.0.0.1", 0, tls=cfg["server-1"]) as lst:
        th, outcomes = serve(lst, 2)
        with pytest.raises(
            AccessDenied, match="refused 'server-1' \\(role server\\).*not the expected peer \\(expected: server-0\\)"
        ):
            ping(lst.port, tls=cfg["alice"], peer_names="server-0")
        with pytest.raises(AccessDenied, match="role 'server' of 'server-1' is not allowed"):
            ping(lst.port, tls=cfg["alice"], peer_roles={"querier"})
        th.join(WAIT)
    # the server side learns that it was refused, and why
    assert all(k == "error" and isinstance(v, AccessDenied) for k, v in outcomes), outcomes
    assert "refused this connection" in str(outcomes[0][1])


def test_a_stranger_ca_cannot_impersonate_a_name(pki):
    _, other, cfg = pki
    impostor = TLSConfig(other, "alice")  # right name and role, wrong CA
    with TCPListener("127.0.0.1", 0, tls=impostor) as lst:
        th, outcomes = serve(lst, 1)
        with pytest.raises(AuthenticationError, match="not acceptable.*another CA"):
            ping(lst.port, tls=cfg["bob"], peer_names="alice")
        th.join(WAIT)
    assert outcomes[0][0] == "error"


def test_tls_client_against_plaintext_server_is_told_clearly(pki):
    _, _, cfg = pki
    with TCPListener("127.0.0.1", 0) as lst:
        errors = []

        def plain_server():
            try:
                with lst.accept(WAIT) as ch:
                    handshake(ch, "server", "s")
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        th = threading.Thread(target=plain_server, daemon=True)
        th.start()
        with pytest.raises(AuthenticationError, match="TLS handshake with .* failed"):
            ping(lst.port, tls=cfg["alice"])
        th.join(WAIT)
    assert "started a TLS handshake, but this side runs without TLS" in str(errors[0])


def test_plaintext_is_loopback_only(pki):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("")
    with pytest.raises(InsecureTransport, match="--insecure"):
        TCPListener("0.0.0.0", 0)
    TCPListener("0.0.0.0", 0, insecure=True).close()
    TCPListener("0.0.0.0", 0, tls=pki[2]["server-0"]).close()
    with pytest.raises(ValueError, match="only be checked on a TLS connection"):
        TCPChannel.connect("127.0.0.1", 9, deadline=0.1, peer_names="x")


def test_accept_first_skips_strays_and_serves_the_valid_peer(pki):
    """A listener waiting for one peer survives a port scanner, garbage, a wrong name and a silent peer."""
    _, _, cfg = pki
    rejected = []
    with TCPListener("127.0.0.1", 0, tls=cfg["server-0"]) as lst:
        result = {}

        def wait_for_alice():
            try:
                result["ok"] = lst.accept_first(
                    WAIT, lambda ch: ch.recv(), peer_names={"alice"}, handshake_timeout=2.0, on_reject=rejected.append
                )
            except Exception as exc:  # noqa: BLE001
                result["error"] = exc

        th = threading.Thread(target=wait_for_alice, daemon=True)
        th.start()
        socket.create_connection(("127.0.0.1", lst.port), timeout=WAIT).close()  # scanner
        with socket.create_connection(("127.0.0.1", lst.port), timeout=WAIT) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            s.recv(100)
        with pytest.raises(AccessDenied):
            ping(lst.port, tls=cfg["bob"])
        silent = socket.create_connection(("127.0.0.1", lst.port), timeout=WAIT)  # stalls the handshake
        with TCPChannel.connect("127.0.0.1", lst.port, deadline=WAIT, timeout=WAIT, tls=cfg["alice"]) as ch:
            ch.send(b"hello")
            th.join(WAIT)
        silent.close()
    assert "error" not in result, result
    ch_server, first = result["ok"]
    ch_server.close()
    assert first == b"hello" and len(rejected) == 4, rejected
    assert any("not the expected peer" in r for r in rejected[:3]), rejected
    # handshakes run concurrently: the silent connection did not delay alice, and was closed once she was served
    assert "a valid peer was accepted meanwhile" in rejected[3], rejected


def test_a_busy_listener_cancels_the_handshake_and_the_client_retries_until_served(pki):
    """A TLS endpoint that is busy answers a new connection with a user_canceled alert, not a handshake: the
    client reports PeerBusy (never an authentication failure), retrying until its deadline."""
    from pairwise.mpc.errors import PeerBusy

    _, _, cfg = pki
    with TCPListener("127.0.0.1", 0, tls=cfg["server-0"]) as lst:
        refused = []

        def busy_then_serve(busy: int) -> None:
            for _ in range(busy):
                pending = lst.accept_socket(WAIT)
                pending.tell_busy()
                refused.append(pending)
            with lst.accept(WAIT) as ch:
                ch.send(ch.recv())

        th = threading.Thread(target=busy_then_serve, args=(3,), daemon=True)
        th.start()
        assert ping(lst.port, tls=cfg["alice"]) == b"ping"  # three busy answers, retried, then served
        th.join(WAIT)
        for p in refused:
            p.close()
        stop = threading.Event()

        def always_busy() -> None:
            while not stop.is_set():
                try:
                    pending = lst.accept_socket(0.2)
                except ChannelTimeout:
                    continue
                pending.tell_busy()
                refused.append(pending)

        th = threading.Thread(target=always_busy, daemon=True)
        th.start()
        with pytest.raises(PeerBusy, match="is busy: it cancelled the TLS handshake"):
            TCPChannel.connect("127.0.0.1", lst.port, deadline=1.0, timeout=WAIT, tls=cfg["alice"])
        stop.set()
        th.join(WAIT)
        for p in refused:
            p.close()


def test_accept_first_times_out_naming_the_rejections(pki):
    _, _, cfg = pki
    with TCPListener("127.0.0.1", 0, tls=cfg["server-0"]) as lst:
        th = threading.Thread(target=lambda: pytest.raises(AccessDenied, ping, lst.port, tls=cfg["bob"]), daemon=True)
        th.start()
        with pytest.raises(ChannelTimeout, match="no valid peer.*1 connection\\(s\\) rejected.*not allowed"):
            lst.accept_first(3.0, lambda ch: ch.recv(), peer_roles={"querier"})
        th.join(WAIT)


def test_throwaway_credentials_are_removed():
    with throwaway_credentials([("a", "client"), ("b", "server")]) as d:
        assert TLSConfig(d, "b").role == "server"
    assert not os.path.exists(d)
