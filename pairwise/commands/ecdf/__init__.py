"""``pairwise ecdf``: the multi-server differentially private ECDF service.

Commands
    ``serve`` (run server I until SIGTERM or SIGINT, printing one
    ``{"event": "listening", ...}`` line; ``--state DIR`` keeps datasets, keys
    and the privacy ledger in SQLite; ``--cluster`` evaluates its keys on a
    Dask cluster of its own), ``run`` (be the clients of a CSV and the
    querier), ``upload`` (be the clients only: a data owner's command),
    ``query`` (be the querier only, over a dataset the servers hold),
    ``repair`` (drop uploads that not every server committed), ``status``
    (each server's clients and budget) and ``demo`` (also ``pairwise demo
    ecdf``: M servers on loopback in mutual TLS, the shipped breast_cancer
    data, the ECDF and the ROC curve).  Every parameter is checked before
    anything is uploaded or any budget is charged.  ``--tls DIR --name NAME``
    gives a certificate: ``client`` may upload, releases and status need
    ``querier``.  ``--progress`` bars go to stderr; stdout is unchanged.

JSON keys of ``run``, ``query`` and ``demo`` (public interface)
    DP outputs (``dp``, ``smoothed``, ``quantiles``, ``roc``, ``auc``,
    ``auc_smoothed``, ``interval``, ``band``, ``quantile_intervals``,
    ``auc_interval``), public parameters and costs (``thresholds``,
    ``epsilon``, ``delta``, ``n``, ``mechanism``, ``bytes``, ...) and what
    is not private: ``clamped`` (``run``, ``demo``) and, only with
    ``--compare`` (``run``, ``demo``), the evaluation aids computed from the
    uploaded data (:data:`COMPARE_ONLY_KEYS`: ``exact``, ``max_abs_error``,
    ``quantiles_exact``, ``auc_exact``, ...), as ``ustat`` and ``ldp`` do.

Every command's options, its output and the meaning of every JSON key:
``docs/cli.md``, "pairwise ecdf".

Modules, one per group of commands: :mod:`.serve`, :mod:`.upload` (``upload``
and ``run``), :mod:`.query` (``query``, ``repair``, ``status``), :mod:`.demo`,
and :mod:`.release`, the querier's release and report that ``run``, ``query``
and ``demo`` share.  This package holds the flags (:func:`register`) and the
JSON key lists.

Security model: see :mod:`pairwise.protocols.ecdf.server` ([BMR25, Sec. 4]).
"""

from __future__ import annotations

from pairwise.protocols.ecdf.ops import MECHANISMS
from pairwise.protocols.transport import add_transport_args

from ..bounds import add_bound_args
from ..intervals import add_alpha
from ..options import (
    add_cluster_argument,
    add_columns,
    add_compare,
    add_data,
    add_epsilon,
    add_json,
    add_progress,
    add_timeouts,
    positive_int,
    seconds,
)
from .demo import DEMO_BITS, DEMO_DATA, cmd_demo
from .query import cmd_query, cmd_repair, cmd_status, status_rows
from .release import UPLOAD_BAR
from .serve import cmd_serve
from .upload import cmd_run, cmd_upload

__all__ = [
    "DP_KEYS",
    "NOT_PRIVATE_KEYS",
    "COMPARE_ONLY_KEYS",
    "MEASURED_KEYS",
    "DEMO_DATA",
    "DEMO_BITS",
    "UPLOAD_BAR",
    "register",
    "cmd_serve",
    "cmd_upload",
    "cmd_run",
    "cmd_query",
    "cmd_repair",
    "cmd_status",
    "status_rows",
    "cmd_demo",
]

#: JSON keys (dotted for nested ones) that hold DP outputs or their post-processing.
DP_KEYS = (
    "dp",
    "smoothed",
    "quantiles",
    "roc.fpr",
    "roc.tpr",
    "auc",
    "auc_smoothed",
    "auc_interval",
    "interval",
    "band",
    "quantile_intervals",
)
#: JSON keys computed without noise: not private, for evaluation only. Every other key is a function of
#: public inputs and is identical on neighbouring datasets (tests/protocols/test_privacy_audit.py), except:
NOT_PRIVATE_KEYS = (
    "exact",
    "max_abs_error",
    "max_abs_error_smoothed",
    "quantiles_exact",
    "roc.fpr_exact",
    "roc.tpr_exact",
    "auc_exact",
    "clamped",
)
#: Not-private keys published only with ``--compare`` (evaluation aids computed from the uploaded data).
COMPARE_ONLY_KEYS = tuple(k for k in NOT_PRIVATE_KEYS if k != "clamped")
#: ``--compare``'s help: what the aids are, and what the default output holds.
COMPARE_WHAT = dict(
    what="the exact ECDF, quantiles, ROC and AUC, and the DP release's largest errors",
    release="DP releases only (the ECDF, and the ROC if asked)",
)
#: byte counts that include the servers' JSON timing reports, so they vary by a few bytes from run to run.
MEASURED_KEYS = ("bytes", "bytes_detail.querier")


def register(root, groups) -> None:
    from pairwise.protocols.cluster import INSTALL_HINT

    p = root.add_parser("ecdf", help="multi-server DP ECDF service (FSS keys, tree mechanism, 2PC noise)")
    sub = p.add_subparsers(dest="ecdf_command", metavar="WHAT")
    p.set_defaults(func=lambda args, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("serve", help="run one ECDF server")
    s.add_argument("--server-id", type=int, required=True, help="this server's index I (0..m-1)")
    s.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: pick a free port)")
    s.add_argument("--budget", default="10", help="privacy budget (total epsilon) per dataset (default 10)")
    s.add_argument(
        "--dataset-budget", action="append", default=[], metavar="NAME=E", help="budget of one dataset (repeatable)"
    )
    s.add_argument(
        "--budget-per-owner",
        default=None,
        metavar="E|none",
        help="budget of each data owner (client certificate) across all the datasets holding its "
        "uploads (default: the --budget value, so the same people uploaded under a new dataset id "
        "draw from the same budget; 'none' opts out and leaves only the per-dataset budgets)",
    )
    s.add_argument(
        "--budget-total",
        default=None,
        metavar="E",
        help="budget of the whole server, across every dataset and owner (default: no such limit)",
    )
    s.add_argument(
        "--timeout",
        type=seconds,
        default=120.0,
        metavar="S",
        help="seconds any single wait on a client, querier or the other servers may take, and an idle "
        "connection may stay (default 120)",
    )
    s.add_argument(
        "--state",
        metavar="DIR",
        help="keep datasets, keys and the privacy ledger in DIR/ecdf-server-I.db (SQLite) so a restart "
        "resumes them; without it the state is in memory and lost on exit",
    )
    s.add_argument(
        "--request-timeout",
        type=seconds,
        metavar="S",
        help="seconds one request (an upload, a release) may take in total (default max(1800, 10 x --timeout))",
    )
    s.add_argument(
        "--max-connections",
        type=positive_int,
        default=64,
        metavar="N",
        help="connections served at once; more are answered 'busy' (default 64)",
    )
    s.add_argument(
        "--max-staged-bytes",
        default="16G",
        metavar="SIZE",
        help="disk that the uploads staged but not yet committed may take together, e.g. 512M, 16G "
        "(default 16G); an upload that would exceed it is told 'busy'",
    )
    s.add_argument(
        "--max-staged-bytes-per-connection",
        default="8G",
        metavar="SIZE",
        help="disk one connection's staged upload may take (default 8G); a larger upload is refused "
        "(upload it in several appends)",
    )
    s.add_argument(
        "--max-check-memory",
        default="4G",
        metavar="SIZE",
        help="memory that the checks of uploads in progress may take together (each vdpf upload reserves "
        "what its check needs from its header: about 14M for an ECDF on 2^10 points, 1.7G for "
        "Hosmer-Lemeshow on 2^20); a larger upload is refused, one that does not fit now is told 'busy' "
        "(default 4G)",
    )
    s.add_argument(
        "--num-servers",
        type=int,
        default=None,
        metavar="M",
        help="servers in this server's set (m); uploads for another m are refused, so two servers never "
        "stage mshare keys (default 2, or one more than the highest server id of --server-id, --peer "
        "and --peer-name)",
    )
    s.add_argument(
        "--accept-unverified",
        action="store_true",
        help="also accept uploads that the servers cannot check (pointwise shares; mshare keys, the only "
        "kind for three or more servers): a client of such an upload can move every released count by "
        "any amount. Without it only vdpf keys are accepted, which both servers check per client",
    )
    s.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="J=HOST:PORT",
        help="address of server J for the server-to-server noise (server 0 connects to server 1); "
        "default: the address the querier names",
    )
    s.add_argument(
        "--peer-name",
        action="append",
        default=[],
        metavar="J=NAME",
        help="with --tls: the certificate name server J must present for the server-to-server noise "
        "(required for a two-server release under TLS)",
    )
    s.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the process that started this server exits (used by demos and tests)",
    )
    add_cluster_argument(
        s,
        "this server's key evaluation (one Dask task per shard of the keys; the cluster must "
        "be this server's alone: 'local' starts one for it)",
    )
    add_transport_args(s)
    s.set_defaults(func=cmd_serve)

    r = sub.add_parser("run", help="upload a CSV column as clients and release its DP ECDF")
    _query_args(r)
    r.add_argument("--roc", action="store_true", help="also release the ROC curve (needs --label, another epsilon)")
    add_compare(r, **COMPARE_WHAT)
    _upload_args(r, pointwise=True)
    r.set_defaults(func=cmd_run)

    u = sub.add_parser(
        "upload", help="upload a CSV column as clients, without a release (a client certificate suffices)"
    )
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
    qp.add_argument(
        "--roc", action="store_true", help="also release the ROC curve (dataset with labels; another epsilon)"
    )
    qp.set_defaults(func=cmd_query)

    rp = sub.add_parser(
        "repair",
        help="drop the uploads of a dataset that not every server committed "
        "(an upload interrupted between the servers' commits)",
    )
    rp.add_argument(
        "--servers",
        required=True,
        metavar="HOST:PORT,...",
        help="HOST:PORT,HOST:PORT[,...] of the servers, in server-id order",
    )
    rp.add_argument("--dataset", required=True, metavar="ID", help="the dataset that DatasetMismatch named")
    rp.add_argument("--dry-run", action="store_true", help="only list what would be dropped")
    add_timeouts(rp, timeout=120.0, connect_timeout=5.0, timeout_what="a server")
    add_json(rp, "print one JSON list, one object per server: server_id, dropped (upload ids), clients")
    add_transport_args(rp)
    rp.set_defaults(func=cmd_repair)

    st = sub.add_parser("status", help="each server's clients and budget")
    st.add_argument(
        "--servers",
        required=True,
        metavar="HOST:PORT,...",
        help="HOST:PORT,HOST:PORT[,...] of the servers, in server-id order",
    )
    st.add_argument("--dataset", metavar="ID", help="only this dataset (default: every dataset on the servers)")
    add_timeouts(st, timeout=30.0, connect_timeout=5.0, timeout_what="a server")
    add_json(st, "print one JSON list, one object per server")
    add_transport_args(st)
    st.set_defaults(func=cmd_status)

    for parent in (sub, groups["demo"]):
        d = parent.add_parser(
            "demo" if parent is sub else "ecdf",
            help="ECDF and ROC of breast_cancer mean_radius with servers on loopback",
        )
        add_epsilon(d, default=1.0, what="epsilon of the ECDF release (the ROC spends the same again)")
        d.add_argument(
            "--plot",
            help="write a PNG of the DP and smoothed ECDF and the ROC (matplotlib); with --compare the exact "
            "curves too",
        )
        d.add_argument(
            "--servers-count",
            type=positive_int,
            default=2,
            metavar="M",
            help="number of server processes, 2..16 (default 2)",
        )
        _mechanism_arg(d)
        add_alpha(d)
        add_compare(d, **COMPARE_WHAT)
        _roc_grid_arg(d, default=5)
        d.add_argument(
            "--cluster",
            metavar="local[:N]",
            help="give every server process a Dask LocalCluster of its own (N worker processes; "
            "'local': one per core) for its key evaluation; a scheduler address is refused, as the "
            f"servers would share it; needs {INSTALL_HINT}",
        )
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
    schemes = ["auto", "vdpf", "mshare", "dcf"] + (["pointwise"] if pointwise else [])
    p.add_argument(
        "--scheme",
        choices=schemes,
        default="auto",
        help="auto: vdpf keys (checked by both servers) for 2 servers, mshare for more; dcf: deprecated "
        "alias of vdpf" + ("; pointwise: the Sec. 4.1 baseline" if pointwise else ""),
    )
    p.add_argument(
        "--append",
        action="store_true",
        help="add these rows as new clients of an existing dataset (otherwise an existing id is refused)",
    )
    p.add_argument(
        "--id-column",
        metavar="COL",
        help="the column of client ids: integers below 2^63 or strings such as p01000 (default: the "
        "row number); on a new dataset too, so that other data owners can --append with ids of "
        "their own",
    )


def _mechanism_arg(p) -> None:
    p.add_argument(
        "--mechanism",
        choices=list(MECHANISMS),
        default="paper",
        help="paper: Theorem 3.1 (default); hierarchical: binary tree of noisy nodes + consistency; "
        "kary: a k-ary tree (32 x 32 at 2^10 thresholds), about 8x lower MSE than paper at 2^10 "
        "thresholds",
    )


def _roc_grid_arg(p, default: int | None = None) -> None:
    tail = f"default {default}" if default else "default: the ECDF's grid"
    p.add_argument(
        "--roc-grid-bits",
        type=int,
        default=default,
        metavar="G",
        help=f"grid 2^G of the ROC release, at most the ECDF's ({tail}); the AUC's noise grows with the "
        "grid, and its interval is printed only on coarse grids (2^5 for two servers)",
    )


def _query_args(p) -> None:
    p.add_argument("--servers", required=True, help="HOST:PORT,HOST:PORT[,...] in server-id order")
    add_epsilon(p, what="epsilon of the ECDF release (--roc spends the same again)")
    p.add_argument("--grid-bits", type=int, help="threshold grid 2^G (default: the domain)")
    _mechanism_arg(p)
    add_alpha(p)
    _roc_grid_arg(p)
    p.add_argument("--quantiles", help="comma-separated quantile levels, e.g. 0.25,0.5,0.75 (Algorithm 1)")
    p.add_argument(
        "--tolerate",
        type=int,
        default=0,
        help="m > 2: keep epsilon-DP against the querier colluding with this many servers",
    )
    add_timeouts(p, timeout=600.0, connect_timeout=5.0, timeout_what="a server")
    add_json(p)
    add_progress(p)
    add_transport_args(p)
