"""``pairwise bench fss``: DCF key-generation and batched-evaluation rates and key size.

What it does
    Generates ``--keys`` DCF key pairs over an ``--domain-bits``-bit domain with
    ``--output-bits``-bit outputs (alphas uniform, beta = 1, from the OS
    CSPRNG), serializes them, parses party 0's keys as a server would, and
    times one server evaluating all keys at one threshold (one AES call per
    tree level per chunk of keys).  With ``--json`` it prints one object with
    the keys ``dcf_key_bytes``, ``keygen_per_s`` (key pairs generated per
    second, batched, as arrays), ``eval_per_s`` (DCF evaluations per second by
    one server, batched over the keys) and supporting numbers.

    :func:`run_dcf_benchmark` is the measurement; ``benchmarks/fss_tables.py`` reuses
    it for its tables.  ``--progress`` (default: when stderr is a terminal)
    draws a bar on stderr of the timed calls (4 stages x ``--repeats``); it is
    updated between the timed calls, never inside one.

Security model
    A benchmark: keys are real (CSPRNG seeds) but thrown away; nothing secret
    is printed (only sizes and rates).
"""

from __future__ import annotations

import json
import secrets
import time

import numpy as np

from .options import add_progress, progress_bar

__all__ = ["register", "run_dcf_benchmark", "run_dpf_full_domain_benchmark"]


def _best_of(fn, repeats: int, tick=None) -> tuple[float, float]:
    """Smallest wall time and smallest CPU time of ``repeats`` calls.

    The wall time is the headline number; the process CPU time is reported
    beside it because the benchmark machine may be shared (CPU time is what
    the code costs when it has a core to itself).  ``tick()``, if given, is
    called after each call, outside the timed section.
    """
    wall = cpu = float("inf")
    for _ in range(max(1, repeats)):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        if tick:
            tick()
    return wall, max(cpu, 1e-9)


def run_dcf_benchmark(
    domain_bits: int = 32, keys: int = 100_000, output_bits: int = 32, repeats: int = 3, progress=None
) -> dict:
    """Measure DCF key size, batched Gen, (de)serialization and batched Eval; return a dict.

    ``progress(done, total)``, if given, counts the timed calls (4 stages x
    ``max(1, repeats)``); it is called between them, outside the timed sections.
    """
    from pairwise.fss import DCFKeyBatch, FSSParameterError, dcf_gen_batch, dcf_key_bytes, reconstruct

    n, l = int(domain_bits), int(output_bits)
    if keys < 1:
        raise FSSParameterError(f"--keys must be at least 1, got {keys}")
    key_bytes = dcf_key_bytes(n, l)  # validates n and l
    if n == 64:
        alphas = np.frombuffer(secrets.token_bytes(8 * keys), dtype=np.uint64).copy()
    else:
        alphas = np.frombuffer(secrets.token_bytes(8 * keys), dtype=np.uint64) >> np.uint64(64 - n)
    threshold = secrets.randbits(n)

    holder = {}
    total = 4 * max(1, repeats)
    done = [0]

    def tick():
        if progress:
            done[0] += 1
            progress(done[0], total)

    if progress:
        progress(0, total)

    def gen():
        holder["k"] = dcf_gen_batch(alphas, 1, n, l)

    t_gen, c_gen = _best_of(gen, repeats, tick)
    k0, k1 = holder["k"]
    t_ser, c_ser = _best_of(lambda: holder.__setitem__("b", k0.to_bytes_list()), repeats, tick)
    blobs0 = holder["b"]
    t_parse, c_parse = _best_of(
        lambda: holder.__setitem__("s", DCFKeyBatch.from_bytes_list(blobs0, n=n, l=l, party=0)), repeats, tick
    )
    server0 = holder["s"]
    t_eval, c_eval = _best_of(lambda: holder.__setitem__("y0", server0.eval_sum(threshold)), repeats, tick)
    # correctness guard: the two servers' shares must reconstruct the true count
    y1 = k1.eval_sum(threshold)
    expected = int(np.count_nonzero(np.uint64(threshold) < alphas)) % (1 << l)
    if reconstruct(holder["y0"], y1, l) != expected:
        raise RuntimeError("DCF benchmark self-check failed: shares do not reconstruct the count")
    return {
        "domain_bits": n,
        "output_bits": l,
        "keys": keys,
        "dcf_key_bytes": key_bytes,
        "keygen_per_s": keys / t_gen,
        "serialize_per_s": keys / t_ser,
        "parse_per_s": keys / t_parse,
        "eval_per_s": keys / t_eval,
        "keygen_cpu_per_s": keys / c_gen,
        "serialize_cpu_per_s": keys / c_ser,
        "parse_cpu_per_s": keys / c_parse,
        "eval_cpu_per_s": keys / c_eval,
    }


def run_dpf_full_domain_benchmark(domain_bits: int, output_bits: int = 32, repeats: int = 3) -> dict:
    """Time full-domain evaluation of one DPF key (both parties checked to reconstruct f)."""
    from pairwise.fss import dpf_gen, dpf_key_bytes

    n, l = int(domain_bits), int(output_bits)
    alpha = secrets.randbits(n)
    k0, k1 = dpf_gen(alpha, 1, n, l)
    holder = {}
    t, c = _best_of(lambda: holder.__setitem__("y", k0.full_domain()), repeats)
    y = (holder["y"] + k1.full_domain()) & np.uint64((1 << l) - 1)
    if int(np.count_nonzero(y)) != 1 or int(y[alpha]) != 1:
        raise RuntimeError("DPF benchmark self-check failed")
    return {
        "domain_bits": n,
        "output_bits": l,
        "dpf_key_bytes": dpf_key_bytes(n, l),
        "full_domain_s": t,
        "full_domain_cpu_s": c,
    }


def _cmd_bench_fss(args) -> int:
    with progress_bar(args, "bench fss: timed calls", unit="call") as progress:
        res = run_dcf_benchmark(args.domain_bits, args.keys, args.output_bits, args.repeats, progress=progress)
    if args.json:
        print(json.dumps(res))
        return 0
    print(
        f"DCF over a {res['domain_bits']}-bit domain, outputs mod 2^{res['output_bits']}, "
        f"{res['keys']} keys (best of {args.repeats}; wall clock, and per CPU second)"
    )
    print(f"  key size            {res['dcf_key_bytes']:>12d} bytes")
    for label, key, unit in (
        ("key generation", "keygen", "key pairs/s (batched)"),
        ("serialization", "serialize", "keys/s"),
        ("parsing (server)", "parse", "keys/s"),
        ("evaluation", "eval", "evaluations/s per server (batched)"),
    ):
        print(f"  {label:<18}{res[key + '_per_s']:>13,.0f} {unit}   [{res[key + '_cpu_per_s']:,.0f} per CPU s]")
    return 0


def register(root, groups) -> None:
    """Add ``pairwise bench fss``."""
    p = groups["bench"].add_parser(
        "fss",
        help="DCF key generation / batched evaluation rates and key size",
        description="Generate DCF keys, evaluate one server's batch at a threshold, report rates.",
    )
    p.add_argument("--domain-bits", type=int, default=32, metavar="N", help="domain bits n (1..64), default 32")
    p.add_argument("--output-bits", type=int, default=32, metavar="L", help="output bits l (1..64), default 32")
    p.add_argument("--keys", type=int, default=100_000, metavar="K", help="number of keys, default 100000")
    p.add_argument("--repeats", type=int, default=3, metavar="R", help="timed repetitions (best is reported)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress(p)
    p.set_defaults(func=_cmd_bench_fss)
