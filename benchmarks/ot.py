"""Benchmark of the OT layer: base OTs, IKNP correlated OTs (in memory and over TCP), transpose.

Prints a markdown table:

* base OT time: the 128 Chou-Orlandi base OTs of ``COTSender.setup()``,
  in memory (two threads) and over loopback TCP between two processes;
* first-use latency: connect + handshake + base OTs + one derandomised label
  transfer for 128 evaluator input bits, between two processes (the OT part
  of a first 2PC execution);
* correlated OTs per second, in memory (two threads of one process) and over
  loopback TCP between two processes, for several batch sizes;
* bytes on the wire per COT;
* the bit-matrix transpose: the 8x8-tile kernel used by mpc.iknp against
  np.unpackbits/packbits and a 64x64 word-tile kernel.

Usage::

    python benchmarks/ot.py                 # full run (~1 minute)
    python benchmarks/ot.py --quick         # smaller sizes
    python benchmarks/ot.py --json          # one JSON object instead of the table
    python benchmarks/ot.py --fresh-session 31,47,79,128,256 --repeats 5
                                            # a fresh session's OTs: 128 base OTs + IKNP vs a base OT per bit

Timings are wall-clock medians over ``--repeats`` runs; the machine is shared,
so numbers vary by tens of percent between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import threading
import time

import numpy as np

from pairwise.mpc.aes import random_blocks
from pairwise.mpc.baseot import BaseOTReceiver, BaseOTSender
from pairwise.mpc.channel import MemoryChannel, TCPChannel, TCPListener, handshake
from pairwise.mpc.iknp import KAPPA, COTReceiver, COTSender, transpose_bit_matrix


def _delta() -> np.ndarray:
    d = random_blocks(1)[0]
    d[0] |= np.uint64(1)
    return d


# --------------------------------------------------------------------------- child process (evaluator)


def child_main(argv: list[str]) -> int:
    mode, port = argv[0], int(argv[1])
    ch = TCPChannel.connect("127.0.0.1", port, deadline=30, timeout=60)
    if mode == "first-use":
        n_inputs = int(argv[2])
        handshake(ch, "evaluator", "bench-first-use")
        cot = COTReceiver(ch, "bench-first-use")
        c0 = time.process_time()
        cot.setup()
        cpu = time.process_time() - c0
        x = (np.frombuffer(os.urandom(n_inputs), dtype=np.uint8) & 1).astype(bool)
        cot.recv_labels(x)
        ch.send(struct.pack("!d", cpu))
    elif mode == "cot":
        n, batch, repeats = int(argv[2]), int(argv[3]), int(argv[4])
        handshake(ch, "evaluator", "bench-cot")
        cot = COTReceiver(ch, "bench-cot", batch_size=batch)
        cot.setup()
        cpu = 0.0
        for _ in range(repeats):
            ch.recv()  # go
            c0 = time.process_time()
            cot.recv_random(n)
            cpu += time.process_time() - c0
        ch.send(struct.pack("!d", cpu / repeats))
    elif mode in ("fresh-iknp", "fresh-direct"):
        n_inputs = int(argv[2])
        x = (np.frombuffer(os.urandom(n_inputs), dtype=np.uint8) & 1).astype(bool)
        c0 = time.process_time()
        hs = handshake(ch, "evaluator", "bench-fresh")
        if mode == "fresh-iknp":  # 128 base OTs (we send), a first IKNP batch, derandomized labels
            cot = COTReceiver(ch, hs.run_id, batch_size=1024)
            cot.setup()
            labels = cot.recv_labels(x)
        else:  # n base OTs with our input bits as choices (we receive), then the garbler's corrections
            k = BaseOTReceiver(ch, hs.run_id).recv_random(x)
            corr = ch.recv_blocks(n_inputs)
            labels = k ^ (x[:, None].astype(np.uint64) * corr)  # k_x xor x (k0 xor k1 xor Delta) = k0 xor x Delta
        cpu = time.process_time() - c0
        ch.send(struct.pack("!d", cpu))
        ch.send_bits(x)  # for the parent's correctness check only (a benchmark: x is not a secret here)
        ch.send_blocks(labels)
    else:
        raise SystemExit(f"unknown child mode {mode}")
    ch.recv()  # wait for the parent's goodbye so its measurements end first
    ch.close()
    return 0


def _spawn_child(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", *map(str, args)])


# --------------------------------------------------------------------------- measurements


def base_ot_memory(repeats: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of both parties) for the 128 base OTs, two threads, medians."""
    walls, cpus = [], []
    for _ in range(repeats):
        a, b = MemoryChannel.pair(timeout=60)
        s, r = COTSender(a, _delta(), "bench-base"), COTReceiver(b, "bench-base")
        th = threading.Thread(target=r.setup)
        c0, t0 = time.process_time(), time.perf_counter()
        th.start()
        s.setup()
        th.join()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def first_use_tcp(repeats: int, n_inputs: int = 128) -> dict[str, float]:
    """Medians over TCP between two processes: total (handshake + base OTs + labels), base OT wall, CPU per side."""
    rows = []
    for _ in range(repeats):
        with TCPListener("127.0.0.1", 0) as lst:
            child = _spawn_child("first-use", lst.port, n_inputs)
            try:
                ch = lst.accept(60)
                t0 = time.perf_counter()
                handshake(ch, "garbler", "bench-first-use")
                cot = COTSender(ch, _delta(), "bench-first-use")
                t1, c1 = time.perf_counter(), time.process_time()
                cot.setup()
                t2, c2 = time.perf_counter(), time.process_time()
                cot.send_labels(n_inputs)
                t3 = time.perf_counter()
                (child_cpu,) = struct.unpack("!d", ch.recv())
                ch.send(b"bye")
                ch.close()
                child.wait(60)
            finally:
                if child.poll() is None:
                    child.kill()
        rows.append((t3 - t0, t2 - t1, c2 - c1, child_cpu))
    med = [statistics.median(col) for col in zip(*rows)]
    return {"total": med[0], "base_wall": med[1], "base_cpu_sender": med[2], "base_cpu_receiver": med[3]}


def fresh_session_labels(mode: str, n_inputs: int) -> dict[str, float]:
    """A fresh session's OT part for ``n_inputs`` evaluator bits between two processes (this one the garbler):
    ``iknp`` = 128 base OTs + a first IKNP batch of 1024 COTs + derandomized labels (the runtime today);
    ``direct`` = one base OT per input bit, the garbler as sender, plus 16 bytes of correction per bit
    (zero label k0, correction k0 xor k1 xor Delta).  Wall from the connection to the evaluator's labels,
    CPU of each side; the evaluator's labels are checked against zero xor x*Delta."""
    with TCPListener("127.0.0.1", 0) as lst:
        child = _spawn_child(f"fresh-{mode}", lst.port, n_inputs)
        try:
            ch = lst.accept(60)
            t0, c0 = time.perf_counter(), time.process_time()
            hs = handshake(ch, "garbler", "bench-fresh")
            delta = _delta()
            if mode == "iknp":
                cot = COTSender(ch, delta, hs.run_id, batch_size=1024)
                cot.setup()
                zero = cot.send_labels(n_inputs)
            else:
                k0, k1 = BaseOTSender(ch, hs.run_id).send_random(n_inputs)
                ch.send_blocks(k0 ^ k1 ^ delta)
                ch.flush()
                zero = k0
            cpu = time.process_time() - c0
            (child_cpu,) = struct.unpack("!d", ch.recv())
            wall = time.perf_counter() - t0
            x = ch.recv_bits(n_inputs)
            labels = ch.recv_blocks(n_inputs)
            ok = bool(np.array_equal(labels, zero ^ (x[:, None].astype(np.uint64) * delta)))
            sent, received = ch.bytes_sent, ch.bytes_received
            ch.send(b"bye")
            ch.close()
            child.wait(60)
        finally:
            if child.poll() is None:
                child.kill()
    return {
        "wall_ms": 1e3 * wall,
        "cpu_ms_garbler": 1e3 * cpu,
        "cpu_ms_evaluator": 1e3 * child_cpu,
        "ok": ok,
        "bytes": sent + received - 16 * n_inputs - -(-n_inputs // 8) - 2 * 4 - 8 - 4,
    }  # without the check


def fresh_session_table(sizes: list[int], rounds: int) -> list[dict]:
    """Both modes for every size, interleaved (ABAB) over ``rounds``: medians per mode and size."""
    raw: dict[tuple[str, int], list[dict]] = {}
    for _ in range(rounds):
        for n in sizes:
            for mode in ("iknp", "direct"):
                raw.setdefault((mode, n), []).append(fresh_session_labels(mode, n))
    rows = []
    for (mode, n), runs in raw.items():
        row = {"mode": mode, "bits": n, "rounds": len(runs), "ok": all(r["ok"] for r in runs)}
        for key in ("wall_ms", "cpu_ms_garbler", "cpu_ms_evaluator", "bytes"):
            row[key] = statistics.median(r[key] for r in runs)
        rows.append(row)
    return rows


def cot_memory(n: int, batch: int, repeats: int) -> dict[str, float]:
    """COTs per second (wall), CPU ns per COT of both parties, bytes per COT: two threads of this process."""
    a, b = MemoryChannel.pair(timeout=120)
    s, r = COTSender(a, _delta(), "bench-mem", batch_size=batch), COTReceiver(b, "bench-mem", batch_size=batch)
    th = threading.Thread(target=r.setup)
    th.start()
    s.setup()
    th.join()
    rates, cpus = [], []
    for _ in range(repeats):
        before = b.bytes_sent
        th = threading.Thread(target=r.recv_random, args=(n,))
        c0, t0 = time.process_time(), time.perf_counter()
        th.start()
        s.send_random(n)
        th.join()
        rates.append(n / (time.perf_counter() - t0))
        cpus.append((time.process_time() - c0) / n)
        per = (b.bytes_sent - before) / n
    return {"per_s": statistics.median(rates), "cpu_ns": 1e9 * statistics.median(cpus), "bytes": per}


def cot_tcp(n: int, batch: int, repeats: int) -> dict[str, float]:
    """COTs per second (wall), CPU ns per COT of each side, bytes per COT: this process (garbler) and a child."""
    rates, cpus = [], []
    with TCPListener("127.0.0.1", 0) as lst:
        child = _spawn_child("cot", lst.port, n, batch, repeats)
        try:
            ch = lst.accept(60)
            handshake(ch, "garbler", "bench-cot")
            s = COTSender(ch, _delta(), "bench-cot", batch_size=batch)
            s.setup()
            for _ in range(repeats):
                before = ch.bytes_received
                c0, t0 = time.process_time(), time.perf_counter()
                ch.send(b"go")
                s.send_random(n)
                rates.append(n / (time.perf_counter() - t0))
                cpus.append((time.process_time() - c0) / n)
                per = (ch.bytes_received - before) / n
            (child_cpu,) = struct.unpack("!d", ch.recv())
            ch.send(b"bye")
            ch.close()
            child.wait(120)
        finally:
            if child.poll() is None:
                child.kill()
    return {
        "per_s": statistics.median(rates),
        "cpu_ns_sender": 1e9 * statistics.median(cpus),
        "cpu_ns_receiver": 1e9 * child_cpu / n,
        "bytes": per,
    }


def _transpose_unpack(rows: np.ndarray, chunk: int = 1 << 14) -> np.ndarray:
    r, c = rows.shape
    out = np.empty((8 * c, r // 8), dtype=np.uint8)
    for s in range(0, c, chunk // 8):
        e = min(c, s + chunk // 8)
        bits = np.unpackbits(rows[:, s:e], axis=1, bitorder="little")
        out[8 * s : 8 * e] = np.packbits(bits.T, axis=1, bitorder="little")
    return out


_MASKS64 = {j: np.uint64(sum(1 << b for b in range(64) if not b & j)) for j in (32, 16, 8, 4, 2, 1)}


def _transpose_64(rows: np.ndarray) -> np.ndarray:
    """64x64 word tiles, six delta-swap rounds (Hacker's Delight transpose32 generalised)."""
    r, c = rows.shape
    w = c // 8
    x = np.ascontiguousarray(rows.view(np.uint64).reshape(r // 64, 64, w).transpose(0, 2, 1))
    tiles = x.reshape(-1, 64)
    for j in (32, 16, 8, 4, 2, 1):
        v = tiles.reshape(tiles.shape[0], 64 // (2 * j), 2, j)
        lo, hi = v[:, :, 0, :], v[:, :, 1, :]
        t = (lo >> np.uint64(j)) ^ hi
        t &= _MASKS64[j]
        hi ^= t
        lo ^= t << np.uint64(j)
    return np.ascontiguousarray(x.transpose(1, 2, 0)).reshape(w * 64, r // 64).view(np.uint8)


def _transpose_numpy(rows: np.ndarray) -> np.ndarray:
    from pairwise.mpc.garble import jit

    with jit.disabled():  # the numpy fallback of transpose_bit_matrix
        return transpose_bit_matrix(rows)


def transpose_rates(m: int, repeats: int) -> dict[str, float]:
    rows = np.frombuffer(os.urandom(KAPPA * m // 8), dtype=np.uint8).reshape(KAPPA, m // 8)
    ref = transpose_bit_matrix(rows)
    out = {}
    for name, f in (
        ("mpc.iknp (compiled 64x64 tiles)", transpose_bit_matrix),
        ("mpc.iknp numpy 8x8 tiles (fallback)", _transpose_numpy),
        ("unpackbits/packbits", _transpose_unpack),
        ("numpy 64x64 word tiles", _transpose_64),
    ):
        assert np.array_equal(f(rows), ref), name
        best = min(_timed(f, rows) for _ in range(repeats))
        out[name] = m / best
    return out


def _timed(f, *args) -> float:
    t0 = time.perf_counter()
    f(*args)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 22, help="COTs per throughput run (default 2^22)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="n = 2^20, 2 repeats, fewer batch sizes")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--fresh-session",
        metavar="BITS",
        default=None,
        help="only the fresh-session comparison: 128 base OTs + IKNP vs one base OT per evaluator input "
        "bit, for these bit counts (e.g. 31,47,79,128,256), --repeats interleaved rounds",
    )
    args = p.parse_args(argv)
    if args.fresh_session:
        sizes = [int(b) for b in args.fresh_session.split(",")]
        load0 = os.getloadavg()
        rows = fresh_session_table(sizes, args.repeats)
        if args.json:
            print(json.dumps({"rows": rows, "load_before": load0, "load_after": os.getloadavg()}))
            return 0
        print(
            f"# fresh session, OT part: two processes over loopback TCP, medians of {args.repeats} interleaved "
            f"rounds; load {' '.join(f'{v:.2f}' for v in load0)} -> {' '.join(f'{v:.2f}' for v in os.getloadavg())}\n"
        )
        print("| evaluator input bits | mode | wall ms | CPU ms garbler | CPU ms evaluator | bytes | labels correct |")
        print("|---:|---|---:|---:|---:|---:|---|")
        for r in sorted(rows, key=lambda r: (r["bits"], r["mode"])):
            what = "128 base OTs + IKNP (1024)" if r["mode"] == "iknp" else "one base OT per bit"
            print(
                f"| {r['bits']} | {what} | {r['wall_ms']:.1f} | {r['cpu_ms_garbler']:.1f} | "
                f"{r['cpu_ms_evaluator']:.1f} | {r['bytes']:.0f} | {r['ok']} |"
            )
        return 0
    n, repeats = args.n, args.repeats
    batches = [1 << 14, 1 << 16, 1 << 18, 1 << 20]
    if args.quick:
        n, repeats, batches = 1 << 20, 2, [1 << 16, 1 << 18]

    res: dict[str, object] = {"n": n, "repeats": repeats, "load_average": os.getloadavg()[0], "cpus": os.cpu_count()}
    wall, cpu = base_ot_memory(repeats)
    res["base_ot_memory_ms"], res["base_ot_memory_cpu_ms"] = 1e3 * wall, 1e3 * cpu
    res["first_use_tcp_ms"] = {k: 1e3 * v for k, v in first_use_tcp(repeats).items()}
    res["cot"] = []
    for batch in batches:
        res["cot"].append({"batch": batch, "memory": cot_memory(n, batch, repeats), "tcp": cot_tcp(n, batch, repeats)})
    res["transpose_per_s"] = transpose_rates(1 << 20, repeats)
    res["load_average_end"] = os.getloadavg()[0]

    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    fu = res["first_use_tcp_ms"]
    print(
        f"# OT benchmark (n = {n} COTs per run, median of {repeats}; {res['cpus']} CPUs, "
        f"load average {res['load_average']:.1f} -> {res['load_average_end']:.1f})\n"
    )
    print("| measurement | wall | CPU |")
    print("|---|---:|---:|")
    print(
        f"| 128 base OTs (Chou-Orlandi, edwards25519), in memory, 2 threads | {res['base_ot_memory_ms']:.1f} ms "
        f"| {res['base_ot_memory_cpu_ms']:.1f} ms (both parties) |"
    )
    print(
        f"| 128 base OTs, TCP loopback, 2 processes | {fu['base_wall']:.1f} ms "
        f"| {fu['base_cpu_sender']:.1f} ms garbler, {fu['base_cpu_receiver']:.1f} ms evaluator |"
    )
    print(f"| first use over TCP: handshake + base OTs + labels for 128 inputs | {fu['total']:.1f} ms | |")
    print()
    print(
        "| batch | COT/s memory (2 threads) | CPU ns/COT memory (both) | COT/s TCP (2 processes) "
        "| CPU ns/COT TCP garbler / evaluator | bytes/COT |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for row in res["cot"]:
        mem, tcp = row["memory"], row["tcp"]
        print(
            f"| {row['batch']} | {mem['per_s'] / 1e6:.2f} M | {mem['cpu_ns']:.0f} | {tcp['per_s'] / 1e6:.2f} M "
            f"| {tcp['cpu_ns_sender']:.0f} / {tcp['cpu_ns_receiver']:.0f} | {tcp['bytes']:.3f} |"
        )
    print()
    print("| transpose 128 x 2^20 bits | rows/s |")
    print("|---|---:|")
    for name, rate in res["transpose_per_s"].items():
        print(f"| {name} | {rate / 1e6:.1f} M |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
