"""FSS benchmark tables: DCF/DPF key sizes, batched Gen and Eval rates, DPF full-domain time.

Run from the repository root::

    .venv/bin/python benchmarks/fss_tables.py                 # 10^5 and 10^6 keys
    .venv/bin/python benchmarks/fss_tables.py --keys 100000   # one batch size
    .venv/bin/python benchmarks/fss_tables.py --json          # machine-readable

Every rate is the best of ``--repeats`` runs, as wall clock and per CPU
second (the machine may be shared; CPU time is the cost with a free core), and
every measurement is self-checked: the two servers' shares must reconstruct
the true count / histogram, else the script fails.  "Key generation" counts
key pairs (both parties' keys) generated as arrays, with root seeds from
``os.urandom``; "evaluation" is one server evaluating every key of its batch
at one threshold (one AES call per tree level per chunk of keys).
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import sys

import numpy as np

from pairwise.commands.fss import _best_of, run_dcf_benchmark, run_dpf_full_domain_benchmark
from pairwise.fss import DPFKeyBatch, dcf_key_bytes, dpf_gen_batch, dpf_key_bytes, reconstruct


def dpf_rates(n: int, keys: int, l: int, repeats: int) -> dict:
    alphas = np.frombuffer(secrets.token_bytes(8 * keys), dtype=np.uint64) >> np.uint64(64 - n)
    holder = {}
    t_gen, c_gen = _best_of(lambda: holder.__setitem__("k", dpf_gen_batch(alphas, 1, n, l)), repeats)
    k0, k1 = holder["k"]
    srv = DPFKeyBatch.from_bytes_list(k0.to_bytes_list(), n=n, l=l, party=0)
    x = int(alphas[0])
    t_eval, c_eval = _best_of(lambda: holder.__setitem__("y", srv.eval_sum(x)), repeats)
    if reconstruct(holder["y"], k1.eval_sum(x), l) != int(np.count_nonzero(alphas == x)):
        raise RuntimeError("DPF self-check failed")
    return {
        "domain_bits": n,
        "keys": keys,
        "dpf_key_bytes": dpf_key_bytes(n, l),
        "keygen_per_s": keys / t_gen,
        "eval_per_s": keys / t_eval,
        "keygen_cpu_per_s": keys / c_gen,
        "eval_cpu_per_s": keys / c_eval,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--keys", type=int, nargs="*", default=[100_000, 1_000_000], help="batch sizes for the n = l = 32 DCF table"
    )
    ap.add_argument("--sweep-keys", type=int, default=100_000, help="batch size of the domain sweep")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    out = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "machine": platform.machine(),
        "dcf_32": [],
        "dcf_sweep": [],
        "dpf": [],
        "dpf_full_domain": [],
    }
    for K in args.keys:
        out["dcf_32"].append(run_dcf_benchmark(32, K, 32, args.repeats))
    for n, l in [(8, 8), (16, 16), (32, 32), (48, 32), (64, 64)]:
        out["dcf_sweep"].append(run_dcf_benchmark(n, args.sweep_keys, l, args.repeats))
    for n in (16, 32, 64):
        out["dpf"].append(dpf_rates(n, args.sweep_keys, 32, args.repeats))
    for n in (16, 20):
        out["dpf_full_domain"].append(run_dpf_full_domain_benchmark(n, 32, args.repeats))

    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"FSS benchmarks (Python {out['python']}, numpy {out['numpy']}, {out['machine']}; best of {args.repeats})")
    print()
    print(f"DCF, n = l = 32 (key {dcf_key_bytes(32, 32)} bytes)")
    print(
        f"{'keys':>10} {'gen pairs/s':>13} {'serialize/s':>13} {'parse/s':>13} {'eval/s/server':>15}"
        f" {'gen/CPU s':>13} {'eval/CPU s':>13}"
    )
    for r in out["dcf_32"]:
        print(
            f"{r['keys']:>10,} {r['keygen_per_s']:>13,.0f} {r['serialize_per_s']:>13,.0f} "
            f"{r['parse_per_s']:>13,.0f} {r['eval_per_s']:>15,.0f}"
            f" {r['keygen_cpu_per_s']:>13,.0f} {r['eval_cpu_per_s']:>13,.0f}"
        )
    print()
    print(f"DCF domain sweep, {args.sweep_keys:,} keys")
    print(
        f"{'n':>4} {'l':>4} {'key bytes':>10} {'gen pairs/s':>13} {'eval/s/server':>15}"
        f" {'gen/CPU s':>13} {'eval/CPU s':>13}"
    )
    for r in out["dcf_sweep"]:
        print(
            f"{r['domain_bits']:>4} {r['output_bits']:>4} {r['dcf_key_bytes']:>10} "
            f"{r['keygen_per_s']:>13,.0f} {r['eval_per_s']:>15,.0f}"
            f" {r['keygen_cpu_per_s']:>13,.0f} {r['eval_cpu_per_s']:>13,.0f}"
        )
    print()
    print(f"DPF, l = 32, {args.sweep_keys:,} keys")
    print(f"{'n':>4} {'key bytes':>10} {'gen pairs/s':>13} {'eval/s/server':>15} {'gen/CPU s':>13} {'eval/CPU s':>13}")
    for r in out["dpf"]:
        print(
            f"{r['domain_bits']:>4} {r['dpf_key_bytes']:>10} {r['keygen_per_s']:>13,.0f} {r['eval_per_s']:>15,.0f}"
            f" {r['keygen_cpu_per_s']:>13,.0f} {r['eval_cpu_per_s']:>13,.0f}"
        )
    print()
    print("DPF full-domain evaluation, one key, l = 32")
    print(f"{'n':>4} {'points':>10} {'seconds':>10} {'points/s':>14} {'CPU seconds':>12}")
    for r in out["dpf_full_domain"]:
        pts = 1 << r["domain_bits"]
        print(
            f"{r['domain_bits']:>4} {pts:>10,} {r['full_domain_s']:>10.4f} {pts / r['full_domain_s']:>14,.0f}"
            f" {r['full_domain_cpu_s']:>12.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
