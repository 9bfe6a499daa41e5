"""``pairwise collect``: the seed protocols among real users (aggregator, tasks, users, results).

Commands
    ``serve`` (run the aggregator, :mod:`pairwise.protocols.collect.aggregator`,
    until SIGTERM or SIGINT), ``task create|list|show|close`` (a task with
    every public parameter of its protocol, validated here and again by the
    aggregator), ``join`` (one user with only its own value(s),
    :mod:`pairwise.protocols.collect.user`: refuses, exit status 3 and
    nothing sent, a task above ``--max-epsilon`` or above what the user's
    ledger has left), ``result`` (the stored release of a finished task, with
    the JSON keys of ``pairwise ustat --json`` / ``pairwise ldp ... --json``),
    ``shuffler`` (:mod:`pairwise.protocols.collect.shuffler`, for
    shuffle-model tasks), ``simulate-users`` (a load generator,
    :mod:`pairwise.protocols.collect.simulate`) and ``ledger`` (what this
    user's own ledger has recorded).  Every command's options, the protocol
    flags of ``task create`` and the keys of ``result``: ``docs/cli.md``,
    "pairwise collect".

Certificates (``pairwise certs create``): the aggregator a ``server``
certificate, the analyst ``collector``, every user ``user``.  The task
commands and ``result`` need a ``collector`` certificate, ``join`` a ``user``
one.  Without ``--tls`` everything runs in plaintext on loopback only.

Security model: see :mod:`pairwise.protocols.collect` and ``docs/collect.md``.
"""

from __future__ import annotations

import json
import sys

from pairwise.protocols.transport import add_transport_args, tls_from_args

from .options import add_json, epsilon, positive_int, seconds

#: exit status of ``join`` when the user refuses the task (cap or ledger): nothing was sent
REFUSED = 3

_PROTOCOL_FLAGS = (
    # flag, dest, kwargs
    ("--statistic", "statistic", {"choices": ["gini", "kendall", "auc"], "help": "ustat-2pc: the U-statistic"}),
    ("--kernel", "kernel", {"choices": ["gini", "kendall", "auc"], "help": "ldp-ustat: the kernel (default gini)"}),
    (
        "--lower",
        "lower",
        {
            "metavar": "L[,L2]",
            "help": "public lower bound, one value per private column (values below are clamped by their owner)",
        },
    ),
    ("--upper", "upper", {"metavar": "U[,U2]", "help": "public upper bound, one value per private column"}),
    (
        "--decimals",
        "decimals",
        {"metavar": "D[,D2]", "help": "fixed-point grid lower + k 10^-D (ustat-2pc, ldp-ustat)"},
    ),
    (
        "--pairs-per-user",
        "pairs_per_user",
        {"type": positive_int, "metavar": "P", "help": "ustat-2pc: pairs each user takes part in (default 1)"},
    ),
    (
        "--noise",
        "noise",
        {
            "choices": ["auto", "krr", "discrete_laplace", "signed_geometric"],
            "help": "ustat-2pc: the in-circuit noise (default auto)",
        },
    ),
    ("--pair-delta", "pair_delta", {"type": float, "help": "ustat-2pc: delta of one pair's release (default 2^-40)"}),
    (
        "--bits",
        "bits",
        {"type": int, "help": "ustat-2pc: circuit width; ldp-auc: alpha, 2^alpha score bins (default 4)"},
    ),
    ("--k", "k", {"type": int, "help": "ldp-ustat: bins per coordinate (default 8)"}),
    (
        "--discrete",
        "discrete",
        {"action": "store_true", "default": None, "help": "ldp-ustat: the cells are the public grid itself"},
    ),
    ("--quantized-kernel", "quantized_kernel", {"choices": ["midpoint", "average"], "help": "ldp-ustat: Eq. 14 or 15"}),
    (
        "--splitting",
        "splitting",
        {"choices": ["users", "budget"], "help": "ldp-auc: split users or budget across levels"},
    ),
    (
        "--composition",
        "composition",
        {"choices": ["basic", "advanced"], "help": "ldp-auc: budget splitting composition"},
    ),
    ("--delta", "delta", {"type": float, "help": "ldp-auc (advanced composition), shuffle-histogram: delta"}),
    ("--a", "a", {"type": float, "help": "ldp-auc: threshold parameter a > 1 (default: Corollary 4/5)"}),
    ("--discarded", "discarded", {"choices": ["half", "zero"], "help": "ldp-auc: discarded nodes, Eq. 10 or Cor. 5"}),
    ("--ties", "ties", {"choices": ["half", "zero"], "help": "ldp-auc: ties count one half (default) or zero"}),
    ("--tau", "tau", {"type": float, "help": "ldp-qmle: quantile level (default 0.5)"}),
    ("--sigma", "sigma", {"type": float, "help": "ldp-qmle: ALD scale (default (upper-lower)/10)"}),
    (
        "--private-x",
        "private_x",
        {
            "action": "store_true",
            "default": None,
            "help": "ldp-qmle: the covariate is private too (one bit each, eps/2)",
        },
    ),
    ("--beta", "beta", {"type": float, "help": "shuffle-histogram: failure probability of the error bound"}),
    (
        "--alpha",
        "alpha",
        {
            "type": float,
            "metavar": "A",
            "help": "the (1 - A) interval published with the estimate where today's command "
            "publishes one (default 0.05)",
        },
    ),
    (
        "--pair-channel",
        "pair_channel",
        {
            "choices": ["tls", "plain"],
            "help": "ustat-2pc: what the relay carries: tls (TLS 1.3 between the two "
            "users, the aggregator sees ciphertext; the default) or plain "
            "(users without certificates, plaintext loopback only; the "
            "default of an aggregator without TLS)",
        },
    ),
    (
        "--shuffler",
        "shuffler",
        {"metavar": "HOST:PORT", "help": "shuffle-histogram: where users submit (the shuffler)"},
    ),
    (
        "--shuffler-name",
        "shuffler_name",
        {
            "metavar": "NAME",
            "help": "shuffle-histogram: the shuffler's certificate name (users pin it; only it may deliver batches)",
        },
    ),
)


def _server_args(p) -> None:
    p.add_argument("--server", required=True, metavar="HOST:PORT", help="the aggregator's address")
    p.add_argument("--server-name", metavar="NAME", help="pin the aggregator's certificate name (with --tls)")
    add_transport_args(p)
    p.add_argument(
        "--timeout",
        type=seconds,
        default=120.0,
        metavar="S",
        help="seconds any wait for the aggregator may take (default 120)",
    )
    add_json(p)


def register(root, groups) -> None:
    p = root.add_parser(
        "collect",
        help="run a study among real users: aggregator, tasks, users joining, results",
        description="The seed protocols among separate parties: an aggregator service, tasks an "
        "analyst creates, users who each join with only their own value.",
    )
    sub = p.add_subparsers(dest="collect_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("serve", help="run the aggregator until SIGTERM")
    s.add_argument("--listen", required=True, metavar="HOST:PORT", help="address to listen on (port 0: any free port)")
    s.add_argument(
        "--state",
        metavar="DIR",
        help="keep tasks, registrations, reports and pairs in DIR "
        "(SQLite; created with mode 0700); without it, in memory",
    )
    add_transport_args(s)
    s.add_argument(
        "--timeout",
        type=seconds,
        default=120.0,
        metavar="S",
        help="seconds of silence a request connection may keep (default 120)",
    )
    s.add_argument(
        "--max-connections",
        type=positive_int,
        default=16384,
        metavar="N",
        help="connections served at once (default 16384)",
    )
    s.add_argument(
        "--max-handshakes",
        type=positive_int,
        default=64,
        metavar="N",
        help="TLS handshakes in flight at once; more connections are told busy before TLS and back off (default 64)",
    )
    s.add_argument(
        "--poll-rate",
        type=_rate,
        default=100.0,
        metavar="R",
        help="polls per second that a 2PC task's waiting users are spread over (default 100)",
    )
    s.add_argument(
        "--max-sessions",
        type=positive_int,
        default=256,
        metavar="N",
        help="2PC sessions of one task handed out at once; later ones wait (default 256)",
    )
    s.add_argument("--exit-with-parent", action="store_true", help="exit when the starting process exits")
    s.set_defaults(func=cmd_serve)

    t = sub.add_parser("task", help="create, list, show or close tasks (collector role)")
    tsub = t.add_subparsers(dest="task_command", metavar="WHAT")
    t.set_defaults(func=lambda a, _p=t: (_p.print_help(), 2)[1])
    c = tsub.add_parser("create", help="create a task with every public parameter of its protocol")
    _server_args(c)
    c.add_argument(
        "--protocol",
        required=True,
        choices=["ustat-2pc", "ldp-ustat", "ldp-auc", "ldp-qmle", "shuffle-histogram"],
        help="the protocol the users run: 2PC between pairs of users, a local-model randomizer, or the shuffle model",
    )
    c.add_argument("--id", metavar="ID", help="the task's id (default: random)")
    c.add_argument("--title", help="a human description shown to users")
    c.add_argument("--epsilon", type=epsilon, required=True, metavar="E", help="each user's budget for this task")
    c.add_argument(
        "--min-users",
        type=positive_int,
        default=None,
        metavar="N",
        help="registration closes once N users joined (default 2; shuffle-histogram: its n)",
    )
    c.add_argument(
        "--deadline",
        metavar="S|ISO",
        help="registration stays open at least this many seconds (or until this ISO 8601 time); default 0",
    )
    c.add_argument(
        "--task-timeout",
        dest="task_timeout",
        type=seconds,
        metavar="S",
        help="seconds a stalled user may hold up its part before it is dropped (default 120)",
    )
    for flag, dest, kw in _PROTOCOL_FLAGS:
        c.add_argument(flag, dest=dest, **kw)
    c.set_defaults(func=cmd_task_create)
    for name, what in (
        ("list", "every task with its state and counts"),
        ("show", "one task"),
        ("close", "close a task's registration now"),
    ):
        q = tsub.add_parser(name, help=what)
        _server_args(q)
        if name != "list":
            q.add_argument("--task", required=True, metavar="ID", help="the task's id")
        q.set_defaults(func=cmd_task, task_command=name)

    j = sub.add_parser("join", help="join a task as one user, with only this user's value")
    _server_args(j)
    j.add_argument("--task", required=True, metavar="ID", help="the task to join")
    j.add_argument("--value", type=float, required=True, metavar="X", help="this user's value")
    j.add_argument("--value2", type=float, metavar="Y", help="a second value (kendall's y, the QMLE's covariate)")
    j.add_argument("--label", type=int, choices=[0, 1], help="this user's public 0/1 label (auc)")
    j.add_argument(
        "--max-epsilon",
        type=epsilon,
        default=1.0,
        metavar="E",
        help="refuse a task whose epsilon is above E (default 1)",
    )
    j.add_argument(
        "--budget",
        type=epsilon,
        default=10.0,
        metavar="E",
        help="refuse a task above what this user's ledger has left of E over all tasks (default 10)",
    )
    j.add_argument(
        "--state",
        metavar="DIR",
        help="this user's ledger (default $XDG_STATE_HOME/pairwise or ~/.local/state/pairwise)",
    )
    j.add_argument(
        "--wait",
        type=seconds,
        default=3600.0,
        metavar="S",
        help="2PC: seconds to wait for pairing after the registration deadline (default 3600)",
    )
    j.set_defaults(func=cmd_join)

    r = sub.add_parser("result", help="the stored release of a finished task")
    _server_args(r)
    r.add_argument("--task", required=True, metavar="ID", help="the finished task")
    r.add_argument("--wait", type=seconds, metavar="S", help="wait up to S seconds for the task to finish")
    r.set_defaults(func=cmd_result)

    sh = sub.add_parser("shuffler", help="run a shuffler for shuffle-model tasks until SIGTERM")
    sh.add_argument("--listen", required=True, metavar="HOST:PORT", help="address users submit to (port 0: any)")
    sh.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the aggregator's address")
    sh.add_argument("--upstream-name", metavar="NAME", help="pin the aggregator's certificate name (with --tls)")
    sh.add_argument(
        "--state",
        metavar="DIR",
        help="keep submissions and undelivered batches in DIR (SQLite, 0700); without it, in memory",
    )
    add_transport_args(sh)
    sh.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        help="forward a batch as soon as N users (at least the task's n) are pending; default: one "
        "batch per task, when the aggregator closes it",
    )
    sh.add_argument(
        "--poll",
        type=seconds,
        default=1.0,
        metavar="S",
        help="seconds between looks at the aggregator's tasks (default 1)",
    )
    sh.add_argument("--timeout", type=seconds, default=60.0, metavar="S", help="bound of every wait (default 60)")
    sh.add_argument("--exit-with-parent", action="store_true", help="exit when the starting process exits")
    sh.set_defaults(func=cmd_shuffler)

    sim = sub.add_parser("simulate-users", help="load generator: K processes playing N users of one task")
    _server_args(sim)
    sim.add_argument("--task", required=True, metavar="ID", help="the task the simulated users join")
    sim.add_argument("--data", required=True, metavar="FILE.csv", help="one row per user (header row)")
    sim.add_argument("--columns", required=True, metavar="A[,B]", help="the users' private column(s)")
    sim.add_argument("--label-column", metavar="COL", help="the users' public 0/1 labels (auc)")
    sim.add_argument("--users", type=positive_int, required=True, metavar="N", help="users 0..N-1 = rows 0..N-1")
    sim.add_argument("--processes", type=positive_int, default=2, metavar="K", help="worker processes (default 2)")
    sim.add_argument("--prefix", default="sim", help="certificate names PREFIX000000... (default sim)")
    sim.add_argument("--max-epsilon", type=epsilon, default=1.0, metavar="E", help="each user's cap (default 1)")
    sim.add_argument(
        "--wait", type=seconds, default=600.0, metavar="S", help="2PC: how long users wait for pairing (default 600)"
    )
    sim.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="R",
        help="users arriving per second, over all processes (default 0: all at once)",
    )
    sim.set_defaults(func=cmd_simulate_users)

    lg = sub.add_parser("ledger", help="what this user's own ledger recorded")
    lg.add_argument("--state", metavar="DIR", help="the ledger's directory (default as for join)")
    add_json(lg)
    lg.set_defaults(func=cmd_ledger)


def _addr(args):
    from pairwise.protocols.service.frames import parse_address

    return parse_address(args.server)


def _collector(args):
    from pairwise.protocols.collect import Collector

    return Collector(
        _addr(args), tls=tls_from_args(args), insecure=args.insecure, server_name=args.server_name, timeout=args.timeout
    )


def _numbers(text: str | None):
    if text is None:
        return None
    try:
        vals = [float(t) for t in str(text).split(",")]
    except ValueError:
        raise ValueError(f"expected comma-separated numbers, got {text!r}") from None
    return vals if len(vals) > 1 else vals[0]


# ------------------------------------------------------------------------------ serve


def _rate(text: str) -> float:
    """argparse type: a finite positive rate (per second)."""
    import argparse
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate per second, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite rate per second, got {text}")
    return v


def cmd_serve(args) -> int:
    import signal

    from pairwise.protocols.collect.admission import Admission
    from pairwise.protocols.collect.aggregator import Aggregator
    from pairwise.protocols.service.frames import parse_address

    host, port = parse_address(args.listen)
    tls = tls_from_args(args)
    admission = Admission(
        max_handshakes=args.max_handshakes,
        per_address=args.max_handshakes,
        poll_rate=args.poll_rate,
        max_sessions=args.max_sessions,
    )
    agg = Aggregator(
        host,
        port,
        state_dir=args.state,
        tls=tls,
        insecure=args.insecure,
        timeout=args.timeout,
        max_connections=args.max_connections,
        admission=admission,
    )

    def listening(a) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda s=sig: a.stop(signal.Signals(s).name))
        print(
            json.dumps(
                {
                    "event": "listening",
                    "host": host,
                    "port": a.port,
                    "state": args.state,
                    "tls": tls is not None,
                    "name": a.name,
                }
            ),
            flush=True,
        )

    agg.run(watch_parent=args.exit_with_parent, on_listening=listening)
    return 0


def cmd_shuffler(args) -> int:
    import os
    import threading

    from pairwise.protocols.collect.shuffler import ShufflerOptions, run_shuffler
    from pairwise.protocols.processes import exit_on_sigterm

    tls = tls_from_args(args)
    stop = threading.Event()
    exit_on_sigterm()
    parent = os.getppid()

    def listening(srv) -> None:
        print(
            json.dumps(
                {
                    "event": "listening",
                    "host": srv.host,
                    "port": srv.port,
                    "state": args.state,
                    "tls": tls is not None,
                    "upstream": args.upstream,
                }
            ),
            flush=True,
        )
        if args.exit_with_parent:

            def watch() -> None:
                while not stop.wait(0.5):
                    if os.getppid() != parent:
                        stop.set()

            threading.Thread(target=watch, daemon=True).start()

    def log(msg: str) -> None:
        print(f"collect-shuffler: {msg}", file=sys.stderr, flush=True)

    try:
        opts = ShufflerOptions(
            state_dir=args.state,
            tls=tls,
            insecure=args.insecure,
            upstream_name=args.upstream_name,
            batch_size=args.batch_size,
            poll=args.poll,
            timeout=args.timeout,
        )
        run_shuffler(args.listen, args.upstream, options=opts, on_listening=listening, log=log, stop_event=stop)
    except KeyboardInterrupt:  # SIGTERM / Ctrl-C: the outbox is durable, the next start delivers it
        stop.set()
    return 0


def cmd_simulate_users(args) -> int:
    from pairwise.protocols.collect.simulate import SimulationOptions, simulate_users

    opts = SimulationOptions(
        users=args.users,
        processes=args.processes,
        tls=args.tls,
        label=args.label_column,
        prefix=args.prefix,
        server_name=args.server_name,
        max_epsilon=args.max_epsilon,
        timeout=args.timeout,
        wait=args.wait,
        insecure=args.insecure,
        rate=args.rate,
    )
    out = simulate_users(
        args.server,
        args.task,
        args.data,
        [c for c in args.columns.split(",") if c],
        options=opts,
        log=lambda m: print(f"simulate-users: {m}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['users']} simulated users in {out['workers']} processes, {out['seconds']:.1f} s")
        print(f"  outcomes  {out['statuses']}")
        if out["sessions"]:
            print(f"  sessions  {out['sessions']}")
        for role, c in out["per_session"].items():
            if c:
                print(
                    f"  {role:<9} per session: cpu {c['cpu'] * 1e3:.1f} ms (tls {c['tls_cpu'] * 1e3:.1f}, base OT "
                    f"{c['setup_cpu'] * 1e3:.1f}, execution {c['run_cpu'] * 1e3:.1f}), waits {c['wait'] * 1e3:.0f} ms, "
                    f"{c['wire_sent'] + c['wire_received']:.0f} bytes"
                )
        for e in out["errors"]:
            print(f"  error     {e}")
    return 0 if out["finished"] == out["users"] and "error" not in out["statuses"] else 1


# ------------------------------------------------------------------------------ tasks


def _task_params(args) -> dict:
    params = {"epsilon": args.epsilon}
    if args.min_users is not None:
        params["min_users"] = args.min_users
    if args.deadline is not None:
        params["deadline"] = args.deadline
    if args.task_timeout is not None:
        params["timeout"] = args.task_timeout
    if args.title is not None:
        params["title"] = args.title
    for _flag, dest, _kw in _PROTOCOL_FLAGS:
        v = getattr(args, dest)
        if v is None:
            continue
        if dest in ("lower", "upper", "decimals"):
            v = _numbers(v)
            if dest == "decimals":
                v = [int(x) for x in v] if isinstance(v, list) else int(v)
        params[dest] = v
    return params


def _show_task(t: dict) -> None:
    from pairwise.protocols.collect.tasks import protocol_of

    counts = ", ".join(
        f"{k.replace('_', ' ')} {t[k]}"
        for k in ("users_registered", "users_connected", "reports", "pairs_planned", "pairs_completed", "pairs_dropped")
        if k in t
    )
    spec = t["spec"]
    print(f"task {t['id']}  {t['protocol']}  {t['state']}" + (f" ({t['reason']})" if t.get("reason") else ""))
    if t.get("title"):
        print(f"  title      {t['title']}")
    print(f"  privacy    epsilon {spec['epsilon']:g}, delta {spec['delta']:.3g} per user")
    print(f"  protocol   {protocol_of(t['protocol']).describe(spec)}")
    print(
        f"  closes     once {spec['min_users']} users joined and the deadline passed (or on task close); "
        f"stalled users are dropped after {spec['timeout']:g} s"
    )
    print(f"  counts     {counts}")


def cmd_task_create(args) -> int:
    with _collector(args) as c:
        t = c.create(args.protocol, _task_params(args), args.id)
    if args.json:
        print(json.dumps(t))
    else:
        _show_task(t)
    return 0


def cmd_task(args) -> int:
    with _collector(args) as c:
        if args.task_command == "list":
            tasks = c.list()
            if args.json:
                print(json.dumps(tasks))
            elif not tasks:
                print("no tasks")
            for t in [] if args.json else tasks:
                _show_task(t)
            return 0
        t = c.show(args.task) if args.task_command == "show" else c.close_task(args.task)
    if args.json:
        print(json.dumps(t))
    else:
        _show_task(t)
    return 0


# ------------------------------------------------------------------------------ join


def cmd_join(args) -> int:
    from pairwise.protocols.collect import CapExceeded, join
    from pairwise.protocols.collect.tasks import protocol_of

    tls = tls_from_args(args)
    if tls is None:
        raise ValueError(
            "join needs this user's certificate: --tls DIR --name NAME (pairwise certs create --role user)"
        )
    label = args.label

    def show(info: dict) -> None:
        spec = info["spec"]
        out = sys.stderr if args.json else sys.stdout
        print(f"task {info['id']} on {info['aggregator']}: {info['protocol']} ({info['state']})", file=out)
        if spec.get("title"):
            print(f"  title      {spec['title']}", file=out)
        print(
            f"  privacy    epsilon {spec['epsilon']:g}, delta {spec['delta']:.3g} for this user "
            f"(your cap: {args.max_epsilon:g})",
            file=out,
        )
        print(f"  protocol   {protocol_of(info['protocol']).describe(spec)}", file=out)
        out.flush()

    try:
        res = join(
            _addr(args),
            args.task,
            args.value,
            args.value2,
            label,
            tls=tls,
            server_name=args.server_name,
            max_epsilon=args.max_epsilon,
            budget=args.budget,
            state_dir=args.state,
            timeout=None,
            connect_timeout=min(args.timeout, 30.0),
            wait=args.wait,
            show=show,
            log=lambda m: print(f"pairwise: {m}", file=sys.stderr, flush=True),
        )
    except CapExceeded as exc:
        print(f"pairwise: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc), "type": "CapExceeded", "refused": True}))
        return REFUSED
    if args.json:
        print(json.dumps(res.as_dict()))
        return 0
    if res.model == "local":
        print(f"  outcome    {res.status}: one randomized report, charged epsilon {res.epsilon:g} to your ledger")
    else:
        done = sum(s["state"] in ("completed", "finished") for s in res.sessions)
        print(
            f"  outcome    {done} of {len(res.sessions)} session(s) ran (task {res.task_state}); "
            f"charged epsilon {res.epsilon:g} to your ledger"
        )
        for s in res.sessions:
            print(
                f"    session {s['session']}: {s['role']} with {s['partner']}: {s['state']}"
                + (f" ({s.get('error') or s.get('reason')})" if s.get("error") or s.get("reason") else "")
            )
    return 0


# ------------------------------------------------------------------------------ result and ledger


def cmd_result(args) -> int:
    with _collector(args) as c:
        r = c.result(args.task, wait=args.wait or 0.0)
    if args.json:
        print(json.dumps(r))
        return 0
    est = r["estimate"]
    print(f"task {r['task']} ({r['protocol']}): {r.get('statistic') or r.get('kernel') or ''}")
    if isinstance(est, list):
        print(f"  estimate   {', '.join(f'{x:.5g}' for x in est)}")
    else:
        clamped = r.get("estimate_clamped")
        print(f"  estimate   {est:.6g} (raw, unbiased)" + ("" if clamped is None else f"; clamped {clamped:.6g}"))
    print(f"  privacy    epsilon {r['epsilon']:g}, delta {r['delta']:.3g} per user")
    print(f"  users      {r['users_registered']} registered, n = {r['n']}")
    if r.get("pairs_planned") is not None:
        print(
            f"  pairs      {r['pairs_planned']} planned, {r['pairs_completed']} completed, {r['pairs_dropped']} dropped"
        )
    return 0


def cmd_ledger(args) -> int:
    from pairwise.protocols.collect.ledger import open_ledger

    led = open_ledger(args.state)
    try:
        entries, spent = led.entries(), float(led.spent())
    finally:
        led.close()
    if args.json:
        print(json.dumps({"spent": spent, "entries": entries}))
        return 0
    print(f"spent epsilon {spent:g} over {len(entries)} task(s)")
    for e in entries:
        print(
            f"  {e['aggregator']} / {e['task']}: {e['protocol']}, epsilon {e['epsilon']:g}, delta {e['delta']:.3g}"
            + ("" if e["reported"] or e["protocol"] == "ustat-2pc" else " (no report sent)")
        )
    return 0
