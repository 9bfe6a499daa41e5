"""``pairwise ecdf upload`` and ``ecdf run``: be the clients of a CSV column (and, for ``run``, the querier).

Security model: see :mod:`pairwise.protocols.ecdf.server`; each client clamps
its own value into the public domain before anything is sent.
"""

from __future__ import annotations

import json
import os

from pairwise.protocols.transport import tls_from_args

from ..bounds import clamped_note, deprecated, resolve_domains
from ..options import progress_bar
from .release import (
    UPLOAD_BAR,
    _print_report,
    _querier,
    _release_and_report,
    _release_bar,
    _validate_release_args,
)


def _run_domain(args):
    """The public domain of ``--column``: --lower/--upper, or the deprecated --range LO,HI."""
    if args.range is not None:
        deprecated("--range LO,HI", "--lower LO --upper HI")
        if args.lower is not None or args.upper is not None:
            raise ValueError("give either --lower/--upper or the deprecated --range, not both")
        parts = args.range.split(",")
        if len(parts) != 2:
            raise ValueError(f"--range must be LO,HI, got {args.range!r}")
        args.lower, args.upper = parts[0], parts[1]
    return resolve_domains(args, [args.column], None)[0]


def _refuse_existing(q, dataset: str, servers_text: str) -> None:
    """``ecdf run`` never uploads to a dataset id that a server already holds (datasets are sealed)."""
    from pairwise.protocols.ecdf.wire import DatasetExists

    held = [j for j, has in enumerate(q.holders(dataset)) if has]
    if held:
        raise DatasetExists(
            f"dataset {dataset!r} already exists on server(s) {held} (datasets are sealed once uploaded, so a "
            f"changed CSV cannot be mixed with the old keys). Release over the stored data without uploading: "
            f"pairwise ecdf query --servers {servers_text} --dataset {dataset} --epsilon E; or upload this CSV "
            "under a new --dataset id (or add new clients to it with --append --id-column COL)")


def _run_column(args) -> str:
    """The one column of ``ecdf run`` (``--columns NAME``, or the deprecated ``--column NAME``)."""
    if args.data is None:
        raise ValueError("ecdf run needs --data FILE.csv")
    if not args.columns or len(args.columns) != 1:
        raise ValueError(f"ecdf run needs one column: --columns NAME, got {args.columns or 'none'}")
    return args.columns[0]


def _check_upload_args(args, servers) -> None:
    """Every upload flag of ``ecdf run`` / ``ecdf upload``, before anything is read or sent."""
    from pairwise.protocols.ecdf.client import scheme_for

    if args.append and args.scheme == "pointwise":
        raise ValueError("--append adds clients to a dataset of FSS keys; a pointwise round is uploaded whole")
    if args.id_column and not args.append:
        raise ValueError("--id-column is for --append (a new dataset numbers its clients by CSV row)")
    if args.scheme != "pointwise":
        scheme_for(args.scheme, len(servers), args.domain_bits)


def _client_values(args, dom):
    """The clients of the CSV: (quantized values, labels, ids, clamped count, public meta, dataset id)."""
    import numpy as np

    from pairwise.dp.bounds import clamp
    from pairwise.protocols.datasets import load_csv
    from pairwise.protocols.ecdf.shares import quantize

    d = load_csv(args.data, [args.column] + ([args.id_column] if args.id_column else []), label=args.label)
    col, clamped = clamp(d[args.column], dom.lower, dom.upper)  # each client clamps its own value
    labels = np.asarray(d[args.label]).astype(int) if args.label else None
    ids = None
    if args.id_column:
        raw = np.asarray(d[args.id_column], dtype=float)
        if (raw < 0).any() or (raw != np.floor(raw)).any() or (raw >= 2.0**63).any():
            raise ValueError(f"--id-column {args.id_column!r} must hold non-negative integers")
        ids = raw.astype(np.uint64)
    lo, hi = dom.lower, dom.upper
    meta = {"column": args.column, "range": [lo, hi]}  # public: stored with the dataset for ecdf query
    x = quantize(col, lo, hi, args.domain_bits)
    dataset = args.dataset or f"{os.path.basename(args.data)}:{args.column}"
    return x, labels, ids, clamped, meta, dataset


def cmd_upload(args) -> int:
    """``ecdf upload``: be the clients of a CSV column, with no release (a ``client`` certificate suffices)."""
    from pairwise.protocols.ecdf.client import upload
    from pairwise.protocols.ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    args.column = _run_column(args)
    _check_upload_args(args, servers)
    dom = _run_domain(args)
    x, labels, ids, clamped, meta, dataset = _client_values(args, dom)
    with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
        # the servers refuse an existing dataset id unless --append (datasets are sealed), before taking any key
        rep = upload(servers, dataset, x, labels=labels, domain_bits=args.domain_bits, scheme=args.scheme,
                     client_ids=ids, append=args.append, meta=meta, timeout=args.timeout,
                     connect_timeout=args.connect_timeout, progress=progress, tls=tls_from_args(args),
                     insecure=args.insecure)
    out = {"dataset": dataset, "n": int(x.size), "accepted": rep.accepted, "rejected_count": rep.rejected_count,
           "append": bool(args.append), "range": [dom.lower, dom.upper], "domain_bits": args.domain_bits,
           "series": ["neg", "pos"] if labels is not None else ["all"], "clamped": clamped,
           "upload_bytes": rep.bytes}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"uploaded {args.column} of {args.data} as dataset {dataset!r}: {x.size} clients, accepted per server "
          f"{rep.accepted}, public domain [{dom.lower:g}, {dom.upper:g}] on 2^{args.domain_bits} bins")
    print(f"  clamped: {clamped_note(clamped, [dom])}")
    if any(rep.rejected_count):
        print(f"  note: rejected clients per server {rep.rejected_count} "
              f"(first reasons: {[r[0]['reason'] for r in rep.rejected if r]})")
    print(f"  release it: pairwise ecdf query --servers {args.servers} --dataset {dataset} --epsilon E")
    return 0


def cmd_run(args) -> int:
    from pairwise.protocols.ecdf.client import upload, upload_pointwise
    from pairwise.protocols.ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    args.column = _run_column(args)
    if args.roc and not args.label:
        raise ValueError("--roc needs --label COLUMN (0/1)")
    if args.roc and args.scheme == "pointwise":
        raise ValueError("--roc is not offered with the pointwise baseline")
    _check_upload_args(args, servers)
    dom = _run_domain(args)
    qs = _validate_release_args(args, len(servers), args.domain_bits, args.roc)
    q = _querier(args, servers)
    x, labels, ids, clamped, meta, dataset = _client_values(args, dom)
    lo, hi = dom.lower, dom.upper
    if not args.append:
        _refuse_existing(q, dataset, args.servers)
    tls = dict(tls=q.tls, insecure=q.insecure)
    with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
        if args.scheme == "pointwise":
            g = args.grid_bits or args.domain_bits
            rep = upload_pointwise(servers, dataset, x, grid_bits=g, domain_bits=args.domain_bits, meta=meta,
                                   timeout=args.timeout, connect_timeout=args.connect_timeout, progress=progress,
                                   **tls)
            labels_for_roc = None
        else:
            rep = upload(servers, dataset, x, labels=labels, domain_bits=args.domain_bits, scheme=args.scheme,
                         client_ids=ids, append=args.append, meta=meta, timeout=args.timeout,
                         connect_timeout=args.connect_timeout, progress=progress, **tls)
            labels_for_roc = labels if args.roc else None
    exact_x = x if not args.append else None  # after an append the servers hold more than this CSV
    with progress_bar(args, _release_bar(args.roc), unit="stage") as progress:
        out = _release_and_report(q, dataset, exact_x, lo, hi, args.domain_bits, args, labels=labels_for_roc,
                                  upload_bytes=rep.bytes, pointwise=args.scheme == "pointwise", qs=qs, roc=args.roc,
                                  progress=progress)
    out["dataset"] = dataset
    out["clamped"] = clamped
    out["upload"] = {"accepted": rep.accepted, "rejected_count": rep.rejected_count}
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF of {args.column} in {args.data} (dataset {dataset!r}, public domain [{lo:g}, {hi:g}])")
    if any(rep.rejected_count):
        print(f"  note: rejected clients per server {rep.rejected_count} "
              f"(first reasons: {[r[0]['reason'] for r in rep.rejected if r]})")
    return 0
