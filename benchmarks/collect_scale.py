"""The seed protocols among real users at scale: N = 10^3 and 10^4 users, a kendall 2PC task and a local-model task.

What it measures (issue 21, "Benchmarks")
    For each N, on this machine, with real processes on loopback, mutual TLS
    everywhere and the ``tls`` pair channel (TLS 1.3 between the two users
    of a pair, inside the aggregator's relay):

    * ``ustat-2pc`` (kendall, eps = 1, P = 1, min users = N): one aggregator
      process (``pairwise collect serve``, SQLite state), K worker
      processes of ``pairwise collect simulate-users`` playing the N users
      (each its own certificate, own ledger, only its own row), users
      arriving at ``--rate`` per second; registration closes when all N
      registered (``min_users = N``, no deadline: what a study needing N
      users does; if some cannot join, the analyst closes it 120 s after the
      arrivals, and those are counted, not waited for).  End-to-end seconds (first user
      arrives -> the result is stored), pairs per second, the aggregator's
      peak RSS (VmHWM) and CPU, the relayed bytes per user, and the users'
      CPU per pair split into TLS handshake, setup (base OTs: one per
      evaluator input bit, ``fresh_cot``), execution (garbling/evaluation), close, and the wait on
      the partner through the relay, plus the whole user processes' CPU per
      pair (credentials, connections to the aggregator, ledger, threads);
    * a fresh two-process session of the *same* circuit (the task's spec):
      ``benchmarks/_fresh_pair.py``, the code path of ``pairwise 2pc`` (TLS
      over TCP, hello, base OTs, one execution), ``--fresh`` times, half
      before and half after the collect run (same session, same load);
    * ``ldp-ustat`` (kendall, eps = 1, local model): the same N users join,
      randomize and report once; end-to-end seconds, aggregator RSS.

    Prints JSON (``--json``) or a Markdown table; ``uptime`` before and
    after goes with the numbers into benchmarks/RESULTS.md.

    python benchmarks/collect_scale.py --users 1000 10000 --processes 2 [--rate 200] [--fresh 6] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _proc_stats(pid: int) -> dict:
    """Peak RSS (MiB) and CPU seconds of a live process, from /proc."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024.0
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    out["cpu_seconds"] = (int(fields[11]) + int(fields[12])) / tick
    return {"peak_rss_mib": out.get("VmHWM", 0.0), "rss_mib": out.get("VmRSS", 0.0), "cpu_seconds": out["cpu_seconds"]}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def fresh_sessions(certs: str, spec: dict, count: int) -> list[dict]:
    """``count`` fresh two-process sessions of the task's circuit; per-role phase costs of each."""
    from pairwise.mpc.tls import create_certificate

    for name in ("fresh-g", "fresh-e"):
        if not os.path.exists(os.path.join(certs, f"{name}.pem")):
            create_certificate(certs, name, "user", days=2)
    path = os.path.join(certs, "spec.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    out = []
    for _k in range(count):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        common = ["--port", str(port), "--tls", certs, "--spec", path]
        g = subprocess.Popen(
            [
                sys.executable,
                os.path.join(HERE, "_fresh_pair.py"),
                "--role",
                "garbler",
                "--name",
                "fresh-g",
                "--peer",
                "fresh-e",
                *common,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        e = subprocess.Popen(
            [
                sys.executable,
                os.path.join(HERE, "_fresh_pair.py"),
                "--role",
                "evaluator",
                "--name",
                "fresh-e",
                "--peer",
                "fresh-g",
                *common,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        go, _ = g.communicate(timeout=300)
        eo, _ = e.communicate(timeout=300)
        out.append(
            {"garbler": json.loads(go.strip().splitlines()[-1]), "evaluator": json.loads(eo.strip().splitlines()[-1])}
        )
    return out


def _watch(agg, certs: str, t0: float, close_after: float, timeout: float, out: dict, stop) -> None:
    """Note when registration closed (and the aggregator's CPU then); close it after ``close_after`` seconds
    if the minimum was not reached (a user who could not join is counted, not waited for)."""
    from pairwise.mpc.tls import TLSConfig
    from pairwise.protocols.collect import Collector

    with Collector(agg.server, tls=TLSConfig(certs, "analyst"), server_name="aggregator", timeout=timeout) as c:
        while not stop.wait(1.0):
            view = c.show("bench")
            if view["state"] != "open":
                out.update(
                    closed_after=time.perf_counter() - t0,
                    users_at_close=view["users_registered"],
                    aggregator_at_close=_proc_stats(agg.proc.pid),
                    uptime_at_close=uptime(),
                )
                return
            if time.perf_counter() - t0 > close_after:
                c.close_task("bench")
                out["closed_by_collector"] = True


def run_task(
    protocol: str,
    params: dict,
    n: int,
    certs: str,
    csv: str,
    columns: list[str],
    processes: int,
    rate: float,
    timeout: float,
    serve_args: tuple = (),
) -> dict:
    import threading

    from pairwise.mpc.tls import TLSConfig
    from pairwise.protocols.collect import Collector
    from pairwise.protocols.collect.processes import AggregatorProcess
    from pairwise.protocols.collect.simulate import simulate_users

    state = tempfile.mkdtemp(prefix="collect-bench-state-")
    agg = AggregatorProcess(
        state, tls_dir=certs, timeout=timeout, extra_args=("--max-connections", str(4 * n + 64), *serve_args)
    )
    watch: dict = {}
    stop = threading.Event()
    try:
        with Collector(agg.server, tls=TLSConfig(certs, "analyst"), server_name="aggregator", timeout=timeout) as c:
            # registration closes when all N users registered, as a study that needs N users would (min_users = N,
            # no deadline to wait out); if some could not join, the collector closes it 120 s after the arrivals
            arrival = n / rate if rate else 0.0
            task = c.create(protocol, {**params, "min_users": n, "deadline": 0, "timeout": timeout}, task_id="bench")
            t0 = time.perf_counter()
            watcher = threading.Thread(
                target=_watch, args=(agg, certs, t0, arrival + 120.0, timeout, watch, stop), daemon=True
            )
            watcher.start()
            sim = simulate_users(
                agg.server,
                "bench",
                csv,
                columns,
                users=n,
                processes=processes,
                tls=certs,
                server_name="aggregator",
                timeout=timeout,
                wait=max(900.0, 3 * arrival),
                rate=rate,
            )
            result = c.result("bench", wait=300)
            seconds = time.perf_counter() - t0
            aggst = _proc_stats(agg.proc.pid)
    finally:
        stop.set()
        agg.close()
        shutil.rmtree(state, ignore_errors=True)
    return {"spec": task["spec"], "sim": sim, "result": result, "seconds": seconds, "aggregator": aggst, **watch}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--users", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--rate", type=float, default=50.0, help="users arriving per second (default 50)")
    p.add_argument("--fresh", type=int, default=6, help="fresh two-process sessions (half before, half after)")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--skip-local", action="store_true")
    p.add_argument("--max-handshakes", type=int, default=64, help="collect serve --max-handshakes")
    p.add_argument("--poll-rate", type=float, default=100.0, help="collect serve --poll-rate")
    p.add_argument("--max-sessions", type=int, default=256, help="collect serve --max-sessions")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    serve_args = (
        "--max-handshakes",
        str(a.max_handshakes),
        "--poll-rate",
        str(a.poll_rate),
        "--max-sessions",
        str(a.max_sessions),
    )

    from pairwise.protocols.collect.processes import study_certificates
    from pairwise.protocols.processes import exit_on_sigterm

    exit_on_sigterm()  # SIGTERM runs the finally blocks: no aggregator or worker outlives the benchmark
    from pairwise.protocols.collect.simulate import ensure_certificates, user_names

    report = {"uptime_before": uptime(), "runs": []}
    certs = tempfile.mkdtemp(prefix="collect-bench-certs-")
    try:
        study_certificates(certs, 0, days=2)
        for n in a.users:
            t0 = time.perf_counter()
            ensure_certificates(certs, user_names("sim", n))
            cert_seconds = time.perf_counter() - t0
            rng = np.random.default_rng(n)  # simulation data
            csv = os.path.join(certs, f"data{n}.csv")
            with open(csv, "w") as fh:
                fh.write("x,y\n" + "".join(f"{x},{y}\n" for x, y in rng.integers(0, 16, (n, 2))))
            params = {
                "statistic": "kendall",
                "lower": [0, 0],
                "upper": [15, 15],
                "decimals": [0, 0],
                "epsilon": 1.0,
                "pairs_per_user": 1,
                "pair_channel": "tls",
            }
            from pairwise.protocols.collect.tasks import validate_task

            spec = validate_task("ustat-2pc", {**params, "min_users": 2})
            before = fresh_sessions(certs, spec, a.fresh // 2)
            two = run_task("ustat-2pc", params, n, certs, csv, ["x", "y"], a.processes, a.rate, a.timeout, serve_args)
            after = fresh_sessions(certs, spec, a.fresh - a.fresh // 2)
            run = {
                "n": n,
                "certificates_seconds": cert_seconds,
                "uptime_2pc": uptime(),
                "twopc": two,
                "fresh": before + after,
            }
            if not a.skip_local:
                run["local"] = run_task(
                    "ldp-ustat",
                    {
                        "kernel": "kendall",
                        "lower": [0, 0],
                        "upper": [15, 15],
                        "decimals": [0, 0],
                        "epsilon": 1.0,
                        "discrete": True,
                    },
                    n,
                    certs,
                    csv,
                    ["x", "y"],
                    a.processes,
                    a.rate,
                    a.timeout,
                    serve_args,
                )
                run["uptime_local"] = uptime()
            report["runs"].append(run)
            print(json.dumps(summary(run)), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    report["uptime_after"] = uptime()
    if a.json:
        print(json.dumps(report))
    else:
        print(markdown(report))
    return 0


def summary(run: dict) -> dict:
    """The numbers of one N (see the module docstring)."""
    n, two = run["n"], run["twopc"]
    res, sim = two["result"], two["sim"]
    pairs = res["pairs_completed"]
    g, e = sim["per_session"]["garbler"], sim["per_session"]["evaluator"]
    fg = [f["garbler"] for f in run["fresh"]]
    fe = [f["evaluator"] for f in run["fresh"]]

    def med(rows, key):
        return float(np.median([r[key] for r in rows])) if rows else float("nan")

    fresh_pair = med(fg, "session_cpu") + med(fe, "session_cpu")
    in_session = g.get("cpu", float("nan")) + e.get("cpu", float("nan"))
    out = {
        "n": n,
        "certificates_seconds": round(run["certificates_seconds"], 2),
        "twopc_seconds": round(two["seconds"], 1),
        "users_registered": res["users_registered"],
        "user_outcomes": sim["statuses"],
        "pairs_planned": res["pairs_planned"],
        "pairs_completed": pairs,
        "pairs_dropped": res["pairs_dropped"],
        "pairs_per_second": round(pairs / two["seconds"], 1),
        "sessions_seconds": round(res.get("seconds", float("nan")), 1),
        "registration_closed_after": round(two.get("closed_after", float("nan")), 1),
        "closed_by_collector": bool(two.get("closed_by_collector")),
        "aggregator_cpu_at_close": round(two.get("aggregator_at_close", {}).get("cpu_seconds", float("nan")), 1),
        "aggregator_rss_at_close_mib": round(two.get("aggregator_at_close", {}).get("rss_mib", float("nan")), 1),
        "uptime_at_close": two.get("uptime_at_close"),
        "pairs_per_second_in_sessions": round(pairs / res["seconds"], 1) if res.get("seconds") else None,
        "aggregator_peak_rss_mib": round(two["aggregator"]["peak_rss_mib"], 1),
        "aggregator_cpu_seconds": round(two["aggregator"]["cpu_seconds"], 1),
        "relay_bytes_per_user": round(res["bytes"] / max(1, pairs), 0),  # a user sends + receives its pair's total
        "user_cpu_per_pair_ms": {
            "tls": round(1e3 * (g["tls_cpu"] + e["tls_cpu"]), 2),
            "base_ot": round(1e3 * (g["setup_cpu"] + e["setup_cpu"]), 2),
            "execution": round(1e3 * (g["run_cpu"] + e["run_cpu"]), 2),
            "close": round(1e3 * (g["finish_cpu"] + e["finish_cpu"]), 2),
            "in_session": round(1e3 * in_session, 2),
            "relay_wait_wall": round(1e3 * (g["wait"] + e["wait"]), 1),
            "whole_user_processes": round(1e3 * sim["cpu_seconds"] / max(1, pairs), 2),
        },
        "fresh_pair_cpu_ms": {
            "tls": round(1e3 * (med(fg, "tls_cpu") + med(fe, "tls_cpu")), 2),
            "credentials": round(1e3 * (med(fg, "credentials_cpu") + med(fe, "credentials_cpu")), 2),
            "base_ot": round(1e3 * (med(fg, "setup_cpu") + med(fe, "setup_cpu")), 2),
            "execution": round(1e3 * (med(fg, "run_cpu") + med(fe, "run_cpu")), 2),
            "session": round(1e3 * fresh_pair, 2),
            "whole_processes": round(1e3 * (med(fg, "process_cpu") + med(fe, "process_cpu")), 1),
        },
        "in_session_over_fresh": round(in_session / fresh_pair, 3),
        "user_processes_over_fresh": round((sim["cpu_seconds"] / max(1, pairs)) / fresh_pair, 3),
        "and_gates": res.get("and_gates_per_pair"),
    }
    if "local" in run:
        loc = run["local"]
        out.update(
            local_seconds=round(loc["seconds"], 1),
            local_users_per_second=round(n / loc["seconds"], 1),
            local_aggregator_peak_rss_mib=round(loc["aggregator"]["peak_rss_mib"], 1),
            local_reports=loc["result"].get("reports"),
            local_user_cpu_ms=round(1e3 * loc["sim"]["cpu_seconds"] / n, 2),
        )
    return out


def markdown(report: dict) -> str:
    rows = [summary(r) for r in report["runs"]]
    lines = [
        f"uptime before: {report['uptime_before']}",
        f"uptime after: {report['uptime_after']}",
        "",
        "| N | 2PC end to end (s) | pairs/s | completed / planned | aggregator peak RSS (MiB) | aggregator CPU (s) "
        "| relayed bytes per user | user CPU per pair in session (ms): TLS / base OT / execution / close | "
        "fresh 2-process session (ms) | ratio | whole user processes per pair (ms) | local model (s, users/s, RSS MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        u, f = s["user_cpu_per_pair_ms"], s["fresh_pair_cpu_ms"]
        loc = (
            f"{s['local_seconds']}, {s['local_users_per_second']}, {s['local_aggregator_peak_rss_mib']}"
            if "local_seconds" in s
            else "-"
        )
        lines.append(
            f"| {s['n']} | {s['twopc_seconds']} | {s['pairs_per_second']} | {s['pairs_completed']} / "
            f"{s['pairs_planned']} | {s['aggregator_peak_rss_mib']} | {s['aggregator_cpu_seconds']} | "
            f"{s['relay_bytes_per_user']:.0f} | {u['in_session']} = {u['tls']} / {u['base_ot']} / "
            f"{u['execution']} / {u['close']} (waits {u['relay_wait_wall']}) | {f['session']} "
            f"(TLS {f['tls']}, base OT {f['base_ot']}, execution {f['execution']}) | "
            f"{s['in_session_over_fresh']} | {u['whole_user_processes']} | {loc} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
