"""``pairwise circuit``: statistics, plaintext/garbled evaluation, the kernel table, export.

Commands
    ``pairwise circuit stats (KERNEL|aes128|FILE) [--bits W] [--signed] [--json]``
        JSON keys: ``and``, ``xor``, ``inv``, ``depth``, ``and_depth``, ``bytes``.
    ``pairwise circuit eval FILE --input HEX [--input HEX ...] [--garbled] [--json]``
        One hex string per input group, read as a big-endian integer (Bristol
        Fashion convention, as in emp-tool's standard files); one
        hex string per output.  JSON: ``{"outputs": [...]}``.  ``--garbled``
        garbles and evaluates in one process (same output format).
    ``pairwise circuit table [--bits W ...] [--json]``
        AND/XOR/INV/depth/bytes of every kernel.
    ``pairwise circuit export (KERNEL|aes128|FILE) --format bristol|dot|graphml -o PATH [--old-bristol] [--json]``
        ``--old-bristol`` reads FILE in the old Bristol format, so
        ``--format bristol`` converts it to Bristol Fashion.

Security model: plaintext tools over public circuits; ``--garbled`` runs the
real garbler and evaluator in one process (a demonstration, not a protocol).
"""

from __future__ import annotations

import json
import sys

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import CircuitError, bits_to_ints, ints_to_bits
from pairwise.circuits.kernels import KERNELS, build_kernel

from .options import add_json


def _add_spec_args(p) -> None:
    p.add_argument("circuit", help=f"kernel name ({', '.join(KERNELS)}), aes128, or a Bristol Fashion file")
    p.add_argument("--bits", type=int, default=32, help="kernel width in bits (8..64), default 32")
    p.add_argument("--signed", action="store_true", help="kernel inputs are signed (two's complement)")


def register(root, groups) -> None:
    p = root.add_parser("circuit", help="circuit statistics, evaluation and export")
    sub = p.add_subparsers(dest="circuit_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("stats", help="gate counts, depth and garbled size")
    _add_spec_args(s)
    add_json(s)
    s.set_defaults(func=cmd_stats)

    e = sub.add_parser("eval", help="evaluate a circuit on hex inputs (plaintext or garbled)")
    _add_spec_args(e)
    e.add_argument("--input", action="append", default=[], metavar="HEX", help="one per input group, big-endian hex")
    e.add_argument("--garbled", action="store_true", help="garble and evaluate (half-gates) instead of plaintext")
    add_json(e)
    e.set_defaults(func=cmd_eval)

    t = sub.add_parser("table", help="the kernel circuit table")
    t.add_argument(
        "--bits",
        type=int,
        nargs="+",
        default=[8, 16, 32, 64],
        metavar="W",
        help="kernel widths to tabulate (default 8 16 32 64)",
    )
    add_json(t, "print the rows as one JSON list of objects")
    t.set_defaults(func=cmd_table)

    x = sub.add_parser("export", help="write a circuit as Bristol Fashion, DOT or GraphML")
    _add_spec_args(x)
    x.add_argument(
        "--format",
        choices=["bristol", "dot", "graphml"],
        default="bristol",
        help="Bristol Fashion (default), Graphviz DOT or GraphML",
    )
    x.add_argument(
        "--old-bristol",
        action="store_true",
        help="read CIRCUIT in the old Bristol format (line 2 'n1 n2 nout'), e.g. to convert it",
    )
    x.add_argument("-o", "--output", required=True, metavar="PATH", help="file to write")
    add_json(x, 'print {"output": PATH, "format": ...} instead of a sentence')
    x.set_defaults(func=cmd_export)


def cmd_stats(args) -> int:
    c = resolve_circuit(args.circuit, args.bits, args.signed)
    st = c.stats()
    if args.json:
        print(json.dumps(st.as_dict()))
    else:
        print(f"circuit   {c.name}")
        print("inputs    " + ", ".join(f"{g.name} ({g.party.value}, {g.width} bits)" for g in c.inputs))
        print("outputs   " + ", ".join(f"{g.name} ({g.width} bits)" for g in c.outputs))
        for k in ("and", "xor", "inv", "depth", "and_depth", "bytes"):
            print(f"{k:<9} {st.as_dict()[k]}")
    return 0


def parse_hex_input(text: str, width: int, name: str) -> int:
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not t:
        raise CircuitError(f"input {name}: empty hex string")
    try:
        v = int(t, 16)
    except ValueError:
        raise CircuitError(f"input {name}: {text!r} is not hexadecimal") from None
    if v >> width:
        raise CircuitError(f"input {name}: {text!r} has more than {width} bits")
    return v


def format_hex_output(value: int, width: int) -> str:
    return format(value, f"0{(width + 3) // 4}x")


def cmd_eval(args) -> int:
    c = resolve_circuit(args.circuit, args.bits, args.signed)
    if len(args.input) != len(c.inputs):
        raise CircuitError(
            f"{c.name} has {len(c.inputs)} input groups ({', '.join(f'{g.name}: {g.width} bits' for g in c.inputs)}); got {len(args.input)} --input"
        )
    values = [parse_hex_input(h, g.width, g.name) for h, g in zip(args.input, c.inputs)]
    bits = [ints_to_bits([v], g.width, False, g.name) for v, g in zip(values, c.inputs)]
    if args.garbled:
        from pairwise.mpc.garble import garble_and_evaluate

        outs = garble_and_evaluate(c, bits)
    else:
        outs = c.evaluate_bits(bits)
    hexes = [format_hex_output(int(bits_to_ints(o, False)[0]), g.width) for o, g in zip(outs, c.outputs)]
    if args.json:
        print(json.dumps({"outputs": hexes}))
    else:
        for h in hexes:
            print(h)
    return 0


def kernel_table(widths=(8, 16, 32, 64)) -> list[dict]:
    rows = []
    for name in KERNELS:
        for w in widths:
            st = build_kernel(name, w).stats().as_dict()
            rows.append(
                {"kernel": name, "bits": w, **{k: st[k] for k in ("and", "xor", "inv", "depth", "and_depth", "bytes")}}
            )
    return rows


def print_table(rows: list[dict], file=sys.stdout) -> None:
    cols = list(rows[0])
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in cols}
    print("  ".join(k.ljust(widths[k]) if k == "kernel" else k.rjust(widths[k]) for k in cols), file=file)
    for r in rows:
        print(
            "  ".join(str(r[k]).ljust(widths[k]) if k == "kernel" else str(r[k]).rjust(widths[k]) for k in cols),
            file=file,
        )


def cmd_table(args) -> int:
    rows = kernel_table(args.bits)
    if args.json:
        print(json.dumps(rows))
    else:
        print_table(rows)
    return 0


def cmd_export(args) -> int:
    if args.old_bristol:
        from pairwise.circuits.bristol import read_bristol_old

        c = read_bristol_old(args.circuit)
    else:
        c = resolve_circuit(args.circuit, args.bits, args.signed)
    if args.format == "bristol":
        from pairwise.circuits.bristol import write_bristol_fashion

        write_bristol_fashion(c, args.output)
    elif args.format == "dot":
        with open(args.output, "w") as fh:
            fh.write(c.to_dot())
    else:
        c.write_graphml(args.output)
    if args.json:
        print(json.dumps({"output": args.output, "format": args.format, "circuit": c.name}))
    else:
        print(f"wrote {args.output}")
    return 0
