"""create_certificates (mpc.tls): many certificates with one CA load, same checks as create_certificate."""

from __future__ import annotations

import os

import pytest

from pairwise.mpc.tls import CertificateError, TLSConfig, create_certificate, create_certificates, list_certificates


def test_bulk_certificates_are_ordinary_certificates(tmp_path):
    made = create_certificates(tmp_path, [f"u{i}" for i in range(20)], "client")
    assert [m.name for m in made] == [f"u{i}" for i in range(20)]
    assert made[0].created_ca and not any(m.created_ca for m in made[1:])
    listed = {c["name"]: c for c in list_certificates(tmp_path)}
    assert set(listed) == {m.name for m in made}
    assert all(listed[m.name]["fingerprint"] == m.fingerprint and listed[m.name]["role"] == "client" for m in made)
    assert len({m.fingerprint for m in made}) == 20
    cfg = TLSConfig(tmp_path, "u7")  # chains to the CA, key private
    assert cfg.role == "client" and oct(os.stat(made[7].key).st_mode & 0o777) == "0o600"
    # the same CA signs later single certificates
    create_certificate(tmp_path, "later", "server")
    assert TLSConfig(tmp_path, "later").role == "server"


def test_bulk_refuses_before_writing_anything(tmp_path):
    create_certificate(tmp_path, "taken", "client")
    before = sorted(os.listdir(tmp_path))
    for names, match in (
        (["a", "taken"], "already exists"),
        (["a", "a"], "twice"),
        (["a", "bad name"], "name"),
        (["a", "ca"], "reserved"),
    ):
        with pytest.raises(CertificateError, match=match):
            create_certificates(tmp_path, names, "client")
        assert sorted(os.listdir(tmp_path)) == before
    with pytest.raises(CertificateError, match="role"):
        create_certificates(tmp_path, ["a"], "admin")
