"""Mutual TLS for pairwise channels: a CA, certificates that carry a role, and the peer's verified identity.

What it does
    * :func:`create_certificate` makes ``DIR/ca.pem`` + ``DIR/ca.key`` (a
      self-signed CA) if they are absent, then ``DIR/NAME.pem`` +
      ``DIR/NAME.key`` for one party, signed by that CA.  Keys are ECDSA
      P-256, written with mode 0600 and never overwritten.
    * :class:`TLSConfig` loads one party's credentials (``--tls DIR --name
      NAME``) and builds its :class:`ssl.SSLContext` objects: TLS 1.3 only,
      the CA in ``DIR/ca.pem`` is the *only* trust anchor (no system store),
      a certificate is required from *both* sides, X.509 strict checking.
    * :func:`server_handshake` / :func:`client_handshake` run the handshake
      on a connected socket with a timeout and return the peer's
      :class:`PeerIdentity` (certificate name, role, SHA-256 fingerprint);
      every :mod:`ssl` failure becomes an :class:`AuthenticationError` whose
      message says what to fix.  :mod:`pairwise.mpc.channel` wraps its TCP
      channels with them and then runs its admission step.
    * :func:`is_loopback` / :func:`check_plaintext`: plaintext is allowed on
      loopback addresses only unless the caller says ``insecure``;
      :func:`throwaway_credentials`: a temporary CA and certificates for demos.

    A certificate's name is its subject CN (also a DNS subjectAltName) and its
    role (``server``, ``querier``, ``client``, ``user``, ``collector``) an
    extended-key-usage OID under the private arc ``ROLE_ARC``; the format is
    public and described in ``docs/tls.md``, "The certificate format".

Security model
    The CA key is the trust root: whoever holds ``ca.key`` can mint any name
    and role.  A peer is authenticated when its certificate chains to
    ``ca.pem`` and it proves possession of the key in a TLS 1.3 handshake
    (forward secrecy, AEAD); its name and role are then facts the application
    may authorize on.  Host names are *not* checked (parties are reached by
    IP); a client pins the peer's certificate name instead (``peer_names``).
    No revocation list: rotate the CA to revoke.  Private keys are refused
    when other users can read them (as ``ssh`` does).

Follows
    Stdlib :mod:`ssl` (OpenSSL) for the transport and ``cryptography``'s
    ``x509`` for certificates; nothing here implements cryptography itself.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import ipaddress
import os
import re
import shutil
import socket
import ssl
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import check_int

from .errors import AuthenticationError, ChannelTimeout, InsecureTransport, PeerBusy, PeerClosed

__all__ = [
    "ROLES",
    "ROLE_ARC",
    "CA_CERT",
    "CA_KEY",
    "CertificateError",
    "PeerIdentity",
    "TLSConfig",
    "create_certificate",
    "create_certificates",
    "list_certificates",
    "identity_from_der",
    "server_handshake",
    "client_handshake",
    "is_loopback",
    "check_plaintext",
    "throwaway_credentials",
    "TLS_REQUIRED",
    "BUSY_ALERT",
]

#: The roles a certificate can carry.
ROLES = ("server", "querier", "client", "user", "collector")
#: Our private OID arc (2.25 + a random UUID as an integer, ITU-T X.667); role i is ``ROLE_ARC.i``.
ROLE_ARC = "2.25.42999041829247597289551493877411152159"
_ROLE_OID_TEXT = {role: f"{ROLE_ARC}.{i}" for i, role in enumerate(ROLES, 1)}
CA_CERT = "ca.pem"
CA_KEY = "ca.key"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CA_DAYS = 3650
#: First bytes a TLS endpoint sends to a plaintext peer before closing (see ``Hello.decode``).
TLS_REQUIRED = b"PAIRWISE/TLS-REQUIRED"
#: What a busy TLS endpoint sends instead of a ServerHello: a plaintext fatal ``user_canceled`` alert record
#: (RFC 8446, Sec. 6.1: "canceling the handshake for some reason unrelated to a protocol failure").  The
#: connecting side reports :class:`PeerBusy`, never an authentication failure.
BUSY_ALERT = bytes((21, 3, 3, 0, 2, 2, 90))


class CertificateError(PairwiseError, ValueError):
    """Missing, malformed, mismatched or unsafe certificate files, or a bad name / role / directory."""


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise CertificateError(
            f"certificate name must be 1..64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit; "
            f"got {name!r}"
        )
    if name.lower() == "ca":
        raise CertificateError("the name 'ca' is reserved for the certificate authority (ca.pem, ca.key)")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise CertificateError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    return role


# ---------------------------------------------------------------------------
# Making certificates
# ---------------------------------------------------------------------------


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _write_new(path: str, data: bytes, mode: int) -> None:
    """Create ``path`` with ``mode``; never overwrite (O_EXCL)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise CertificateError(f"{path} already exists; refusing to overwrite it (remove it first)") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _prepare_dir(directory: str) -> str:
    directory = os.fspath(directory)
    if not directory:
        raise CertificateError("the certificate directory must not be empty")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CertificateError(f"{directory} exists and is not a directory")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise CertificateError(f"cannot create the certificate directory {directory}: {exc.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CertificateError(f"the certificate directory {directory} is not writable")
    return directory


def _load_or_create_ca(directory: str):
    """(ca_cert, ca_key, created) for ``directory``; creates the CA when both files are absent."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path = os.path.join(directory, CA_CERT), os.path.join(directory, CA_KEY)
    have_cert, have_key = os.path.exists(cert_path), os.path.exists(key_path)
    if have_cert and have_key:
        ca_cert = _load_cert(cert_path)
        _check_key_file_mode(key_path)
        try:
            with open(key_path, "rb") as fh:
                ca_key = serialization.load_pem_private_key(fh.read(), password=None)
        except (ValueError, TypeError) as exc:
            raise CertificateError(f"{key_path} is not an unencrypted PEM private key ({exc})") from None
        spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        if ca_key.public_key().public_bytes(*spki) != ca_cert.public_key().public_bytes(*spki):
            raise CertificateError(f"{key_path} does not belong to {cert_path}")
        return ca_cert, ca_key, False
    if have_cert or have_key:
        present, missing = (cert_path, key_path) if have_cert else (key_path, cert_path)
        raise CertificateError(
            f"{present} exists but {missing} does not: cannot sign new certificates with a half CA "
            "(restore the missing file, or use a new directory for a new CA)"
        )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pairwise"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"pairwise CA {os.urandom(4).hex()}"),
        ]
    )
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=_CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_new(key_path, _key_pem(key), 0o600)
    _write_new(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert, key, True


@dataclass(frozen=True)
class IssuedCertificate:
    """What :func:`create_certificate` wrote."""

    name: str
    role: str
    cert: str
    key: str
    ca: str
    created_ca: bool
    not_after: str
    fingerprint: str


def create_certificate(directory: str | os.PathLike, name: str, role: str, *, days: int = 365) -> IssuedCertificate:
    """Create the CA in ``directory`` if absent, then ``NAME.pem``/``NAME.key`` with ``role``, signed by it.

    Refuses (:class:`CertificateError`) to overwrite an existing certificate or
    key, a half-present CA, a bad name, role, validity or directory.
    """
    return create_certificates(directory, [name], role, days=days)[0]


def create_certificates(
    directory: str | os.PathLike, names: Iterable[str], role: str, *, days: int = 365
) -> list[IssuedCertificate]:
    """:func:`create_certificate` for many names with one role, loading the CA once (e.g. 10^4 simulated users).

    Every name is checked (valid, not repeated, no file of that name yet)
    before the first certificate is written.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    names = list(names)
    for name in names:
        check_name(name)
    if len(set(names)) != len(names):
        raise CertificateError("the same certificate name is listed twice")
    check_role(role)
    days = check_int(days, "validity (days)", lo=1, hi=_CA_DAYS, error=CertificateError)
    directory = _prepare_dir(os.fspath(directory))
    paths = [(os.path.join(directory, f"{n}.pem"), os.path.join(directory, f"{n}.key")) for n in names]
    for pair in paths:
        for p in pair:
            if os.path.exists(p):
                raise CertificateError(
                    f"{p} already exists; refusing to overwrite it "
                    "(remove both NAME.pem and NAME.key to reissue, or choose another name)"
                )
    ca_cert, ca_key, created = _load_or_create_ca(directory)
    now = _now()
    if ca_cert.not_valid_after_utc <= now + _dt.timedelta(days=1):
        raise CertificateError(f"the CA in {directory} has expired or expires within a day; make a new CA directory")
    not_after = min(now + _dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    out: list = []
    for name, (cert_path, key_path) in zip(names, paths):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pairwise"),
                        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
                        x509.NameAttribute(NameOID.COMMON_NAME, name),
                    ]
                )
            )
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(minutes=5))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        ExtendedKeyUsageOID.SERVER_AUTH,
                        ExtendedKeyUsageOID.CLIENT_AUTH,
                        x509.ObjectIdentifier(_ROLE_OID_TEXT[role]),
                    ]
                ),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name.lower())]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write_new(key_path, _key_pem(key), 0o600)
        try:
            _write_new(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        except BaseException:
            os.unlink(key_path)
            raise
        out.append(
            IssuedCertificate(
                name=name,
                role=role,
                cert=cert_path,
                key=key_path,
                ca=os.path.join(directory, CA_CERT),
                created_ca=created and not out,
                not_after=not_after.isoformat(timespec="seconds"),
                fingerprint=hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest(),
            )
        )
    return out


def list_certificates(directory: str | os.PathLike) -> list[dict]:
    """Name, role, expiry and fingerprint of every ``*.pem`` party certificate in ``directory``."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise CertificateError(f"{directory} is not a directory")
    out = []
    for fn in sorted(os.listdir(directory)):
        if not fn.endswith(".pem") or fn == CA_CERT:
            continue
        cert = _load_cert(os.path.join(directory, fn))
        ident = identity_from_cert(cert)
        out.append(
            {
                "name": ident.name,
                "role": ident.role,
                "file": fn,
                "not_after": cert.not_valid_after_utc.isoformat(timespec="seconds"),
                "fingerprint": ident.fingerprint,
                "key": os.path.exists(os.path.join(directory, fn[:-4] + ".key")),
            }
        )
    return out


# ---------------------------------------------------------------------------
# Reading certificates
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerIdentity:
    """The verified identity of a TLS peer: certificate name (CN), role, SHA-256 fingerprint of the DER."""

    name: str
    role: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.name!r} (role {self.role})"


def _load_cert(path: str):
    from cryptography import x509

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise CertificateError(f"{path} does not exist") from None
    except OSError as exc:
        raise CertificateError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertificateError(f"{path} is not a PEM certificate ({exc})") from None


def identity_from_cert(cert) -> PeerIdentity:
    """Name and role of a pairwise certificate (raises :class:`CertificateError` when it has none)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(cns) != 1:
        raise CertificateError("the certificate has no single common name")
    name = str(cns[0].value)
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        eku = []
    oids = {oid.dotted_string for oid in eku}
    roles = [r for r in ROLES if _ROLE_OID_TEXT[r] in oids]
    if len(roles) != 1:
        raise CertificateError(
            f"the certificate of {name!r} carries {'no' if not roles else 'several'} pairwise role(s) "
            "(make certificates with `pairwise certs create`)"
        )
    fp = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return PeerIdentity(name=name, role=roles[0], fingerprint=fp)


def identity_from_der(der: bytes) -> PeerIdentity:
    from cryptography import x509

    return identity_from_cert(x509.load_der_x509_certificate(der))


def _check_key_file_mode(path: str) -> None:
    if os.name != "posix":
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CertificateError(f"{path} does not exist") from None
    if stat.S_IMODE(mode) & 0o077:
        raise CertificateError(
            f"permissions {stat.S_IMODE(mode):04o} for {path} are too open: other users could read the private key "
            f"(run: chmod 600 {path})"
        )


class TLSConfig:
    """One party's TLS credentials: ``DIR/ca.pem`` (the only trust anchor), ``DIR/NAME.pem``, ``DIR/NAME.key``.

    Checks at construction that the files exist, that the certificate is
    signed by the CA, is valid now, carries a role, and that the key is
    private to this user (mode 0600).  ``name`` and ``role`` are this party's.
    """

    def __init__(self, directory: str | os.PathLike, name: str) -> None:
        directory = os.fspath(directory)
        check_name(name)
        if not os.path.isdir(directory):
            raise CertificateError(
                f"--tls {directory}: no such directory (create certificates with "
                f"`pairwise certs create --dir {directory} --name {name} --role ROLE`)"
            )
        self.directory = directory
        self.ca_path = os.path.join(directory, CA_CERT)
        self.cert_path = os.path.join(directory, f"{name}.pem")
        self.key_path = os.path.join(directory, f"{name}.key")
        for p in (self.ca_path, self.cert_path, self.key_path):
            if not os.path.exists(p):
                raise CertificateError(
                    f"{p} is missing: no certificate {name!r} in {directory} "
                    f"(create it with `pairwise certs create --dir {directory} --name {name} --role ROLE`)"
                )
        _check_key_file_mode(self.key_path)
        ca, cert = _load_cert(self.ca_path), _load_cert(self.cert_path)
        try:
            cert.verify_directly_issued_by(ca)
        except Exception:  # noqa: BLE001 - ValueError / TypeError / InvalidSignature: all mean "not this CA"
            raise CertificateError(f"{self.cert_path} is not signed by the CA in {self.ca_path}") from None
        now = _now()
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise CertificateError(
                f"{self.cert_path} is not valid now (valid {cert.not_valid_before_utc:%Y-%m-%d} to "
                f"{cert.not_valid_after_utc:%Y-%m-%d}); issue a new one"
            )
        ident = identity_from_cert(cert)
        if ident.name != name:
            raise CertificateError(f"{self.cert_path} is the certificate of {ident.name!r}, not of {name!r}")
        self.name, self.role, self.fingerprint = name, ident.role, ident.fingerprint
        self._server_ctx = self._make_context(server=True)
        self._client_ctx = self._make_context(server=False)

    def _make_context(self, *, server: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
        if not server:
            ctx.check_hostname = False  # names are pinned by the application (module docstring)
        else:
            ctx.num_tickets = 0  # no session resumption: nothing to send after the handshake
        try:
            ctx.load_verify_locations(cafile=self.ca_path)
            ctx.load_cert_chain(self.cert_path, self.key_path)
        except ssl.SSLError as exc:
            raise CertificateError(f"cannot use {self.cert_path} with {self.key_path}: {exc.reason or exc}") from None
        return ctx

    def context(self, *, server: bool) -> ssl.SSLContext:
        return self._server_ctx if server else self._client_ctx

    def __repr__(self) -> str:
        return f"TLSConfig({self.directory!r}, {self.name!r}, role={self.role!r})"


# ---------------------------------------------------------------------------
# Handshakes
# ---------------------------------------------------------------------------

_ALERTS = {
    "TLSV1_ALERT_UNKNOWN_CA": "the peer does not trust our certificate (it was signed by another CA)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the peer rejected our certificate",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "the peer says our certificate has expired",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the peer requires a client certificate and we sent none",
    "TLSV1_ALERT_PROTOCOL_VERSION": "the peer does not speak TLS 1.3",
    "TLSV1_ALERT_DECRYPT_ERROR": "the peer could not verify our key (certificate and key do not match?)",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "the peer aborted the handshake",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "the peer sent no certificate (every party needs one: --tls DIR --name NAME)",
    "WRONG_VERSION_NUMBER": "the peer is not speaking TLS (does it run without --tls?)",
    "UNEXPECTED_EOF_WHILE_READING": "the peer closed the connection during the handshake "
    "(it may run without --tls, or it rejected our certificate)",
    "UNSUPPORTED_PROTOCOL": "the peer does not speak TLS 1.3",
}


def describe_ssl_error(exc: BaseException) -> str:
    """A sentence for an :mod:`ssl` failure (alerts from the peer, local verification failures)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or "verification failed"
        hint = ""
        if exc.verify_code in (19, 20, 21):  # self-signed in chain / unable to get issuer / unable to verify leaf
            hint = " (it was signed by another CA)"
        elif exc.verify_code == 10:
            hint = " (issue a new one)"
        return f"the peer's certificate is not acceptable: {why}{hint}"
    if isinstance(exc, ssl.SSLEOFError):
        return _ALERTS["UNEXPECTED_EOF_WHILE_READING"]
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        return _ALERTS.get(reason, f"TLS error {reason or exc}")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "the peer reset the connection during the handshake (it may have rejected our certificate)"
    return str(exc) or type(exc).__name__


def _handshake(sock: socket.socket, config: TLSConfig, *, server: bool, timeout: float, peer: str, on_wrap=None):
    ssock = config.context(server=server).wrap_socket(sock, server_side=server, do_handshake_on_connect=False)
    if on_wrap is not None:
        on_wrap(ssock)
    try:
        ssock.settimeout(timeout)
        ssock.do_handshake()
        der = ssock.getpeercert(binary_form=True)
        if not der:  # cannot happen with CERT_REQUIRED; do not rely on it
            raise AuthenticationError(f"TLS peer {peer} presented no certificate")
        try:
            ident = identity_from_der(der)
        except (CertificateError, ValueError) as exc:
            raise AuthenticationError(f"TLS peer {peer}: {exc}") from None
    except TimeoutError:
        ssock.close()
        raise ChannelTimeout(f"TLS handshake with {peer} did not finish within {timeout:g} s") from None
    except (ssl.SSLError, ConnectionError) as exc:
        if server:
            _drain_and_close(ssock)  # so the alert OpenSSL just sent reaches the peer (no reset)
        else:
            ssock.close()
        if not server and getattr(exc, "reason", None) == "TLSV1_ALERT_USER_CANCELLED":
            raise PeerBusy(
                f"{peer} is busy: it cancelled the TLS handshake (it serves its maximum of connections); retry later"
            ) from None
        raise AuthenticationError(f"TLS handshake with {peer} failed: {describe_ssl_error(exc)}") from None
    except BaseException:
        ssock.close()
        raise
    return ssock, ident


def server_handshake(sock: socket.socket, config: TLSConfig, *, timeout: float, peer: str, on_wrap=None):
    """Accepting side: (ssl socket, :class:`PeerIdentity`) or :class:`AuthenticationError` (socket closed).

    A peer whose first byte is not a TLS handshake record is told
    :data:`TLS_REQUIRED` in one plaintext frame (the pairwise handshake of a
    plaintext peer reports it), then the connection is closed.
    ``on_wrap(ssl_socket)`` is called as soon as the TLS socket exists (so
    another thread can interrupt the handshake).
    """
    sock.settimeout(timeout)
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        sock.close()
        raise ChannelTimeout(f"{peer} sent nothing within {timeout:g} s (expected a TLS handshake)") from None
    except OSError as exc:
        sock.close()
        raise PeerClosed(f"{peer} closed the connection before the TLS handshake ({exc.strerror or exc})") from None
    if not first:
        sock.close()
        raise PeerClosed(f"{peer} closed the connection before the TLS handshake")
    if first[0] != 0x16:  # TLS record type 22 = handshake
        _tell_tls_required(sock)
        raise AuthenticationError(
            f"{peer} did not start a TLS handshake (a plaintext pairwise peer, or another protocol); "
            "this endpoint requires TLS, and the peer was told so"
        )
    return _handshake(sock, config, server=True, timeout=timeout, peer=peer, on_wrap=on_wrap)


def client_handshake(sock: socket.socket, config: TLSConfig, *, timeout: float, peer: str):
    """Connecting side: (ssl socket, :class:`PeerIdentity`) or :class:`AuthenticationError` (socket closed)."""
    return _handshake(sock, config, server=False, timeout=timeout, peer=peer)


def _tell_tls_required(sock: socket.socket) -> None:
    """Send one plaintext frame saying TLS is required, then close without resetting the connection."""
    msg = TLS_REQUIRED + b": this endpoint requires mutual TLS; run with --tls DIR --name NAME"
    try:
        sock.settimeout(1.0)
        sock.sendall(len(msg).to_bytes(4, "big") + msg)
    except OSError:
        pass
    _drain_and_close(sock)


def _drain_and_close(sock: socket.socket, wait: float = 1.0) -> None:
    """Half-close, read what the peer already sent (at most 64 KiB, ``wait`` seconds), close.

    Closing a socket with unread input makes the kernel send a reset, which
    can destroy the last message (our frame or TLS alert) before the peer reads it.
    """
    try:
        sock.settimeout(wait)
        sock.shutdown(socket.SHUT_WR)
        drained = 0
        while drained < 1 << 16:
            chunk = sock.recv(4096)
            if not chunk:
                break
            drained += len(chunk)
    except (OSError, ValueError):
        pass
    finally:
        sock.close()


# ---------------------------------------------------------------------------
# Loopback policy
# ---------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback address (127/8, ::1)."""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        pass  # a host name: every address it resolves to must be loopback
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    try:
        return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos)
    except ValueError:
        return False


def check_plaintext(host: str, port: int, *, insecure: bool, what: str) -> None:
    """Raise :class:`InsecureTransport` for plaintext ``what`` (e.g. "listening on") a non-loopback host."""
    if insecure or is_loopback(host):
        return
    raise InsecureTransport(
        f"refusing plaintext {what} {host}:{port}: it is not a loopback address. Use mutual TLS "
        "(--tls DIR --name NAME; make certificates with `pairwise certs create`), "
        "or pass --insecure on a network you trust"
    )


# ---------------------------------------------------------------------------
# Demos
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def throwaway_credentials(parties: Iterable[tuple[str, str]]) -> Iterator[str]:
    """A temporary directory with a fresh CA and a certificate for each ``(name, role)``; removed on exit."""
    directory = tempfile.mkdtemp(prefix="pairwise-tls-")
    try:
        for name, role in parties:
            create_certificate(directory, name, role, days=1)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
