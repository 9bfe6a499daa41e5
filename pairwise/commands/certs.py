"""``pairwise certs``: a certificate authority and role certificates for mutual TLS.

Commands
    ``pairwise certs create --dir DIR --name NAME --role server|querier|client|user|collector [--days N] [--json]``
        Creates ``DIR/ca.pem`` and ``DIR/ca.key`` (mode 0600) if they are
        absent, then ``DIR/NAME.pem`` and ``DIR/NAME.key`` (mode 0600) signed
        by that CA, with the role in the certificate.  Never overwrites a
        file.  JSON keys: ``name``, ``role``, ``cert``, ``key``, ``ca``,
        ``created_ca``, ``not_after``, ``fingerprint``.
    ``pairwise certs list --dir DIR [--json]``
        Name, role, expiry and SHA-256 fingerprint of each certificate in DIR.

Roles: ``server`` (an ECDF server, with the server-to-server noise 2PC; the
collect aggregator), ``querier`` (uploads, releases, status), ``client``
(uploads only; also the ustat workers and any 2PC party), ``user`` (one
person who joins collect tasks with their own value, ``pairwise collect
join``), ``collector`` (an analyst who creates collect tasks and reads their
results).  Give every party only its own NAME.key
and the shared ca.pem; keep ca.key where certificates are made.

Security model: see :mod:`pairwise.mpc.tls`.
"""

from __future__ import annotations

import json

from .options import add_json, positive_int


def register(root, groups) -> None:
    p = root.add_parser("certs", help="make a CA and role certificates for mutual TLS")
    sub = p.add_subparsers(dest="certs_command", metavar="WHAT")
    p.set_defaults(func=lambda args, _p=p: (_p.print_help(), 2)[1])
    c = sub.add_parser("create", help="create DIR/NAME.pem and DIR/NAME.key (and the CA if DIR has none)")
    c.add_argument("--dir", required=True, help="certificate directory (created with mode 0700 if absent)")
    c.add_argument("--name", required=True, help="the party's name (certificate CN), e.g. server-0, alice")
    c.add_argument(
        "--role",
        required=True,
        choices=["server", "querier", "client", "user", "collector"],
        help="server: an ECDF server or the collect aggregator; querier: uploads, releases, status; "
        "client: uploads only, ustat workers and 2PC parties; user: joins collect tasks with "
        "their own value; collector: creates collect tasks and reads their results",
    )
    c.add_argument("--days", type=positive_int, default=365, help="validity in days (default 365)")
    add_json(c)
    c.set_defaults(func=cmd_create)
    ls = sub.add_parser("list", help="the certificates in DIR with their roles")
    ls.add_argument("--dir", required=True, help="certificate directory")
    add_json(ls, "print one JSON list, one object per certificate")
    ls.set_defaults(func=cmd_list)


def cmd_create(args) -> int:
    from dataclasses import asdict

    from pairwise.mpc.tls import create_certificate

    issued = create_certificate(args.dir, args.name, args.role, days=args.days)
    if args.json:
        print(json.dumps(asdict(issued)))
        return 0
    if issued.created_ca:
        print(f"created CA {issued.ca} (and its key {issued.ca[:-4]}.key, mode 0600: keep it private)")
    print(
        f"created {issued.cert} and {issued.key}: name {issued.name}, role {issued.role}, "
        f"valid until {issued.not_after}"
    )
    print(f"  sha256 fingerprint {issued.fingerprint}")
    return 0


def cmd_list(args) -> int:
    from pairwise.mpc.tls import list_certificates

    certs = list_certificates(args.dir)
    if args.json:
        print(json.dumps(certs))
        return 0
    if not certs:
        print(f"no certificates in {args.dir}")
    for c in certs:
        print(
            f"{c['name']:<20} {c['role']:<8} until {c['not_after']}  {c['fingerprint'][:16]}"
            f"{'' if c['key'] else '  (no key here)'}"
        )
    return 0
