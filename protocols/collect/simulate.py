"""A load generator: K processes that each play many real users of one collect task (tests and benchmarks).

What it does
    ``pairwise collect simulate-users --server HOST:PORT --task ID --data FILE.csv --columns A[,B]
    [--label-column L] --users N --processes K --tls DIR`` starts K worker
    processes (:func:`pairwise.protocols.processes.spawn`: they die with
    the generator) and gives each a slice of the users.  A worker runs each
    of its users in its own thread as :func:`pairwise.protocols.collect.join`
    does for one person: its own certificate, its own ledger directory, and
    only its own row of the CSV (row i is user i's record; the worker reads
    the file and hands each user thread its row and nothing else).  All
    users of all workers are live at once, so a 2PC task pairs them as it
    would pair people.  Each worker prints one JSON summary: outcomes,
    per-session costs (:class:`pairwise.protocols.collect.pair.PairCosts`),
    its CPU seconds and peak RSS; the generator adds them up.

Credentials: one certificate per user, not a credential the aggregator issues
    In a 2PC task the two users of a pair authenticate each other inside
    the relay (:func:`pairwise.protocols.collect.pair.tls_pair_channel`).
    A credential the aggregator issued would let the aggregator mint one for
    any name and stand in for a partner, reading the 2PC it relays; so
    users hold certificates of the study's CA (``pairwise certs``), which
    the aggregator does not hold.  Making them is cheap enough for 10^4
    users: :func:`pairwise.mpc.tls.create_certificates` loads the CA once
    (about 1.3 ms per certificate here); missing ones are made on the first
    run when ``DIR/ca.key`` is present, named ``PREFIX000000``...

Security model
    A simulation tool: the worker process holds the rows of its users (a
    deployment has one device per user); each simulated user still sends
    only what :func:`join` sends for its own row, over its own TLS
    connections.  Nothing here is used by a deployment.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import no_more_keywords, with_legacy

__all__ = ["SimulationError", "SimulationOptions", "simulate_users", "user_names", "ensure_certificates", "run_worker"]


class SimulationError(PairwiseError, ValueError):
    """Bad parameters of a simulation (the message says which)."""


def user_names(prefix: str, n: int) -> list[str]:
    """The certificate names of simulated users 0..n-1."""
    return [f"{prefix}{i:06d}" for i in range(n)]


def ensure_certificates(tls_dir: str, names: list[str]) -> int:
    """Make the ``user`` certificates that are missing (needs ``DIR/ca.key``); returns how many were made."""
    from pairwise.mpc.tls import CA_KEY, create_certificates

    missing = [n for n in names if not os.path.exists(os.path.join(tls_dir, f"{n}.pem"))]
    if not missing:
        return 0
    if not os.path.exists(os.path.join(tls_dir, CA_KEY)):
        raise SimulationError(
            f"{len(missing)} simulated users have no certificate in {tls_dir} and there is no "
            f"{CA_KEY} to make them (e.g. {missing[0]}.pem)"
        )
    create_certificates(tls_dir, missing, "user", days=30)
    return len(missing)


def _rows(data: str, columns: list[str], label: str | None, users: list[int]) -> dict[int, tuple]:
    from pairwise.protocols.datasets import load_csv

    cols = load_csv(data, columns, label)
    n = len(cols[columns[0]])
    if users and max(users) >= n:
        raise SimulationError(f"{data} has {n} rows, fewer than the {max(users) + 1} users asked for")
    out = {}
    for i in users:
        v = float(cols[columns[0]][i])
        v2 = float(cols[columns[1]][i]) if len(columns) > 1 else None
        lab = int(cols[label][i]) if label is not None else None
        out[i] = (v, v2, lab)
    return out


@dataclass
class WorkerArgs:
    server: str
    task: str
    data: str
    columns: list[str]
    label: str | None
    users: list[int]
    tls: str | None
    prefix: str
    server_name: str | None
    max_epsilon: float
    timeout: float
    wait: float
    state_root: str
    insecure: bool = False
    rate: float = 0.0  # users started per second by this worker (0: all at once)


def run_worker(a: WorkerArgs) -> dict:
    """Play ``a.users`` as live users of one task at once (one thread each); returns the worker's summary."""
    from pairwise.mpc.tls import TLSConfig

    from .user import join

    rows = _rows(a.data, a.columns, a.label, a.users)
    names = user_names(a.prefix, max(a.users) + 1) if a.users else []
    outcomes: dict[int, dict] = {}
    lock = threading.Lock()
    threading.stack_size(512 * 1024)  # thousands of user threads: small stacks

    def one(i: int) -> None:
        t0 = time.perf_counter()
        try:
            v, v2, lab = rows[i]  # this user's own row, and nothing else
            tls = TLSConfig(a.tls, names[i]) if a.tls else None
            out = join(
                a.server,
                a.task,
                v,
                v2,
                lab,
                tls=tls,
                insecure=a.insecure,
                server_name=a.server_name,
                user=None if tls else names[i],
                max_epsilon=a.max_epsilon,
                budget=500.0,
                state_dir=os.path.join(a.state_root, names[i]),
                timeout=a.timeout,
                wait=a.wait,
            )
            res = {"status": out.status, "sessions": out.sessions}
        except Exception as exc:  # noqa: BLE001 - one user's failure is reported, the others go on
            res = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300], "sessions": []}
        res["seconds"] = time.perf_counter() - t0
        with lock:
            outcomes[i] = res

    threads = [threading.Thread(target=one, args=(i,), name=f"sim-user-{i}", daemon=True) for i in a.users]
    t0 = time.monotonic()
    for k, t in enumerate(threads):
        if a.rate:  # users arrive at a steady rate, as people do, instead of all in one instant
            delay = t0 + k / a.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        t.start()
    for t in threads:
        t.join(a.wait + a.timeout + 600)
    return summarize(outcomes, len(a.users))


def summarize(outcomes: dict[int, dict], planned: int) -> dict:
    statuses: dict[str, int] = {}
    sessions: dict[str, int] = {}
    costs = {role: {} for role in ("garbler", "evaluator")}
    errors: list[str] = []
    for res in outcomes.values():
        statuses[res["status"]] = statuses.get(res["status"], 0) + 1
        if res.get("error") and len(errors) < 5:
            errors.append(res["error"])
        for s in res["sessions"]:
            sessions[s.get("state", "?")] = sessions.get(s.get("state", "?"), 0) + 1
            c = s.get("costs")
            if c and s.get("state") in ("done", "completed", "finished"):
                acc = costs[s["role"]]
                acc["n"] = acc.get("n", 0) + 1
                for k, v in c.items():
                    if isinstance(v, (int, float)):
                        acc[k] = acc.get(k, 0) + v
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "users": planned,
        "finished": len(outcomes),
        "statuses": statuses,
        "sessions": sessions,
        "costs": costs,
        "errors": errors,
        "cpu_seconds": r.ru_utime + r.ru_stime,
        "peak_rss_mib": r.ru_maxrss / 1024.0,
    }


def merge(summaries: list[dict]) -> dict:
    """The generator's view: the workers' summaries added up (costs as sums; see :func:`per_session`)."""
    out = {
        "users": 0,
        "finished": 0,
        "statuses": {},
        "sessions": {},
        "errors": [],
        "cpu_seconds": 0.0,
        "peak_rss_mib": 0.0,
        "costs": {"garbler": {}, "evaluator": {}},
        "workers": len(summaries),
    }
    for s in summaries:
        out["users"] += s["users"]
        out["finished"] += s["finished"]
        out["cpu_seconds"] += s["cpu_seconds"]
        out["peak_rss_mib"] = max(out["peak_rss_mib"], s["peak_rss_mib"])
        out["errors"] += s["errors"][: max(0, 5 - len(out["errors"]))]
        for key in ("statuses", "sessions"):
            for k, v in s[key].items():
                out[key][k] = out[key].get(k, 0) + v
        for role in ("garbler", "evaluator"):
            for k, v in s["costs"][role].items():
                out["costs"][role][k] = out["costs"][role].get(k, 0) + v
    return out


def per_session(costs: dict) -> dict:
    """Mean of each cost per completed session of one role."""
    n = costs.get("n", 0)
    return {k: v / n for k, v in costs.items() if k != "n"} if n else {}


@dataclass(frozen=True)
class SimulationOptions:
    """How :func:`simulate_users` plays its users: ``users`` of them on ``processes`` worker processes,
    ``tls`` (a ``certs`` directory, user certificates made as needed; None: plaintext loopback), the
    ``label`` column, the user names' ``prefix``, the aggregator's pinned ``server_name``, each user's
    ``max_epsilon``, ``timeout`` and ``wait`` (see :func:`pairwise.protocols.collect.user.join`),
    ``insecure`` and ``rate`` (users arriving per second over all workers; 0: all at once)."""

    users: int
    processes: int
    tls: str | None = None
    label: str | None = None
    prefix: str = "sim"
    server_name: str | None = None
    max_epsilon: float = 1.0
    timeout: float = 120.0
    wait: float = 600.0
    insecure: bool = False
    rate: float = 0.0

    def __post_init__(self) -> None:
        users, processes = self.users, self.processes
        if isinstance(users, bool) or not isinstance(users, int) or users < 1:
            raise SimulationError(f"--users must be a positive integer, got {users!r}")
        if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= 64:
            raise SimulationError(f"--processes must be in 1..64, got {processes!r}")


def simulate_users(
    server: str,
    task: str,
    data: str,
    columns: list[str],
    *,
    options: SimulationOptions | None = None,
    log=None,
    **legacy: Any,
) -> dict:
    """Run ``users`` simulated users of ``task`` on ``processes`` worker processes; returns the merged summary.

    ``options``: a :class:`SimulationOptions`, or its fields as keywords (``users=``, ``processes=``, ...).
    """
    from pairwise.protocols.processes import spawn, terminate

    o = with_legacy(options, SimulationOptions, legacy, "simulate_users")
    no_more_keywords(legacy, "simulate_users")
    users, processes, tls, label, prefix, server_name = (o.users, o.processes, o.tls, o.label, o.prefix, o.server_name)
    max_epsilon, timeout, wait, insecure, rate = o.max_epsilon, o.timeout, o.wait, o.insecure, o.rate
    if not 1 <= len(columns) <= 2:
        raise SimulationError("--columns names one or two columns (the second: kendall's y, the QMLE's covariate)")
    if tls is None and not insecure:
        from pairwise.mpc.tls import is_loopback

        from .wire import parse_address

        if not is_loopback(parse_address(server)[0]):
            raise SimulationError("without --tls the users run in plaintext, loopback only")
    log = log or (lambda m: None)
    _rows(data, columns, label, [users - 1])  # the file has the rows (a clear error before any process starts)
    made = ensure_certificates(tls, user_names(prefix, users)) if tls else 0
    if made:
        log(f"made {made} user certificates in {tls}")
    root = tempfile.mkdtemp(prefix="pairwise-sim-")
    procs, outs = [], []
    t0 = time.perf_counter()
    try:
        for k in range(processes):
            mine = list(range(k, users, processes))
            spec = {
                "server": server,
                "task": task,
                "data": os.path.abspath(data),
                "columns": columns,
                "label": label,
                "users": mine,
                "tls": tls,
                "prefix": prefix,
                "server_name": server_name,
                "max_epsilon": max_epsilon,
                "timeout": timeout,
                "wait": wait,
                "state_root": root,
                "insecure": insecure,
                "rate": float(rate) / processes,
            }
            p = spawn(
                [sys.executable, "-m", "pairwise.protocols.collect.simulate"],
                stdin=_pipe(),
                stdout=_pipe(),
                stderr=None,
                text=True,
            )
            p.stdin.write(json.dumps(spec))
            p.stdin.close()
            procs.append(p)
        for p in procs:
            line = p.stdout.read()
            p.wait(wait + timeout + 900)
            try:
                outs.append(json.loads(line.strip().splitlines()[-1]))
            except (json.JSONDecodeError, IndexError):
                raise SimulationError(
                    f"a worker process ended without a summary (exit status {p.returncode})"
                ) from None
    finally:
        terminate(procs)
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    merged = merge(outs)
    merged["seconds"] = time.perf_counter() - t0
    merged["per_session"] = {role: per_session(merged["costs"][role]) for role in ("garbler", "evaluator")}
    return merged


def _pipe():
    import subprocess

    return subprocess.PIPE


def _main() -> int:
    from pairwise.protocols.processes import bind_to_parent

    bind_to_parent()
    spec = json.loads(sys.stdin.read())
    summary = run_worker(WorkerArgs(**spec))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
