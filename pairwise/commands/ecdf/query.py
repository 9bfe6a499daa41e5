"""``pairwise ecdf query``, ``repair`` and ``status``: the querier's commands on a dataset the servers hold.

Security model: see :mod:`pairwise.protocols.ecdf.server`; ``query`` never sees
the data, so its report has no not-private keys.
"""

from __future__ import annotations

import json

from ..options import progress_bar
from .release import ReleaseInputs, _print_report, _querier, _release_and_report, _release_bar, _validate_release_args


def cmd_repair(args) -> int:
    """``ecdf repair``: drop the uploads not every server committed, so releases over the dataset work again."""
    from pairwise.protocols.ecdf.wire import parse_servers

    rows = _querier(args, parse_servers(args.servers)).repair(args.dataset, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(rows))
        return 0
    verb = "would drop" if args.dry_run else "dropped"
    for r in rows:
        what = ", ".join(r["dropped"]) if r["dropped"] else "nothing"
        print(f"server {r['server_id']}: {verb} {len(r['dropped'])} upload(s) ({what}); {r['clients']} clients")
    return 0


def cmd_query(args) -> int:
    from pairwise.protocols.ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    q = _querier(args, servers)
    info = q.status(args.dataset)[0]["info"]
    meta = info.get("meta") or {}
    rng = meta.get("range")
    lo, hi = (float(rng[0]), float(rng[1])) if isinstance(rng, list) and len(rng) == 2 else (None, None)
    if args.roc and not {"pos", "neg"} <= set(info["series"]):
        raise ValueError(
            f"--roc needs a dataset uploaded with labels; {args.dataset!r} has series {sorted(info['series'])}"
        )
    n_bits = int(info["domain_bits"])
    if info["scheme"] == "pointwise" and args.grid_bits is None:
        args.grid_bits = info.get("grid_bits")
    qs = _validate_release_args(args, len(servers), n_bits, args.roc)
    with progress_bar(args, _release_bar(args.roc), unit="stage") as progress:
        out = _release_and_report(
            q,
            args.dataset,
            ReleaseInputs(lo, hi, n_bits, qs=qs, roc=args.roc, scheme=info["scheme"]),
            args,
            progress=progress,
        )
    out["dataset"] = args.dataset
    if args.json:
        print(json.dumps(out))
        return 0
    where = f"public domain [{lo:g}, {hi:g}]" if lo is not None else f"domain points of 2^{n_bits}"
    _print_report(out, f"DP ECDF of dataset {args.dataset!r} ({meta.get('column', 'values')}, {where})")
    return 0


def status_rows(replies: list[dict]) -> list[dict]:
    """``ecdf status --json``: one shape with or without ``--dataset``.

    One object per server with ``server_id`` and ``datasets`` (a list of
    dataset infos: only the named one with ``--dataset``); with ``--dataset``
    the servers' ``info`` key (that one dataset) is kept as well, for
    scripts written before the shapes were unified.
    """
    return [dict(r, datasets=[r["info"]] if "info" in r else list(r.get("datasets", []))) for r in replies]


def cmd_status(args) -> int:
    from fractions import Fraction

    q = _querier(args, args.servers)
    st = status_rows(q.status(args.dataset))
    if args.json:
        print(json.dumps(st))
        return 0
    for r in st:
        print(f"server {r['server_id']}: {len(r['datasets'])} dataset(s)")
        cl = r.get("cluster")
        if cl:
            print(
                f"  Dask cluster {cl['spec']} (scheduler {cl['scheduler']}): "
                + (f"{cl['workers']} worker(s), {cl['threads']} thread(s)" if "error" not in cl else cl["error"])
            )
        for i in r["datasets"]:
            print(
                f"  {i['dataset']}: {i['clients']} clients, {i['scheme']} m={i['m']}, series {sorted(i['series'])}, "
                f"spent {float(Fraction(i['spent'])):g} of {float(Fraction(i['budget'])):g}, "
                f"{float(Fraction(i['left'])):g} left"
            )
            for o in i.get("owners", []):
                if o["budget"] is not None:
                    who = repr(o["owner"]) if o["owner"] else "(no certificate)"
                    print(
                        f"    data owner {who}: spent {float(Fraction(o['spent'])):g} of "
                        f"{float(Fraction(o['budget'])):g} across its datasets"
                    )
    return 0
