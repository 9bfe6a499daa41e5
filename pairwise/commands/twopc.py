"""``pairwise 2pc garbler|evaluator`` and ``pairwise demo 2pc``: semi-honest Yao between two processes.

Commands
    ``pairwise 2pc garbler --listen HOST:PORT --circuit SPEC --input V ...`` and
    ``pairwise 2pc evaluator --connect HOST:PORT --circuit SPEC --input V ...``
    run one party each.  SPEC is a kernel name, ``aes128``, a Bristol Fashion
    file, or ``FILE.py:FUNCTION`` / ``MODULE:FUNCTION`` (a function that
    builds the circuit with :class:`pairwise.circuits.builder.Builder`); both
    parties must build the same circuit (the session handshake compares
    digests).  V is ``NAME=v1,v2,...`` per input group (several values make
    a SIMD batch).  Each side prints the outputs, AND gates, bytes and
    messages each way and seconds.  ``pairwise demo 2pc`` starts both parties
    as two processes on loopback in mutual TLS with a throwaway CA.

Transport (:mod:`pairwise.protocols.transport`)
    ``--tls DIR --name NAME``: mutual TLS 1.3 with certificates from
    ``pairwise certs create``; ``--peer NAME`` pins the other party's name.
    Without ``--tls`` the parties speak plaintext, on loopback only unless
    ``--insecure``.  The garbler handshakes every waiting connection at once
    and serves the first valid evaluator until ``--connect-timeout``, so
    stray or silent connections neither delay nor stop it; a mismatched
    circuit or version stops both parties with exit status 2.

Every option, the input forms and the JSON keys: ``docs/cli.md``,
"pairwise 2pc and pairwise demo 2pc".

Security model: semi-honest Yao (:mod:`pairwise.mpc.twopc`); inputs are range-checked
before the socket is opened, so a bad input never moves a secret.  ``FILE.py:FUNCTION``
runs that file's code in this process, as ``python FILE.py`` would: name only code you trust.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit, CircuitError, InputGroup
from pairwise.circuits.kernels import KERNELS, pack_pair
from pairwise.dp.errors import PairwiseError
from pairwise.mpc.twopc.session import BASE_COT_MAX_BITS, fresh_cot  # noqa: F401 - BASE_COT_MAX_BITS re-exported
from pairwise.protocols.transport import add_transport_args, tls_from_args, transport_argv

from .circuit import format_hex_output, parse_hex_input
from .options import add_json, add_timeouts, seconds


def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"port must be an integer, got {port!r}") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"port must be in 0..65535, got {p}")
    return host, p


def _add_common(p) -> None:
    p.add_argument(
        "--circuit",
        required=True,
        help=f"kernel ({', '.join(KERNELS)}), aes128, a Bristol Fashion file, or FILE.py:FUNCTION / "
        "MODULE:FUNCTION (a function that builds the circuit)",
    )
    p.add_argument("--bits", type=int, default=32, help="kernel width (8..64), default 32")
    p.add_argument("--signed", action="store_true", help="kernel inputs are signed")
    p.add_argument(
        "--input",
        required=True,
        action="append",
        metavar="V",
        help="this party's input: NAME=v1,v2,... per input group (integers; repeat --input per group), "
        "or the older forms: an integer for kernels, x,y for kendall, hex for a Bristol file",
    )
    p.add_argument("--output", choices=["both", "evaluator", "garbler"], default="both", help="who learns the output")
    add_json(p)
    add_transport_args(p)
    p.add_argument("--peer", metavar="NAME", help="with --tls: the other party's certificate name must be NAME")


def register(root, groups) -> None:
    p = root.add_parser("2pc", help="run one party of a two-party garbled-circuit computation")
    sub = p.add_subparsers(dest="twopc_command", metavar="ROLE")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])
    g = sub.add_parser("garbler", help="garbler: listens for the evaluator")
    g.add_argument(
        "--listen",
        required=True,
        metavar="HOST:PORT",
        help="address to listen on for the evaluator, e.g. 127.0.0.1:9000 (0.0.0.0 for all interfaces)",
    )
    _add_common(g)
    g.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for the evaluator on any message (default 30)",
    )
    g.add_argument(
        "--connect-timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="seconds to wait for a valid evaluator to connect and finish the setup (default: --timeout)",
    )
    g.set_defaults(func=cmd_garbler)
    e = sub.add_parser("evaluator", help="evaluator: connects to the garbler")
    e.add_argument(
        "--connect",
        required=True,
        metavar="HOST:PORT",
        help="the garbler's address, e.g. 127.0.0.1:9000 (retried until --connect-timeout)",
    )
    _add_common(e)
    add_timeouts(e, timeout=30.0, connect_timeout=10.0, timeout_what="the garbler", old_connect=("--connect-deadline",))
    e.set_defaults(func=cmd_evaluator)

    d = groups["demo"].add_parser("2pc", help="garbler and evaluator as two processes on loopback")
    d.add_argument(
        "--circuit",
        default="gini",
        help=f"kernel ({', '.join(KERNELS)}), aes128, a Bristol Fashion file, or FILE.py:FUNCTION (default gini)",
    )
    d.add_argument("--bits", type=int, default=32, help="kernel width (8..64), default 32")
    d.add_argument("--signed", action="store_true", help="kernel inputs are signed")
    d.add_argument(
        "--garbler-input",
        default=None,
        metavar="V",
        help="the garbler's input (default: a value that fits --bits, e.g. 1234; FIPS-197 key for aes128), "
        "or NAME=v1,v2,... per input group, ';' between groups",
    )
    d.add_argument(
        "--evaluator-input",
        default=None,
        metavar="V",
        help="the evaluator's input (default: a value that fits --bits, e.g. 987; FIPS-197 plaintext), "
        "or NAME=v1,v2,... per input group, ';' between groups",
    )
    add_timeouts(d, timeout=30.0, connect_timeout=30.0, timeout_what="the other party")
    add_json(d)
    d.set_defaults(func=cmd_demo)


def _is_kernel(spec: str) -> bool:
    return spec in KERNELS


_BUILDER_SPEC = re.compile(r"(?P<target>.+):(?P<func>[A-Za-z_][A-Za-z0-9_]*)")


def builder_spec(spec: str) -> tuple[str, str] | None:
    """(module or file, function) when ``spec`` is ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION``, else None."""
    m = _BUILDER_SPEC.fullmatch(spec)
    if m is None or os.path.exists(spec):  # a file whose name has a colon stays a file
        return None
    return m["target"], m["func"]


def load_builder(target: str, func: str) -> Circuit:
    """Import ``target`` (a .py file or a module name), call ``func()``, return the Circuit it builds."""
    from pairwise.circuits.builder import Builder

    where = f"{target}:{func}"
    if target.endswith(".py") or os.sep in target or os.path.exists(target):
        if not os.path.isfile(target):
            raise CircuitError(f"--circuit {where}: no such file {target!r}")
        name = "_pairwise_circuit_" + re.sub(r"\W", "_", os.path.abspath(target))
        mod_spec = importlib.util.spec_from_file_location(name, target)
        if mod_spec is None or mod_spec.loader is None:
            raise CircuitError(f"--circuit {where}: cannot load {target!r} as Python")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise CircuitError(
                f"--circuit {where}: no module {target!r} ({exc}); give FILE.py:FUNCTION or an "
                "importable MODULE:FUNCTION"
            ) from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise CircuitError(f"--circuit {where}: {target!r} has no function {func!r}")
    built = fn()
    if isinstance(built, Builder):
        built = built.build()
    if not isinstance(built, Circuit):
        raise CircuitError(
            f"--circuit {where}: {func}() returned {type(built).__name__}, expected a Circuit "
            "(Builder.build()) or a Builder"
        )
    return built


def load_circuit(spec: str, bits: int = 32, signed: bool = False) -> Circuit:
    """A kernel, ``aes128``, a Bristol Fashion file, or a builder function ``FILE.py:FUNCTION``."""
    target = builder_spec(spec)
    if target is not None and not _is_kernel(spec):
        return load_builder(*target)
    return resolve_circuit(spec, bits, signed)


def _group_values(text: str, flag: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    name = name.strip()
    try:
        vals = [int(t.strip(), 0) for t in values.split(",")]
    except ValueError:
        raise CircuitError(f"{flag} {text!r}: expected NAME=v1,v2,... with integers (decimal, or 0x.. hex)") from None
    return name, vals


def _vector_groups(groups: tuple[InputGroup, ...], name: str) -> list[InputGroup]:
    """The groups NAME0 .. NAME{k-1} (or NAME[0] ..) of a vector input, in index order (empty if none)."""
    pat = re.compile(re.escape(name) + r"(?:\[(\d+)\]|(\d+))")
    found = {}
    for g in groups:
        m = pat.fullmatch(g.name)
        if m:
            found[int(m[1] or m[2])] = g
    if not found or sorted(found) != list(range(len(found))):
        return []
    return [found[i] for i in range(len(found))]


def parse_named_inputs(circuit: Circuit, party, texts: list[str], flag: str = "--input") -> dict:
    """``NAME=v1,v2,...`` per input group of ``party`` -> {group: int or [ints]} (range checks come later)."""
    groups = circuit.groups_of(party)
    by_name = {g.name: g for g in groups}
    got: dict[str, list[int]] = {}
    for text in texts:
        name, vals = _group_values(text, flag)
        if name in by_name:
            targets = [(by_name[name], vals)]
        else:
            vec = _vector_groups(groups, name)
            if not vec:
                raise CircuitError(
                    f"{flag} {text!r}: the {party.value} has no input group {name!r}; its groups: "
                    + ", ".join(_describe_group(g) for g in groups)
                )
            if len(vals) != len(vec):
                raise CircuitError(
                    f"{flag} {text!r}: {name} stands for the {len(vec)} groups "
                    f"{vec[0].name} .. {vec[-1].name}, got {len(vals)} value(s)"
                )
            targets = [(g, [v]) for g, v in zip(vec, vals)]
        for g, v in targets:
            if g.name in got:
                raise CircuitError(f"{flag}: input group {g.name!r} given twice")
            got[g.name] = v
    missing = [g for g in groups if g.name not in got]
    if missing:
        raise CircuitError(
            f"missing {flag} for the {party.value}'s input group(s): " + ", ".join(_describe_group(g) for g in missing)
        )
    sizes = {len(v) for v in got.values()}
    if len(sizes) > 1:
        raise CircuitError(
            f"{flag}: every group needs the same number of values (the SIMD batch), got "
            + ", ".join(f"{k}: {len(v)}" for k, v in got.items())
        )
    if sizes == {1}:
        return {k: v[0] for k, v in got.items()}
    return got


def _describe_group(g: InputGroup) -> str:
    return f"{g.name} ({g.width}-bit {'signed' if g.signed else 'unsigned'})"


def _is_named(texts: list[str]) -> bool:
    return any(re.match(r"\s*[A-Za-z_][\w\[\]]*\s*=", t) for t in texts)


def parse_party_input(circuit: Circuit, spec: str, party, text, bits: int, signed: bool, flag: str = "--input") -> dict:
    """The party's input as {group: int or [ints]}, validated against the circuit before anything is sent;
    errors name ``flag``.  ``text``: one string or the list of ``--input`` values."""
    texts = [text] if isinstance(text, str) else list(text)
    if _is_named(texts) or builder_spec(spec) is not None and not _is_kernel(spec):
        values = parse_named_inputs(circuit, party, texts, flag)
        from pairwise.mpc.twopc import prepare_inputs

        prepare_inputs(circuit, party, values)  # range checks, with the group's name in the message
        return values
    if len(texts) != 1:
        raise CircuitError(f"{flag} given {len(texts)} times: repeat it only with the NAME=values form")
    text = texts[0]
    groups = circuit.groups_of(party)
    if len(groups) != 1:
        raise CircuitError(
            f"{party.value} owns {len(groups)} input groups ("
            + ", ".join(_describe_group(g) for g in groups)
            + f"): give {flag} NAME=value for each"
        )
    g = groups[0]
    if _is_kernel(spec):
        try:
            parts = [int(t, 0) for t in text.split(",")]
        except ValueError:
            parts = []
        want = 2 if spec == "kendall" else 1
        if len(parts) != want:
            what = "two integers x,y" if spec == "kendall" else "an integer"
            raise CircuitError(f"{flag} for {spec} must be {what}, got {text!r}")
        if spec == "kendall":  # pack_pair raises CircuitError naming the out-of-range field
            return {g.name: pack_pair(parts[0], parts[1], bits, signed)}
        v = parts[0]
        lo, hi = (-(1 << (g.width - 1)), (1 << (g.width - 1)) - 1) if g.signed else (0, (1 << g.width) - 1)
        if not lo <= v <= hi:
            raise CircuitError(
                f"{flag} {v} is out of range for {g.width}-bit {'signed' if g.signed else 'unsigned'} [{lo}, {hi}]"
            )
        return {g.name: v}
    return {g.name: parse_hex_input(text, g.width, g.name)}


def _cot_source(circuit: Circuit) -> str:
    """A session of the command line (one execution): :func:`pairwise.mpc.twopc.fresh_cot` (both parties derive
    it from the circuit; ``BASE_COT_MAX_BITS`` is re-exported from there)."""
    return fresh_cot(circuit)


def _ot_batch(circuit: Circuit) -> int:
    """COT batch sized to the evaluator's input (both sides compute the same value)."""
    n = sum(g.width for g in circuit.groups_of(EVALUATOR))
    return max(1024, -(-n // 1024) * 1024) if n <= 1 << 16 else 1 << 16


#: What each kernel computes: x is the garbler's input, y the evaluator's (circuits.kernels).
FORMULAS = {
    "gini": "|x - y|",
    "auc": "2[x > y] + [x == y]",
    "kendall": "sign(x1 - x2) * sign(y1 - y2)",
    "variance": "floor((x - y)^2 / 2)",
    "collision": "[x == y]",
}


def describe(circuit: Circuit, spec: str, bits: int, signed: bool) -> str:
    """One line saying what the computation is and whose input is which (JSON key ``computed``)."""
    if spec == "kendall":
        return (
            f"{FORMULAS[spec]} on {bits}-bit {'signed' if signed else 'unsigned'} values: "
            f"(x1, y1) = garbler's pair, (x2, y2) = evaluator's pair"
        )
    if _is_kernel(spec):
        return (
            f"{FORMULAS[spec]} on {bits}-bit {'signed' if signed else 'unsigned'} values: "
            f"x = garbler's input, y = evaluator's input"
        )
    if spec == "aes128":
        return "AES-128 encryption: output = AES(key, plaintext), key = garbler's input, plaintext = evaluator's input"
    ins = ", ".join(_compact_groups([(g.name, f"{g.party.value}, ", g.width, g.signed) for g in circuit.inputs]))
    outs = ", ".join(_compact_groups([(g.name, "", g.width, g.signed) for g in circuit.outputs]))
    kind = (
        f"circuit {circuit.name} built by {spec}" if builder_spec(spec) else f"Bristol Fashion circuit {circuit.name}"
    )
    return f"{kind}: {ins} -> {outs}"


def _compact_groups(groups: list[tuple[str, str, int, bool]]) -> list[str]:
    """'x0 .. x7 (garbler, 8 x 16-bit signed)' for runs of numbered groups of one kind, else one entry each."""
    out, i = [], 0
    while i < len(groups):
        name, owner, width, signed = groups[i]
        m = re.fullmatch(r"(.*?)(\[?)(\d+)(\]?)", name)
        j = i + 1
        if m:
            while j < len(groups):
                n2, o2, w2, s2 = groups[j]
                want = f"{m[1]}{m[2]}{int(m[3]) + (j - i)}{m[4]}"
                if (n2, o2, w2, s2) != (want, owner, width, signed):
                    break
                j += 1
        kind = f"{width}-bit{' signed' if signed else ''}"
        if j - i > 2:
            out.append(f"{name} .. {groups[j - 1][0]} ({owner}{j - i} x {kind})")
        else:
            j = i + 1
            out.append(f"{name} ({owner}{kind})")
        i = j
    return out


def _plain(v):
    """An output value as JSON: an int, or a list of ints for a SIMD batch."""
    return int(v) if isinstance(v, (int, np.integer)) else [int(x) for x in v]


def _report(args, circuit: Circuit, res, setup_s: float, role: str, ch) -> None:
    outs = named = None
    if res.outputs is not None:
        named = {g.name: _plain(o) for g, o in zip(circuit.outputs, res.outputs)}  # signed where declared
        if _is_kernel(args.circuit) or builder_spec(args.circuit) is not None:
            outs = [_plain(o) for o in res.outputs]
        else:  # Bristol files: hex, as before (a batch: one hex string per instance)
            outs = [
                format_hex_output(int(o), g.width)
                if isinstance(o, (int, np.integer))
                else [format_hex_output(int(x), g.width) for x in o]
                for o, g in zip(res.outputs, circuit.outputs)
            ]
    d = {
        "role": role,
        "circuit": circuit.name,
        "computed": describe(circuit, args.circuit, args.bits, args.signed),
        "outputs": outs,
        "named_outputs": named,
        "and_gates": res.and_gates,
        "bytes_sent": res.bytes_sent,
        "bytes_received": res.bytes_received,
        "messages_sent": res.messages_sent,
        "messages_received": res.messages_received,
        "seconds": round(res.seconds + setup_s, 6),
        "setup_seconds": round(setup_s, 6),
        "tls": ch.secure,
        "peer_name": ch.peer_identity.name if ch.peer_identity is not None else None,
    }
    if args.json:
        print(json.dumps(d))
    else:
        print(f"{role}: {circuit.name}")
        print(f"  computed        {d['computed']}")
        print(f"  outputs         {outs if outs is not None else '(not revealed to this party)'}")
        for name, v in (named or {}).items():  # per named output group, signed where declared
            print(f"    {name:<13} {v}")
        for k in (
            "and_gates",
            "bytes_sent",
            "bytes_received",
            "messages_sent",
            "messages_received",
            "seconds",
            "setup_seconds",
        ):
            print(f"  {k:<15} {d[k]}")
        print(
            f"  {'peer':<15} {ch.peer_identity if ch.peer_identity is not None else '(plaintext, loopback)'} at {ch.peer}"
        )
    sys.stdout.flush()


def _run_party(args, party) -> int:
    tls = tls_from_args(args)
    if args.peer is not None and tls is None:
        raise ValueError("--peer NAME needs --tls DIR --name NAME (a plaintext peer has no verified name)")
    circuit = load_circuit(args.circuit, args.bits, args.signed)
    inputs = parse_party_input(circuit, args.circuit, party, args.input, args.bits, args.signed)
    _ = circuit.levels  # compute the (cached) schedule before any socket opens: off the peer's clock
    # one execution: the numpy program beats loading the compiled loops (0.4-0.9 s per process, mpc.jit),
    # which pay off only over hundreds of executions (benchmarks/twoparty.py, a long-running party)
    from pairwise.mpc import jit

    with jit.disabled():
        return _run_session(args, party, tls, circuit, inputs)


def _run_session(args, party, tls, circuit: Circuit, inputs) -> int:
    """Connect, set up the session and run the one execution (see :func:`_run_party`)."""
    from pairwise.mpc.channel import TCPChannel, TCPListener
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest

    session_args = {"ot_batch": _ot_batch(circuit), "extra": circuit_digest(circuit), "cot": _cot_source(circuit)}
    t0 = time.perf_counter()
    if party == GARBLER:
        host, port = _hostport(args.listen)
        with TCPListener(host, port, tls=tls, insecure=args.insecure) as lst:
            # a stray connection is rejected and the garbler keeps waiting for its evaluator
            accept = args.timeout if args.connect_timeout is None else args.connect_timeout
            ch, s = lst.accept_first(
                accept,
                lambda c: _stop_on_mismatch(lambda: GarblerSession(c, **session_args), circuit),
                recv_timeout=args.timeout,
                peer_names=args.peer,
                on_reject=lambda msg: print(f"pairwise: {msg}", file=sys.stderr, flush=True),
            )
        t0 = time.perf_counter() - s.setup_seconds
    else:
        host, port = _hostport(args.connect)
        ch = TCPChannel.connect(
            host,
            port,
            deadline=args.connect_timeout,
            timeout=args.timeout,
            tls=tls,
            insecure=args.insecure,
            peer_names=args.peer,
        )
        s = None
    try:
        if s is None:
            t0 = time.perf_counter()
            s = _stop_on_mismatch(lambda: EvaluatorSession(ch, **session_args), circuit)
        setup = time.perf_counter() - t0
        res = s.run(circuit, inputs, output=args.output)
        # report totals for the whole session, setup traffic included
        st = ch.stats()
        res.bytes_sent, res.bytes_received = st["bytes_sent"], st["bytes_received"]
        res.messages_sent, res.messages_received = st["messages_sent"], st["messages_received"]
        _report(args, circuit, res, setup, party.value, ch)
    finally:
        ch.close()
    return 0


class PeerMismatch(PairwiseError, RuntimeError):
    """The peer runs the pairwise runtime with another circuit or version: both parties stop (exit status 2)."""


def _stop_on_mismatch(make, circuit: Circuit | None = None):
    """Run ``make()``; a circuit or version mismatch becomes :class:`PeerMismatch`, which is no channel error,
    so the listener stops at once instead of waiting for another evaluator (strays still do not stop it)."""
    from pairwise.mpc.twopc import ExecutionMismatch, VersionMismatch

    try:
        return make()
    except (ExecutionMismatch, VersionMismatch) as exc:
        mine = f" (this side runs {circuit.name}: {circuit.n_and} AND gates)" if circuit is not None else ""
        raise PeerMismatch(f"{exc}{mine}") from exc


def cmd_garbler(args) -> int:
    return _run_party(args, GARBLER)


def cmd_evaluator(args) -> int:
    return _run_party(args, EVALUATOR)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _demo_inputs(text: str) -> list[str]:
    """A demo input: one value, or NAME=values groups separated by ';'."""
    return [t for t in text.split(";") if t.strip()] if "=" in text else [text]


def cmd_demo(args) -> int:
    from pairwise.mpc.tls import throwaway_credentials
    from pairwise.protocols.processes import spawn, terminate

    circuit = load_circuit(args.circuit, args.bits, args.signed)
    if _is_kernel(args.circuit):
        small = args.bits < 12  # 1234 needs 11 bits (12 signed): 8-bit demos get inputs that fit
        gi = args.garbler_input or ("12,7" if args.circuit == "kendall" else "123" if small else "1234")
        ei = args.evaluator_input or ("3,9" if args.circuit == "kendall" else "98" if small else "987")
    elif builder_spec(args.circuit) is not None and not (args.garbler_input and args.evaluator_input):
        raise ValueError(
            "demo 2pc with a builder circuit needs --garbler-input and --evaluator-input "
            "(NAME=v1,v2,... per input group, ';' between groups)"
        )
    else:
        gi = args.garbler_input or "000102030405060708090a0b0c0d0e0f"
        ei = args.evaluator_input or "00112233445566778899aabbccddeeff"
    # validate both inputs here so a typo fails before any process starts
    gis, eis = _demo_inputs(gi), _demo_inputs(ei)
    parse_party_input(circuit, args.circuit, GARBLER, gis, args.bits, args.signed, "--garbler-input")
    parse_party_input(circuit, args.circuit, EVALUATOR, eis, args.bits, args.signed, "--evaluator-input")
    port = _free_port()
    common = [
        "--circuit",
        args.circuit,
        "--bits",
        str(args.bits),
        "--json",
        "--timeout",
        str(args.timeout),
        "--connect-timeout",
        str(args.connect_timeout),
    ]
    if args.signed:
        common.append("--signed")
    exe = [sys.executable, "-m", "pairwise", "2pc"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = []
    # a throwaway CA: both parties authenticate each other and pin the other's name
    with throwaway_credentials([("garbler", "client"), ("evaluator", "client")]) as certs:
        try:
            g = spawn(
                exe
                + ["garbler", "--listen", f"127.0.0.1:{port}", *[f"--input={v}" for v in gis], "--peer", "evaluator"]
                + transport_argv(certs, "garbler")
                + common,
                **pipes,
            )
            procs.append(g)
            e = spawn(
                exe
                + ["evaluator", "--connect", f"127.0.0.1:{port}", *[f"--input={v}" for v in eis], "--peer", "garbler"]
                + transport_argv(certs, "evaluator")
                + common,
                **pipes,
            )
            procs.append(e)
            limit = args.connect_timeout + 4 * args.timeout + 60  # each party gives up on its own long before this
            try:
                gout, gerr = g.communicate(timeout=limit)
                eout, eerr = e.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"demo: a party did not finish within {limit:g} s") from None
        finally:
            terminate(procs)  # also on Ctrl-C / SIGTERM: no party outlives the demo
    if g.returncode or e.returncode:
        raise RuntimeError(
            f"demo failed: garbler rc={g.returncode}: {gerr.strip()} | evaluator rc={e.returncode}: {eerr.strip()}"
        )
    gd, ed = json.loads(gout.strip().splitlines()[-1]), json.loads(eout.strip().splitlines()[-1])
    if args.json:
        print(
            json.dumps(
                {"garbler": gd, "evaluator": ed, "inputs": {"garbler": gi, "evaluator": ei}, "computed": gd["computed"]}
            )
        )
    else:
        print(f"two processes on 127.0.0.1:{port} in mutual TLS 1.3 (throwaway CA), circuit {gd['circuit']}")
        print(f"  computed  {gd['computed']}")
        print(f"  inputs    garbler {gi}, evaluator {ei}")
        print(f"  output    {', '.join(map(str, gd['outputs']))}")
        for d in (gd, ed):
            print(
                f"  {d['role']:<9} outputs={d['outputs']} and_gates={d['and_gates']} sent={d['bytes_sent']} "
                f"received={d['bytes_received']} messages={d['messages_sent']}/{d['messages_received']} "
                f"seconds={d['seconds']} peer={d['peer_name']}"
            )
    return 0
