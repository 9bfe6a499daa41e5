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
    ReleaseInputs,
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
            f"pairwise ecdf query --servers {servers_text} --dataset {dataset} --epsilon E; or add new clients "
            "to it with --append --id-column COL. A new --dataset id is for other people's data: the same people "
            "under a new id draw from their data owner's budget (--budget-per-owner, on by default), not a new one"
        )


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
    if args.scheme == "dcf":  # deprecated spelling: the two-server scheme is the verifiable one now
        import sys

        print(
            "note: --scheme dcf is deprecated; two servers take verifiable vdpf keys (--scheme vdpf)", file=sys.stderr
        )
        args.scheme = "vdpf"
    if args.scheme != "pointwise":
        scheme_for(args.scheme, len(servers), args.domain_bits)


class CSVClients:
    """The clients of one CSV column, one per data row, read block by block (a ``ClientSource``).

    The file is read twice: here, to count the rows and check every cell
    (numbers, 0/1 labels, ids) before any server is contacted, and by
    :meth:`blocks`, while the upload runs.  Each client clamps its own value
    into the public domain and quantizes it to ``domain_bits`` bits.  Memory
    holds one block of rows whatever the file's size.  Not private, for the
    command's report only: ``clamped`` (values moved into the domain) and,
    with ``grid_bits``, the exact counts per grid bin (:class:`.release.Reference`).
    """

    ROWS = 1 << 16

    def __init__(self, args, dom, dataset: str, grid_bits: int | None = None) -> None:
        import numpy as np

        from pairwise.protocols.ecdf.client import stored_client_ids

        self.path, self.column, self.label, self.id_column = args.data, args.column, args.label, args.id_column
        self.dom, self.bits, self.dataset = dom, args.domain_bits, dataset
        self.series = {"pos": 1, "neg": 1} if self.label else {"all": 1}
        self.count = self.clamped = 0
        self.reference = None
        hist = None
        if grid_bits is not None:
            from .release import Reference

            hist = {k: np.zeros(1 << grid_bits, dtype=np.int64) for k in ("all", "pos", "neg")}
        for values, labels, ids in self._read(self.ROWS):
            if self.id_column:
                stored_client_ids(ids, dataset)  # every id is checked before anything is sent
            self.count += values.size
            if hist is not None:
                b = values >> np.int64(self.bits - grid_bits)
                hist["all"] += np.bincount(b, minlength=hist["all"].size)
                if labels is not None:
                    hist["pos"] += np.bincount(b, weights=labels, minlength=hist["pos"].size).astype(np.int64)
                    hist["neg"] += np.bincount(b, weights=1 - labels, minlength=hist["neg"].size).astype(np.int64)
        if hist is not None:
            self.reference = Reference(
                self.count,
                grid_bits,
                hist["all"],
                hist["pos"] if self.label else None,
                hist["neg"] if self.label else None,
            )

    def _read(self, rows: int):
        """(quantized values, labels or None, raw ids or None) per block of the file."""
        from pairwise.dp.bounds import clamp
        from pairwise.protocols.datasets import iter_csv
        from pairwise.protocols.ecdf.shares import quantize

        clamped = 0
        for block in iter_csv(
            self.path, [self.column], label=self.label, text=[self.id_column] if self.id_column else (), rows=rows
        ):
            col, moved = clamp(block[self.column], self.dom.lower, self.dom.upper)  # each client clamps its own
            clamped += moved
            yield (
                quantize(col, self.dom.lower, self.dom.upper, self.bits).astype("int64"),
                block[self.label] if self.label else None,
                block[self.id_column] if self.id_column else None,
            )
        self.clamped = clamped

    def ids_at(self, positions) -> dict:
        """The ``--id-column`` cells of the data rows at ``positions`` (0-based), as written in the file
        (one more pass over it; empty without ``--id-column``)."""
        want, first = {int(p) for p in positions}, 0
        found: dict[int, str] = {}
        if not self.id_column or not want:
            return found
        for values, _, ids in self._read(self.ROWS):
            for p in want.intersection(range(first, first + values.size)):
                found[p] = str(ids[p - first])
            first += values.size
        return found

    def blocks(self, size: int):
        import numpy as np

        from pairwise.protocols.ecdf.client import ClientBlock, stored_client_ids

        first = 0
        for values, labels, ids in self._read(size):
            k = values.size
            weights = (
                {"all": None}
                if labels is None
                else {"pos": labels.astype(np.uint64), "neg": (1 - labels).astype(np.uint64)}
            )
            stored = (
                np.arange(first, first + k, dtype=np.uint64) if ids is None else stored_client_ids(ids, self.dataset)
            )
            yield ClientBlock(values, weights, stored)
            first += k


def _dataset_id(args) -> str:
    return args.dataset or f"{os.path.basename(args.data)}:{args.column}"


def _meta(dom, args) -> dict:
    return {"column": args.column, "range": [dom.lower, dom.upper]}  # public: stored with the dataset for ecdf query


def _tls_flags(args) -> str:
    """The transport flags of the release hint (``--tls DIR --name QUERIER`` or ``--insecure``): the same
    certificate directory; the name is a querier's certificate, as a data owner's ``client`` cannot release."""
    if getattr(args, "tls", None):
        return f" --tls {args.tls} --name QUERIER"
    return " --insecure" if getattr(args, "insecure", False) else ""


def _all_rejected(rep, n: int) -> bool:
    return n > 0 and not any(rep.accepted)


def _rejections_note(rep, clients: CSVClients | None = None) -> str:
    """The rejections of an upload in brief: the count per server and each server's first reason, naming a
    client by the id of its CSV row (a string id is stored as a hash, which its owner would not recognize)."""
    firsts = [r[0] for r in rep.rejected if r]
    named = clients.ids_at({e["position"] for e in firsts if "position" in e}) if clients is not None else {}
    reasons = []
    for e in firsts:
        why = str(e["reason"])
        own = named.get(e.get("position"))
        if own is not None and e.get("client") is not None:
            why = why.replace(f"client id {e['client']}", f"client id {own!r}")
        reasons.append(why)
    return f"rejected clients per server {rep.rejected_count} (first reasons: {reasons})"


def cmd_upload(args) -> int:
    """``ecdf upload``: be the clients of a CSV column, with no release (a ``client`` certificate suffices)."""
    import sys

    from pairwise.protocols.ecdf.client import upload_source
    from pairwise.protocols.ecdf.wire import parse_servers

    servers = parse_servers(args.servers)
    args.column = _run_column(args)
    _check_upload_args(args, servers)
    dom = _run_domain(args)
    dataset = _dataset_id(args)
    clients = CSVClients(args, dom, dataset)  # the whole file is checked before any server is contacted
    with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
        # the servers refuse an existing dataset id unless --append (datasets are sealed), before any key is made
        rep = upload_source(
            servers,
            dataset,
            clients,
            domain_bits=args.domain_bits,
            scheme=args.scheme,
            append=args.append,
            meta=_meta(dom, args),
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            progress=progress,
            tls=tls_from_args(args),
            insecure=args.insecure,
        )
    n = clients.count
    out = {
        "dataset": dataset,
        "n": int(n),
        "accepted": rep.accepted,
        "rejected_count": rep.rejected_count,
        "append": bool(args.append),
        "range": [dom.lower, dom.upper],
        "domain_bits": args.domain_bits,
        "series": ["neg", "pos"] if args.label else ["all"],
        "clamped": clients.clamped,
        "upload_bytes": rep.bytes,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"uploaded {args.column} of {args.data} as dataset {dataset!r}: {n} clients, accepted per server "
            f"{rep.accepted}, public domain [{dom.lower:g}, {dom.upper:g}] on 2^{args.domain_bits} bins"
        )
        print(f"  clamped: {clamped_note(clients.clamped, [dom])}")
        if any(rep.rejected_count):
            print(f"  note: {_rejections_note(rep, clients)}")
        if not _all_rejected(rep, n):
            print(
                f"  release it: pairwise ecdf query --servers {args.servers} --dataset {dataset} --epsilon E"
                f"{_tls_flags(args)}"
            )
    if _all_rejected(rep, n):
        hint = (
            " (an append needs client ids that the dataset does not hold yet: --id-column COL)"
            if args.append and not args.id_column
            else ""
        )
        print(
            f"pairwise: error: none of the {n} clients was accepted{hint}; {_rejections_note(rep, clients)}",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_run(args) -> int:
    from pairwise.protocols.ecdf.client import upload_pointwise, upload_source
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
    dataset = _dataset_id(args)
    lo, hi = dom.lower, dom.upper
    g = args.grid_bits or args.domain_bits
    clients = CSVClients(args, dom, dataset, grid_bits=g)  # checked (and counted) before anything is sent
    if not args.append:
        _refuse_existing(q, dataset, args.servers)
    tls = dict(tls=q.tls, insecure=q.insecure)
    with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
        if args.scheme == "pointwise":
            rep = upload_pointwise(
                servers,
                dataset,
                None,
                grid_bits=g,
                domain_bits=args.domain_bits,
                meta=_meta(dom, args),
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
                progress=progress,
                source=clients,
                **tls,
            )
        else:
            rep = upload_source(
                servers,
                dataset,
                clients,
                domain_bits=args.domain_bits,
                scheme=args.scheme,
                append=args.append,
                meta=_meta(dom, args),
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
                progress=progress,
                **tls,
            )
    if _all_rejected(rep, clients.count):
        raise ValueError(
            f"none of the {clients.count} clients was accepted, nothing to release; " + _rejections_note(rep, clients)
        )
    # the exact reference only with --compare (not private), and not after an append (the servers hold more)
    reference = clients.reference if args.compare and not args.append else None
    with progress_bar(args, _release_bar(args.roc), unit="stage") as progress:
        inputs = ReleaseInputs(
            lo,
            hi,
            args.domain_bits,
            values=reference,
            upload_bytes=rep.bytes,
            pointwise=args.scheme == "pointwise",
            qs=qs,
            roc=args.roc,
        )
        out = _release_and_report(q, dataset, inputs, args, progress=progress)
    out["dataset"] = dataset
    out["clamped"] = clients.clamped
    out["upload"] = {"accepted": rep.accepted, "rejected_count": rep.rejected_count}
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(
        out,
        f"DP ECDF of {args.column} in {args.data} (dataset {dataset!r}, public domain [{lo:g}, {hi:g}])",
        compare=args.compare,
    )
    if any(rep.rejected_count):
        print(f"  note: {_rejections_note(rep, clients)}")
    return 0
