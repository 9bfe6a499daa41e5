"""Mutual TLS and clean shutdown between real processes on loopback.

* ``pairwise 2pc`` in TLS: correct outputs (Python-int reference), a garbler
  that rejects stray and unauthorized connections and still serves its
  evaluator, an evaluator refused by a pinned garbler with a clear error.
* Shutdown: SIGTERM / SIGINT end ``2pc`` parties, ``demo 2pc`` and ``ustat
  --mode network`` with all their children; a parent killed with SIGKILL
  takes its workers with it.  "Left behind" is checked in /proc.

Every wait is bounded (generous, for a loaded 2-core machine); no test measures time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from pairwise.mpc.channel import AccessDenied, TCPChannel, handshake
from pairwise.mpc.tls import TLSConfig, create_certificate

CLI = [sys.executable, "-m", "pairwise"]
BOUND = 60.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and Linux signals")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    for name in ("garbler", "evaluator", "mallory"):
        create_certificate(d, name, "client")
    other = tmp_path_factory.mktemp("other")
    create_certificate(other, "evaluator", "client")  # the right name from the wrong CA
    return d, other


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        CLI + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def finish(p: subprocess.Popen, timeout: float = BOUND) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        raise AssertionError(f"{p.args[2:6]} did not finish within {timeout} s; stderr: {err}") from None
    return p.returncode, out, err


def wait_listening(port: int, proc: subprocess.Popen) -> None:
    """Until something accepts TCP connections on the port (the probe is itself a stray connection)."""
    end = time.monotonic() + BOUND
    while time.monotonic() < end:
        assert proc.poll() is None, finish(proc)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("never listened")


def children(pid: int) -> set[int]:
    """All live descendants of ``pid`` (from /proc/*/stat)."""
    parent_of = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                parent_of[int(entry)] = int(fields[1])
    out, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parent_of.items() if p in frontier} - out
        out |= frontier
    return out


def alive(pids) -> set[int]:
    left = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.add(pid)
        except OSError:
            pass
    return left


def wait_gone(pids, bound: float = 30.0) -> set[int]:
    end = time.monotonic() + bound
    while alive(pids) and time.monotonic() < end:
        time.sleep(0.1)
    return alive(pids)


def wait_children(proc: subprocess.Popen, count: int, match: str) -> set[int]:
    """Until ``proc`` has at least ``count`` descendants whose command line contains ``match``."""
    end = time.monotonic() + BOUND
    while time.monotonic() < end:
        assert proc.poll() is None, finish(proc)
        found = set()
        for pid in children(proc.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if match.encode() in fh.read():
                        found.add(pid)
            except OSError:
                pass
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{count} children matching {match!r} never appeared")


# --------------------------------------------------------------------------- 2pc in TLS


def test_garbler_rejects_strays_and_impostors_then_serves_its_evaluator(certs):
    d, other = certs
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "4000000000",
        "--tls",
        d,
        "--name",
        "garbler",
        "--peer",
        "evaluator",
        "--timeout",
        "30",
        "--json",
    )
    try:
        wait_listening(port, g)  # stray 1: connect and close
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # stray 2: another protocol
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            s.recv(100)
        with TCPChannel.connect("127.0.0.1", port, deadline=10, timeout=10) as ch:  # stray 3: no TLS
            with pytest.raises(Exception, match="requires mutual TLS"):
                handshake(ch, "evaluator", "pairwise-2pc")
        with pytest.raises(AccessDenied, match="not the expected peer"):  # stray 4: same CA, wrong name
            TCPChannel.connect("127.0.0.1", port, deadline=10, timeout=10, tls=TLSConfig(d, "mallory"))
        wrong_ca = cli(
            "2pc",
            "evaluator",
            "--connect",
            f"127.0.0.1:{port}",
            "--circuit",
            "gini",
            "--input",
            "1",
            "--tls",
            other,
            "--name",
            "evaluator",
            "--timeout",
            "10",
        )
        rc, _, err = finish(wrong_ca)  # stray 5: the right name from another CA
        assert rc == 2 and "signed by another CA" in err, err
        e = cli(
            "2pc",
            "evaluator",
            "--connect",
            f"127.0.0.1:{port}",
            "--circuit",
            "gini",
            "--input",
            "123",
            "--tls",
            d,
            "--name",
            "evaluator",
            "--peer",
            "garbler",
            "--json",
        )
        erc, eout, eerr = finish(e)
        grc, gout, gerr = finish(g)
    finally:
        if g.poll() is None:
            g.kill()
    assert erc == 0 and grc == 0, (eerr, gerr)
    for out in (eout, gout):
        res = json.loads(out.strip().splitlines()[-1])
        assert res["outputs"] == [4000000000 - 123] and res["tls"] is True
    assert json.loads(gout.strip().splitlines()[-1])["peer_name"] == "evaluator"
    assert gerr.count("rejected connection") == 5, gerr
    for fragment in ("did not start a TLS handshake", "not the expected peer", "does not trust our certificate"):
        assert fragment in gerr, gerr


def test_evaluator_refused_by_a_pinned_garbler_says_why(certs):
    d, _ = certs
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--tls",
        d,
        "--name",
        "garbler",
        "--peer",
        "evaluator",
        "--timeout",
        "5",
    )
    e = cli(
        "2pc",
        "evaluator",
        "--connect",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--tls",
        d,
        "--name",
        "mallory",
        "--connect-deadline",
        "30",
    )
    (erc, _, eerr), (grc, _, gerr) = finish(e), finish(g)
    assert erc == 2 and "'garbler' (role client)" in eerr and "refused this connection" in eerr, eerr
    assert "'mallory' is not the expected peer" in eerr
    assert grc == 2 and "no valid peer connected" in gerr and "mallory" in gerr, gerr


def test_plaintext_off_loopback_needs_insecure():
    rc, out, err = finish(
        cli("2pc", "garbler", "--listen", "0.0.0.0:0", "--circuit", "gini", "--input", "1", "--timeout", "1")
    )
    assert rc == 2 and "refusing plaintext listening on 0.0.0.0" in err and "--insecure" in err, err
    rc, out, err = finish(
        cli(
            "2pc",
            "evaluator",
            "--connect",
            "127.0.0.1:9",
            "--circuit",
            "gini",
            "--input",
            "1",
            "--tls",
            "/nonexistent",
            "--name",
            "x",
        )
    )
    assert rc == 2 and "no such directory" in err, err


# --------------------------------------------------------------------------- shutdown


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_waiting_2pc_party_stops_on_signal(certs, sig, code):
    d, _ = certs
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--tls",
        d,
        "--name",
        "garbler",
        "--timeout",
        "300",
    )
    wait_listening(port, g)
    g.send_signal(sig)
    rc, _, err = finish(g, timeout=30)
    assert rc == code and ("terminated" if sig == signal.SIGTERM else "interrupted") in err, err


def test_demo_2pc_sigterm_leaves_no_party_behind():
    demo = cli("demo", "2pc", "--circuit", "aes128")
    try:
        parties = wait_children(demo, 1, "2pc")
        demo.send_signal(signal.SIGTERM)
        finish(demo, timeout=30)
        left = wait_gone(parties)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert not left, f"processes left behind: {left}"


def test_pairwise_child_dies_with_its_parent(certs):
    """A `pairwise` process started with processes.spawn (as `demo 2pc` starts its parties) exits when its
    parent is killed with SIGKILL, even while it waits for a peer with a 300 s timeout."""
    d, _ = certs
    port = free_port()
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pairwise.protocols.processes import spawn\n"
            "spawn([sys.executable, '-m', 'pairwise', '2pc', 'garbler', '--listen', sys.argv[1], '--circuit', 'gini',"
            " '--input', '1', '--timeout', '300', '--tls', sys.argv[2], '--name', 'garbler'])\n"
            "time.sleep(300)\n",
            f"127.0.0.1:{port}",
            str(d),
        ]
    )
    try:
        child = wait_children(parent, 1, "garbler")
        wait_listening(port, parent)
        parent.kill()
        parent.wait(30)
        left = wait_gone(child, bound=15.0)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert not left, f"the child outlived its parent: {left}"


USTAT = [
    "ustat",
    "--statistic",
    "kendall",
    "--epsilon",
    "1",
    "--mode",
    "network",
    "--workers",
    "3",
    "--pairs-per-user",
    "2",
]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_ustat_network_workers_do_not_outlive_the_driver(sig):
    """SIGTERM: the driver stops its workers; SIGKILL: the workers notice their parent died."""
    drv = cli(*USTAT, "--json")
    try:
        workers = wait_children(drv, 3, "ustat.worker")
        drv.send_signal(sig)
        rc, _, err = finish(drv, timeout=30)
        left = wait_gone(workers, bound=15.0)  # the run itself would take far longer
    finally:
        if drv.poll() is None:
            drv.kill()
    assert not left, f"workers left behind: {left}"
    assert rc == (143 if sig == signal.SIGTERM else -9), err


def test_ustat_network_with_missing_worker_certificates_fails_before_starting(certs):
    d, _ = certs  # has garbler/evaluator/mallory, not worker-K
    rc, out, err = finish(cli(*USTAT, "--tls", d))
    assert rc == 2 and "worker-0.pem is missing" in err and "pairwise certs create" in err, err
