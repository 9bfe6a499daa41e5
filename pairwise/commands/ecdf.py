"""``pairwise ecdf``: the multi-server differentially private ECDF service.

Commands
    ``pairwise ecdf serve --server-id I --listen HOST:PORT [--state DIR] [--budget E]
    [--dataset-budget NAME=E ...] [--peer J=HOST:PORT ...] [--peer-name J=NAME ...] [--timeout S]
    [--request-timeout S] [--max-connections N] [--cluster SPEC] [--exit-with-parent]
    [--tls DIR --name NAME | --insecure]``
        Run server I until SIGTERM or SIGINT (a clean shutdown in a few
        seconds).  Prints ``{"event": "listening", ...}`` on stdout once it
        accepts connections (port 0 picks a free port).  ``--state DIR``
        keeps its datasets, keys and privacy ledger in SQLite, so a restart
        resumes them.  With ``--tls`` every connection is mutual TLS and each
        request is authorized by the peer's certificate role
        (:mod:`pairwise.protocols.ecdf.auth`); ``--peer-name J=NAME`` is the
        certificate name server J must present for the server-to-server noise.
        ``--cluster local[:N] | tcp://HOST:PORT | tls://HOST:PORT`` evaluates
        this server's keys on a Dask cluster of its own
        (:mod:`pairwise.protocols.ecdf.cluster`): ``local`` starts one with N
        worker processes (one per core by default), stopped with the server;
        the listening line and ``status`` name it.
    ``pairwise ecdf run --servers HOST:PORT,HOST:PORT[,...] --data FILE.csv --columns NAME --epsilon E
    --lower LO --upper HI [--label COL] [--roc] [--quantiles Q,...] [--domain-bits N] [--grid-bits G]
    [--mechanism paper|hierarchical] [--scheme auto|dcf|mshare|pointwise] [--dataset ID] [--json]``
        Be the clients (one per CSV row, id = row number) and the querier:
        each client clamps its value into the public domain [LO, HI] and
        quantizes it to 2^N equal bins; upload the keys, release the noisy
        ECDF of the column over the grid and print exact vs DP vs smoothed.
        ``--roc`` (with ``--label``) also releases the ROC curve with another
        epsilon.  ``--range LO,HI`` is a deprecated alias of ``--lower/--upper``,
        ``--column`` of ``--columns``.
        Every parameter (epsilon, quantile levels, grid, scheme, ...) is
        checked before anything is uploaded or any budget is charged.
        A dataset id that the servers already hold is refused (datasets are
        sealed): use ``ecdf query`` for it, a new ``--dataset``, or
        ``--append --id-column COL`` to add new clients.
    ``pairwise ecdf upload --servers ... --data FILE.csv --columns NAME --lower LO --upper HI [--label COL]
    [--dataset ID] [--domain-bits N] [--scheme auto|dcf|mshare] [--append --id-column COL] [--json]``
        Be the clients only, as ``run`` uploads them, with no release: the
        command of a data owner holding a ``client`` certificate.  JSON keys:
        ``dataset``, ``n``, ``accepted``, ``rejected_count``, ``append``,
        ``range``, ``domain_bits``, ``series``, ``clamped`` (not private),
        ``upload_bytes``.
    ``pairwise ecdf query --servers ... --dataset ID --epsilon E [--roc] [--quantiles Q,...] [--grid-bits G]
    [--mechanism paper|hierarchical] [--json]``
        Be the querier only: release over a dataset already on the servers
        (thresholds in the public domain stored with the dataset).
    ``pairwise ecdf repair --servers ... --dataset ID [--dry-run] [--json]``
        After an upload interrupted between the servers' commits (releases
        refused with ``DatasetMismatch``): drop the uploads that not every
        server committed (:meth:`ECDFQuerier.repair`; a ``querier``
        certificate).  Refused, dropping nothing, when a server lacks the
        dataset or the servers share no upload.  Charges are kept.
    ``pairwise ecdf status --servers ... [--dataset ID] [--timeout S] [--connect-timeout S] [--json]``
        Each server's clients and budget for a dataset (or all; the servers'
        ledgers are reconciled first, so ``spent`` agrees).  JSON: a list, one
        object per server with ``server_id`` and ``datasets`` (a list of
        infos), the same shape with and without ``--dataset`` (which also
        keeps its older ``info`` key).
    ``run``, ``upload``, ``query`` and ``status`` take ``--tls DIR --name NAME`` (a
    ``client`` certificate may upload: ``ecdf upload``; releases and status, hence
    ``run``, need ``querier``).
    ``run``, ``upload``, ``query`` and ``demo`` take ``--progress``/``--no-progress``
    (default: when stderr is a terminal): on stderr, a bar of the clients
    whose keys have been sent to every server, then one of the release's stages
    (per request: every server prepared, the release started, then one per
    server whose result arrived; the servers' evaluation and noise run
    before the first result).  stdout is unchanged, ``--json`` included.
    ``pairwise ecdf demo [--epsilon E] [--plot out.png] [--servers-count M] [--cluster local[:N]] [--json]``
        (also ``pairwise demo ecdf``) Starts M (default 2) server processes on
        loopback, uploads the shipped breast_cancer data (mean_radius,
        quantized to 2^10 bins of its declared public domain [5, 30]; label
        malignant), releases the ECDF with epsilon and the ROC curve of
        mean_radius as a score for malignancy with another epsilon, prints
        exact vs DP vs smoothed, optionally plots them (matplotlib).  The demo
        makes a throwaway CA and runs every connection in mutual TLS.
        ``--cluster local[:N]`` gives every server a LocalCluster of its own.

JSON keys of ``run``, ``query`` and ``demo`` (public interface; ``query`` has no
not-private keys, it never sees the data):

* DP outputs: ``dp`` (the raw noisy ECDF at the thresholds, unbiased, may
  leave [0, 1] and decrease), ``smoothed`` (Eq. (3) smoothing: the same
  release made non-decreasing and in [0, 1], i.e. clamped to the natural
  range), ``quantiles`` (Algorithm 1 on ``smoothed``), ``roc`` (``fpr``,
  ``tpr``, ``epsilon``, ``delta``) and ``auc`` (in [0, 1] by construction).
  The ROC curve and its AUC come from the two *smoothed* releases, as in
  the paper (Sec. 5.1); there is no raw AUC: the raw releases are not
  monotone, and the trapezoid area over 2^G noisy steps is no estimate at
  all (on the demo's 212 positives at eps = 1 it came out at -0.67 for an
  exact 0.94).
* Public parameters and costs: ``thresholds`` (real threshold values, the
  grid's upper bin edges, from the public domain), ``epsilon`` (of the ECDF
  release), ``epsilon_total``, ``delta``, ``n`` (clients, public),
  ``servers``, ``mechanism``, ``noise``, ``scheme``, ``grid_bits``,
  ``domain_bits``, ``range`` (the public domain [lower, upper]),
  ``theorem31_rmse``, ``bytes`` (all bytes on the wire: uploads, querier
  and server-to-server) and ``bytes_detail``, ``dataset``, ``upload``.
  The querier's byte count includes the servers' JSON timing reports, so
  ``bytes`` varies by a few bytes from run to run (never with the data).
* Not private (computed without noise, for evaluation only): ``exact``,
  ``max_abs_error``, ``max_abs_error_smoothed``, ``quantiles_exact``,
  ``roc.fpr_exact``, ``roc.tpr_exact``, ``auc_exact``, ``clamped`` (values
  clamped into the public domain by their owners).

Security model: see :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

import json
import os
import sys

from pairwise.protocols.transport import add_transport_args, tls_from_args

from .bounds import NOT_PRIVATE, add_bound_args, clamped_note, deprecated, resolve_domains
from .options import (
    add_cluster_argument,
    add_columns,
    add_data,
    add_epsilon,
    add_json,
    add_progress,
    add_timeouts,
    positive_int,
    progress_bar,
    seconds,
)

#: JSON keys (dotted for nested ones) that hold DP outputs or their post-processing.
DP_KEYS = ("dp", "smoothed", "quantiles", "roc.fpr", "roc.tpr", "auc")
#: JSON keys computed without noise: not private, for evaluation only. Every other key is a function of
#: public inputs and is identical on neighbouring datasets (tests/test_privacy_audit.py), except:
NOT_PRIVATE_KEYS = ("exact", "max_abs_error", "max_abs_error_smoothed", "quantiles_exact", "roc.fpr_exact",
                    "roc.tpr_exact", "auc_exact", "clamped")
#: byte counts that include the servers' JSON timing reports, so they vary by a few bytes from run to run.
MEASURED_KEYS = ("bytes", "bytes_detail.querier")

#: The demo's data: a shipped dataset, its column (public domain declared in protocols/data/domains.json), its label.
DEMO_DATA = ("breast_cancer", "mean_radius", "malignant")
DEMO_BITS = 10

#: Progress bars (stderr; ``--progress``): clients whose keys every server has been sent, then the stages of
#: the release requests (m + 2 per request: prepared, started, one per server's result; see ecdf/querier.py).
UPLOAD_BAR = "upload to the servers"


def _release_bar(roc: bool) -> str:
    return "release: ECDF and ROC" if roc else "release: ECDF"


def register(root, groups) -> None:
    from pairwise.protocols.cluster import INSTALL_HINT

    p = root.add_parser("ecdf", help="multi-server DP ECDF service (FSS keys, tree mechanism, 2PC noise)")
    sub = p.add_subparsers(dest="ecdf_command", metavar="WHAT")
    p.set_defaults(func=lambda args, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("serve", help="run one ECDF server")
    s.add_argument("--server-id", type=int, required=True, help="this server's index I (0..m-1)")
    s.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: pick a free port)")
    s.add_argument("--budget", default="10", help="privacy budget (total epsilon) per dataset (default 10)")
    s.add_argument("--dataset-budget", action="append", default=[], metavar="NAME=E",
                   help="budget of one dataset (repeatable)")
    s.add_argument("--timeout", type=seconds, default=120.0, metavar="S",
                   help="seconds any single wait on a client, querier or the other servers may take, and an idle "
                        "connection may stay (default 120)")
    s.add_argument("--state", metavar="DIR",
                   help="keep datasets, keys and the privacy ledger in DIR/ecdf-server-I.db (SQLite) so a restart "
                        "resumes them; without it the state is in memory and lost on exit")
    s.add_argument("--request-timeout", type=seconds, metavar="S",
                   help="seconds one request (an upload, a release) may take in total (default max(1800, 10 x --timeout))")
    s.add_argument("--max-connections", type=positive_int, default=64, metavar="N",
                   help="connections served at once; more are answered 'busy' (default 64)")
    s.add_argument("--peer", action="append", default=[], metavar="J=HOST:PORT",
                   help="address of server J for the server-to-server noise (server 0 connects to server 1); "
                        "default: the address the querier names")
    s.add_argument("--peer-name", action="append", default=[], metavar="J=NAME",
                   help="with --tls: the certificate name server J must present for the server-to-server noise "
                        "(required for a two-server release under TLS)")
    s.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started this server exits (used by demos and tests)")
    add_cluster_argument(s, "this server's key evaluation (one Dask task per shard of the keys; the cluster must "
                            "be this server's alone: 'local' starts one for it)")
    add_transport_args(s)
    s.set_defaults(func=cmd_serve)

    r = sub.add_parser("run", help="upload a CSV column as clients and release its DP ECDF")
    _query_args(r)
    r.add_argument("--roc", action="store_true", help="also release the ROC curve (needs --label, another epsilon)")
    _upload_args(r, pointwise=True)
    r.set_defaults(func=cmd_run)

    u = sub.add_parser("upload", help="upload a CSV column as clients, without a release (a client certificate "
                                      "suffices)")
    u.add_argument("--servers", required=True, help="HOST:PORT,HOST:PORT[,...] in server-id order")
    _upload_args(u)
    add_timeouts(u, timeout=600.0, connect_timeout=5.0, timeout_what="a server")
    add_json(u)
    add_progress(u)
    add_transport_args(u)
    u.set_defaults(func=cmd_upload)

    qp = sub.add_parser("query", help="release the DP ECDF of a dataset already on the servers (no upload)")
    _query_args(qp)
    qp.add_argument("--dataset", required=True, help="dataset id on the servers")
    qp.add_argument("--roc", action="store_true", help="also release the ROC curve (dataset with labels; another epsilon)")
    qp.set_defaults(func=cmd_query)

    rp = sub.add_parser("repair", help="drop the uploads of a dataset that not every server committed "
                                       "(an upload interrupted between the servers' commits)")
    rp.add_argument("--servers", required=True, metavar="HOST:PORT,...",
                    help="HOST:PORT,HOST:PORT[,...] of the servers, in server-id order")
    rp.add_argument("--dataset", required=True, metavar="ID", help="the dataset that DatasetMismatch named")
    rp.add_argument("--dry-run", action="store_true", help="only list what would be dropped")
    add_timeouts(rp, timeout=120.0, connect_timeout=5.0, timeout_what="a server")
    add_json(rp, "print one JSON list, one object per server: server_id, dropped (upload ids), clients")
    add_transport_args(rp)
    rp.set_defaults(func=cmd_repair)

    st = sub.add_parser("status", help="each server's clients and budget")
    st.add_argument("--servers", required=True, metavar="HOST:PORT,...",
                    help="HOST:PORT,HOST:PORT[,...] of the servers, in server-id order")
    st.add_argument("--dataset", metavar="ID", help="only this dataset (default: every dataset on the servers)")
    add_timeouts(st, timeout=30.0, connect_timeout=5.0, timeout_what="a server")
    add_json(st, "print one JSON list, one object per server")
    add_transport_args(st)
    st.set_defaults(func=cmd_status)

    for parent in (sub, groups["demo"]):
        d = parent.add_parser("demo" if parent is sub else "ecdf",
                              help="ECDF and ROC of breast_cancer mean_radius with servers on loopback")
        add_epsilon(d, default=1.0, what="epsilon of the ECDF release (the ROC spends the same again)")
        d.add_argument("--plot", help="write a PNG of true vs DP vs smoothed ECDF and the ROC (matplotlib)")
        d.add_argument("--servers-count", type=positive_int, default=2, metavar="M",
                       help="number of server processes, 2..16 (default 2)")
        d.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper",
                       help="paper: Theorem 3.1 (default); hierarchical: noisy nodes + consistency")
        d.add_argument("--cluster", metavar="local[:N]",
                       help="give every server process a Dask LocalCluster of its own (N worker processes; "
                            "'local': one per core) for its key evaluation; a scheduler address is refused, as the "
                            f"servers would share it; needs {INSTALL_HINT}")
        add_timeouts(d, timeout=600.0, connect_timeout=60.0, timeout_what="a server")
        add_json(d)
        add_progress(d)
        d.set_defaults(func=cmd_demo)


def _upload_args(p, pointwise: bool = False) -> None:
    """The data and dataset flags of ``ecdf run`` and ``ecdf upload``."""
    add_data(p, what="CSV file with a header row (required)")
    add_columns(p, what="numeric column (required)", old=("--column",))
    p.add_argument("--label", help="0/1 label column (ROC series)")
    p.add_argument("--dataset", help="dataset id on the servers (default FILE:COLUMN)")
    add_bound_args(p, "the column", shipped_default=False)
    p.add_argument("--range", help="deprecated alias of --lower LO --upper HI")
    p.add_argument("--domain-bits", type=int, default=10, help="quantization bits n (default 10)")
    schemes = ["auto", "dcf", "mshare"] + (["pointwise"] if pointwise else [])
    p.add_argument("--scheme", choices=schemes, default="auto",
                   help="auto: dcf keys for 2 servers, mshare for more"
                        + ("; pointwise: the Sec. 4.1 baseline" if pointwise else ""))
    p.add_argument("--append", action="store_true",
                   help="add these rows as new clients of an existing dataset (otherwise an existing id is refused)")
    p.add_argument("--id-column", help="with --append: the column of client ids (non-negative integers)")


def _query_args(p) -> None:
    p.add_argument("--servers", required=True, help="HOST:PORT,HOST:PORT[,...] in server-id order")
    add_epsilon(p, what="epsilon of the ECDF release (--roc spends the same again)")
    p.add_argument("--grid-bits", type=int, help="threshold grid 2^G (default: the domain)")
    p.add_argument("--mechanism", choices=["paper", "hierarchical"], default="paper",
                   help="paper: Theorem 3.1 (default); hierarchical: noisy nodes + consistency")
    p.add_argument("--quantiles", help="comma-separated quantile levels, e.g. 0.25,0.5,0.75 (Algorithm 1)")
    p.add_argument("--tolerate", type=int, default=0,
                   help="m > 2: keep epsilon-DP against the querier colluding with this many servers")
    add_timeouts(p, timeout=600.0, connect_timeout=5.0, timeout_what="a server")
    add_json(p)
    add_progress(p)
    add_transport_args(p)


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
    srv = ECDFServer(args.server_id, host, port, budget=args.budget,
                     dataset_budgets=_budgets(args.dataset_budget), timeout=args.timeout,
                     request_timeout=args.request_timeout, max_connections=args.max_connections,
                     state_dir=args.state, peers=_peers(args.peer), tls=tls, insecure=args.insecure,
                     policy=Policy(server_names=names, tls=tls is not None), cluster=args.cluster)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda num, _frame: srv.stop(signal.Signals(num).name))
    print(json.dumps({"event": "listening", "server_id": args.server_id, "host": host, "port": srv.port,
                      "state": args.state, "tls": tls is not None,
                      "cluster": None if srv.cluster is None else srv.cluster.spec}), flush=True)
    srv.serve_forever(watch_parent=args.exit_with_parent)
    return 0


def _querier(args, servers):
    from pairwise.protocols.ecdf.client import ECDFQuerier

    return ECDFQuerier(servers, timeout=args.timeout, connect_timeout=getattr(args, "connect_timeout", 5.0),
                       tls=tls_from_args(args), insecure=args.insecure)


def _quantile_levels(text):
    from pairwise.dp.bounds import validate_quantile_levels

    if not text:
        return []
    try:
        qs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--quantiles must be comma-separated numbers, got {text!r}") from None
    return validate_quantile_levels(qs)


def _validate_release_args(args, m: int, n_bits: int, roc: bool) -> list[float]:
    """Check every release parameter before any upload, budget charge or noise; returns the quantile levels."""
    from pairwise.protocols.ecdf.shares import MAX_GRID_BITS
    from pairwise.protocols.ecdf.wire import parse_epsilon

    parse_epsilon(args.epsilon, "--epsilon")
    if roc:
        parse_epsilon(args.epsilon / 2, "--epsilon / 2 (each class of the ROC)")
    qs = _quantile_levels(getattr(args, "quantiles", None))
    if not isinstance(n_bits, int) or not 1 <= n_bits <= 32:
        raise ValueError(f"--domain-bits must be an integer in [1, 32], got {n_bits!r}")
    g = args.grid_bits
    if g is not None and not 1 <= g <= min(n_bits, MAX_GRID_BITS):
        raise ValueError(f"--grid-bits must be in [1, {min(n_bits, MAX_GRID_BITS)}] (at most the domain bits), got {g}")
    if g is None and n_bits > MAX_GRID_BITS:
        raise ValueError(f"a {n_bits}-bit domain needs --grid-bits G <= {MAX_GRID_BITS} (thresholds per release)")
    if not isinstance(args.tolerate, int) or not 0 <= args.tolerate < m or (m == 2 and args.tolerate):
        raise ValueError(f"--tolerate must be in [0, m) (0 for two servers), got {args.tolerate}")
    return qs


def _release_and_report(querier, dataset, values, lo, hi, n_bits, args, labels=None, upload_bytes=0,
                        pointwise=False, qs=(), roc=None, scheme=None, progress=None):
    """Release the ECDF (and the ROC if ``roc``, default: labels given); returns the JSON dict.

    ``qs``: quantile levels, validated by the caller before anything was
    uploaded.  ``values`` (and ``labels``): the uploaded data, for the not
    private reference columns (``ecdf run``/``demo``); None for ``ecdf
    query``, which knows only what the servers release.  ``lo``/``hi``: the
    public domain of the quantization (None: thresholds are domain points).
    ``progress(done, total)``: the stages of the release requests (one, or
    two with the ROC), as one run.
    """
    import numpy as np

    from pairwise.dp.ecdf import auc, inverse_ecdf
    from pairwise.protocols.ecdf.client import roc_points
    from pairwise.protocols.ecdf.querier import progress_part
    from pairwise.protocols.ecdf.shares import bin_upper_edges, grid_points

    roc = labels is not None if roc is None else roc
    g = args.grid_bits or n_bits
    if roc:
        _check_budget(querier, dataset, 2 * args.epsilon)
    parts = 2 if roc else 1
    rel = querier.ecdf(dataset, args.epsilon, grid_bits=g, mechanism=args.mechanism, tolerate=args.tolerate,
                       progress=progress_part(progress, 0, parts))
    step = 1 << (n_bits - g)
    if lo is None:
        edges = grid_points(n_bits, g).astype(float)[rel.thresholds]
    else:
        edges = bin_upper_edges(lo, hi, n_bits, g)[rel.thresholds]
    out = {"thresholds": edges.tolist(), "dp": rel.ecdf.tolist(),
           "smoothed": rel.smoothed.tolist(), "epsilon": rel.epsilon, "delta": rel.delta, "n": rel.n,
           "servers": rel.servers, "mechanism": rel.mechanism, "noise": rel.noise,
           "scheme": scheme or ("pointwise" if pointwise else ("dcf" if rel.servers == 2 else "mshare")),
           "grid_bits": g, "domain_bits": n_bits, "range": None if lo is None else [lo, hi],
           "theorem31_rmse": None if rel.mse_per_threshold is None else float(np.sqrt(rel.mse_per_threshold) / rel.n)}
    if values is not None:
        x = np.asarray(values, dtype=np.int64)
        exact = np.array([(x <= (t + 1) * step - 1).sum() for t in rel.thresholds], dtype=float) / x.size
        out.update(exact=exact.tolist(), max_abs_error=float(np.abs(rel.ecdf - exact).max()),
                   max_abs_error_smoothed=float(np.abs(rel.smoothed - exact).max()))
    detail = {"upload": upload_bytes, "querier": rel.bytes.get("querier", 0), "servers": rel.bytes.get("servers", 0)}
    if qs:
        qi = np.atleast_1d(rel.quantiles(qs))
        pos = np.searchsorted(rel.thresholds, qi)
        out["quantiles"] = {str(q): float(edges[p]) for q, p in zip(qs, pos)}
        if values is not None:
            ex = np.atleast_1d(np.asarray(inverse_ecdf(np.asarray(out["exact"]), qs)))
            out["quantiles_exact"] = {str(q): float(edges[i]) for q, i in zip(qs, ex)}
    if roc:
        r = querier.roc(dataset, args.epsilon, grid_bits=g, mechanism=args.mechanism, tolerate=args.tolerate,
                        progress=progress_part(progress, 1, parts))
        out["roc"] = {"fpr": r.fpr.tolist(), "tpr": r.tpr.tolist(), "epsilon": r.epsilon, "delta": r.delta}
        out["auc"] = r.auc
        if values is not None and labels is not None:
            y = np.asarray(labels).astype(int)
            cp = np.array([((x <= (t + 1) * step - 1) & (y == 1)).sum() for t in range(1 << g)], dtype=float)
            cn = np.array([((x <= (t + 1) * step - 1) & (y == 0)).sum() for t in range(1 << g)], dtype=float)
            f_ex, t_ex = roc_points(cp, cn)
            out["roc"].update(fpr_exact=f_ex.tolist(), tpr_exact=t_ex.tolist())
            out["auc_exact"] = auc(f_ex, t_ex)
        detail["querier"] += r.positives.bytes.get("querier", 0)  # one release for both classes
        detail["servers"] += r.positives.bytes.get("servers", 0)
        out["epsilon_total"] = rel.epsilon + r.epsilon
    out["bytes_detail"] = detail
    out["bytes"] = int(sum(detail.values()))
    return out


def _check_budget(querier, dataset: str, need: float) -> None:
    """Refuse early if a server cannot afford ``need`` (ECDF + ROC), instead of failing after the first release."""
    from fractions import Fraction

    from pairwise.protocols.ecdf.wire import BudgetExceeded

    for st in querier.status(dataset):
        i = st["info"]
        left = Fraction(i["budget"]) - Fraction(i["spent"]) - Fraction(i["reserved"])
        if left < Fraction(str(need)):
            raise BudgetExceeded(f"server {st['server_id']}: dataset {dataset!r} has {float(left):g} of its privacy "
                                 f"budget left; the ECDF and the ROC need {need:g}")


def _print_report(out: dict, title: str) -> None:
    import numpy as np

    print(title)
    print(f"  servers {out['servers']} ({out['scheme']} keys, {out['noise']} noise), n = {out['n']}, "
          f"grid 2^{out['grid_bits']} thresholds, {out['mechanism']} tree, "
          f"({out['epsilon']:g}, {out['delta']:.2g})-DP")
    has_exact = "exact" in out  # ecdf query never sees the data
    th, dp_, sm = (np.asarray(out[k]) for k in ("thresholds", "dp", "smoothed"))
    ex = np.asarray(out["exact"]) if has_exact else None
    rows = np.unique(np.linspace(0, th.size - 1, min(th.size, 11)).round().astype(int))
    print(f"  {'threshold':>12}" + (f" {'exact*':>8}" if has_exact else "") + f" {'DP':>8} {'smoothed':>9}"
          + ("   (* not private)" if has_exact else ""))
    for i in rows:
        print(f"  {th[i]:12.4g}" + (f" {ex[i]:8.4f}" if has_exact else "") + f" {dp_[i]:8.4f} {sm[i]:9.4f}")
    rmse = f"Theorem 3.1 RMSE {out['theorem31_rmse']:.4f}" if out.get("theorem31_rmse") else ""
    if has_exact:
        print(f"  max |DP - exact| = {out['max_abs_error']:.4f}, smoothed {out['max_abs_error_smoothed']:.4f} "
              f"{NOT_PRIVATE}" + (f"; {rmse}" if rmse else ""))
    elif rmse:
        print(f"  {rmse}")
    print("  DP: raw noisy ECDF (unbiased, may leave [0, 1]); smoothed: Eq. (3), non-decreasing in [0, 1]")
    if "quantiles" in out:
        for q, v in out["quantiles"].items():
            print(f"  quantile {q}: DP {v:.4g}" + (f", exact {out['quantiles_exact'][q]:.4g} {NOT_PRIVATE}"
                                                   if "quantiles_exact" in out else ""))
    if "auc" in out:
        print(f"  ROC: AUC DP {out['auc']:.4f}"
              + (f", exact {out['auc_exact']:.4f} {NOT_PRIVATE}" if "auc_exact" in out else "")
              + f" (epsilon {out['roc']['epsilon']:g}; total spent {out['epsilon_total']:g})")
    if "clamped" in out:
        from pairwise.dp.bounds import PublicDomain

        print(f"  clamped: {clamped_note(out['clamped'], [PublicDomain(*out['range'])])}")
    d = out["bytes_detail"]
    print(f"  bytes: {out['bytes']} (uploads {d['upload']}, querier {d['querier']}, between servers {d['servers']})")


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
        raise ValueError(f"--roc needs a dataset uploaded with labels; {args.dataset!r} has series "
                         f"{sorted(info['series'])}")
    n_bits = int(info["domain_bits"])
    if info["scheme"] == "pointwise" and args.grid_bits is None:
        args.grid_bits = info.get("grid_bits")
    qs = _validate_release_args(args, len(servers), n_bits, args.roc)
    with progress_bar(args, _release_bar(args.roc), unit="stage") as progress:
        out = _release_and_report(q, args.dataset, None, lo, hi, n_bits, args, qs=qs, roc=args.roc,
                                  scheme=info["scheme"], progress=progress)
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
            print(f"  Dask cluster {cl['spec']} (scheduler {cl['scheduler']}): "
                  + (f"{cl['workers']} worker(s), {cl['threads']} thread(s)" if "error" not in cl else cl["error"]))
        for i in r["datasets"]:
            print(f"  {i['dataset']}: {i['clients']} clients, {i['scheme']} m={i['m']}, series {sorted(i['series'])}, "
                  f"spent {float(Fraction(i['spent'])):g} of {float(Fraction(i['budget'])):g}")
    return 0


def _plot(out: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib (pip install 'pairwise-mpc[plot]')") from None
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    ax.step(out["thresholds"], out["exact"], where="post", label="exact (not private)", color="black")
    ax.plot(out["thresholds"], out["dp"], label=f"DP release (epsilon = {out['epsilon']:g})", alpha=0.6)
    ax.plot(out["thresholds"], out["smoothed"], label="DP release, smoothed (Eq. 3, p = 2)")
    ax.set_xlabel("mean radius of the cell nuclei (dataset units)")
    ax.set_ylabel("ECDF: fraction of patients with\nmean radius <= x")
    ax.legend()
    ax.set_title(f"ECDF, n = {out['n']} patients, {out['servers']} servers, {len(out['thresholds'])} thresholds",
                 fontsize=10)
    if "roc" in out:
        ax = axes[1]
        ax.plot(out["roc"]["fpr_exact"], out["roc"]["tpr_exact"], color="black",
                label=f"exact, not private (AUC {out['auc_exact']:.3f})")
        ax.plot(out["roc"]["fpr"], out["roc"]["tpr"], label=f"DP, smoothed (AUC {out['auc']:.3f})")
        ax.plot([0, 1], [0, 1], ":", color="grey", label="chance (AUC 0.5)")
        ax.set_xlabel("false positive rate (benign flagged, fraction)")
        ax.set_ylabel("true positive rate (malignant flagged, fraction)")
        ax.set_title(f"ROC of mean radius as a score for malignancy (epsilon = {out['roc']['epsilon']:g})",
                     fontsize=10)
        ax.legend()
    fig.suptitle("Differentially private ECDF and ROC from the multi-server service (breast_cancer data)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _interrupt_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt in this (main) thread, so ``with`` blocks clean up children."""
    import signal

    def handler(num, _frame):
        signal.signal(num, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise KeyboardInterrupt(f"{signal.Signals(num).name}")

    signal.signal(signal.SIGTERM, handler)


def _demo_cluster(spec):
    """``demo --cluster``: a local spec (each server starts a LocalCluster of its own), else refused."""
    if spec is None:
        return None
    from pairwise.protocols.cluster import parse_cluster

    if not parse_cluster(spec).local:
        raise ValueError(f"ecdf demo --cluster takes local or local:N (a cluster per server), not {spec!r}: one "
                         "scheduler for every server would let a worker hold all servers' key shares; start the "
                         "servers with ecdf serve --cluster, each with its own scheduler, and use ecdf run")
    return spec


def cmd_demo(args) -> int:
    import numpy as np

    from pairwise.dp.bounds import clamp
    from pairwise.protocols.datasets import column_domain, load_dataset
    from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, upload
    from pairwise.protocols.ecdf.shares import quantize
    from pairwise.protocols.ecdf.wire import parse_epsilon

    name, column, label = DEMO_DATA
    dom = column_domain(name, column)
    args.grid_bits, args.tolerate, args.quantiles = None, 0, "0.25,0.5,0.75"
    qs = _validate_release_args(args, args.servers_count, DEMO_BITS, roc=True)
    if not 2 <= args.servers_count <= 16:
        raise ValueError(f"--servers-count must be in [2, 16], got {args.servers_count}")
    d = load_dataset(name)
    lo, hi = dom.lower, dom.upper
    col, clamped = clamp(d[column], lo, hi)  # each client clamps its own value
    x = quantize(col, lo, hi, DEMO_BITS)
    y = np.asarray(d[label]).astype(int)
    budget = max(10.0, 4 * float(parse_epsilon(args.epsilon)))
    dataset = f"{name}:{column}"
    cluster = _demo_cluster(args.cluster)
    _interrupt_on_sigterm()  # SIGTERM unwinds like Ctrl-C: the server processes are stopped on the way out
    with ServerProcesses(args.servers_count, budget=budget, tls=True, startup_timeout=args.connect_timeout,
                         cluster=cluster) as sp:  # a throwaway CA, mutual TLS
        with progress_bar(args, UPLOAD_BAR, unit="client") as progress:
            rep = upload(sp.addresses, dataset, x, labels=y, domain_bits=DEMO_BITS, tls=sp.client_tls,
                         timeout=args.timeout, connect_timeout=args.connect_timeout, progress=progress)
        q = ECDFQuerier(sp.addresses, timeout=args.timeout, connect_timeout=args.connect_timeout, tls=sp.querier_tls)
        with progress_bar(args, _release_bar(True), unit="stage") as progress:
            out = _release_and_report(q, dataset, x, lo, hi, DEMO_BITS, args, labels=y, upload_bytes=rep.bytes,
                                      qs=qs, progress=progress)
    out["dataset"] = dataset
    out["clamped"] = clamped
    if args.plot:
        _plot(out, args.plot)
        out["plot"] = args.plot
    if args.json:
        print(json.dumps(out))
        return 0
    _print_report(out, f"DP ECDF demo: {name} {column} ({x.size} patients) on {DEMO_BITS}-bit bins of "
                       f"its public domain [{lo:g}, {hi:g}], label {label}")
    if args.plot:
        print(f"  plot written to {args.plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from ..cli import main

    sys.exit(main(["ecdf", *sys.argv[1:]]))
