"""``pairwise ecdf serve``: run one ECDF server until SIGTERM or SIGINT (flags: :mod:`pairwise.commands.ecdf`).

Security model: see :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

import json

from pairwise.protocols.transport import tls_from_args


def _pairs(items, flag: str, what: str) -> dict:
    out = {}
    for it in items:
        name, sep, val = it.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} needs {what}, got {it!r}")
        out[name] = val
    return out


def _budgets(items) -> dict:
    return _pairs(items, "--dataset-budget", "NAME=E")


def _server_ids(items, flag: str, what: str) -> dict:
    out = {}
    for j, val in _pairs(items, flag, what).items():
        if not j.isdigit():
            raise ValueError(f"{flag} {j}={val}: J must be a server id (0, 1, ...)")
        out[int(j)] = val
    return out


def _peers(items) -> dict:
    from pairwise.protocols.ecdf.wire import parse_address

    out = {}
    for j, addr in _server_ids(items, "--peer", "J=HOST:PORT").items():
        try:
            out[j] = parse_address(addr)
        except ValueError as exc:
            raise ValueError(f"--peer {j}={addr}: {exc}") from None
    return out


def cmd_serve(args) -> int:
    import signal

    from pairwise.protocols.ecdf.auth import Policy
    from pairwise.protocols.ecdf.server import ECDFServer
    from pairwise.protocols.ecdf.wire import parse_address

    host, port = parse_address(args.listen)
    tls = tls_from_args(args)
    names = _server_ids(args.peer_name, "--peer-name", "J=NAME")
    if names and tls is None:
        raise ValueError("--peer-name J=NAME needs --tls DIR --name NAME (a plaintext peer has no verified name)")
    per_owner = args.budget_per_owner
    srv = ECDFServer(
        args.server_id,
        host,
        port,
        budget=args.budget,
        owner_budget=args.budget if per_owner is None else (None if per_owner.strip().lower() == "none" else per_owner),
        total_budget=args.budget_total,
        dataset_budgets=_budgets(args.dataset_budget),
        timeout=args.timeout,
        request_timeout=args.request_timeout,
        max_connections=args.max_connections,
        max_staged_bytes=args.max_staged_bytes,
        max_staged_bytes_per_connection=args.max_staged_bytes_per_connection,
        max_check_memory=args.max_check_memory,
        num_servers=args.num_servers,
        accept_unverified=args.accept_unverified,
        state_dir=args.state,
        peers=_peers(args.peer),
        tls=tls,
        insecure=args.insecure,
        policy=Policy(server_names=names, tls=tls is not None),
        cluster=args.cluster,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda num, _frame: srv.stop(signal.Signals(num).name))
    print(
        json.dumps(
            {
                "event": "listening",
                "server_id": args.server_id,
                "host": host,
                "port": srv.port,
                "state": args.state,
                "tls": tls is not None,
                "cluster": None if srv.cluster is None else srv.cluster.spec,
            }
        ),
        flush=True,
    )
    srv.serve_forever(watch_parent=args.exit_with_parent)
    return 0
