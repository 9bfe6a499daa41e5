"""``pairwise 2pc garbler|evaluator`` and ``pairwise demo 2pc``: semi-honest Yao between two processes.

Commands
    ``pairwise 2pc garbler --listen HOST:PORT --circuit (KERNEL|aes128|FILE) [--bits W] [--signed] --input V
    [--tls DIR --name NAME [--peer NAME] | --insecure] [--timeout S] [--connect-timeout S] [--json]``
    ``pairwise 2pc evaluator --connect HOST:PORT --circuit ... --input V [--tls DIR --name NAME [--peer NAME]]
    [--timeout S] [--connect-timeout S] [--json]``
        V is the party's input: for a kernel, an integer (for ``kendall``, the
        pair ``x,y``); for a Bristol file, the hex of the party's input group
        (garbler: group 1, evaluator: group 2), big-endian as in SOURCE.md.
        Each side prints the outputs, AND gates, bytes sent and received,
        messages and seconds, and what was computed (JSON keys ``computed``, ``outputs``, ``and_gates``,
        ``bytes_sent``, ``bytes_received``, ``messages_sent``,
        ``messages_received``, ``seconds``, ``setup_seconds``, ``tls``,
        ``peer_name``).  Kernel outputs print as integers, Bristol outputs as hex.
    ``pairwise demo 2pc [--circuit ...] [--garbler-input V] [--evaluator-input V] [--json]``
        Makes a throwaway CA in a temporary directory, starts both parties as
        two processes on loopback in mutual TLS, and prints both summaries.

Transport (:mod:`pairwise.protocols.transport`)
    ``--tls DIR --name NAME``: mutual TLS 1.3 with certificates from
    ``pairwise certs create`` (any role); ``--peer NAME`` also requires the
    other party's certificate to be NAME.  Without ``--tls`` the parties
    speak plaintext, allowed on loopback only unless ``--insecure``.
    ``--connect-timeout``: how long the evaluator retries the connection
    (default 10 s; ``--connect-deadline`` is its deprecated spelling) and the
    garbler waits for a valid evaluator (default: ``--timeout``); ``--timeout``
    bounds every wait on a message.
    The garbler keeps listening until ``--connect-timeout`` when a connection fails
    TLS, admission or the session handshake (a stray connection, a port
    scanner, an evaluator with another circuit): it prints each rejection
    on stderr and serves the first valid evaluator.

Security model: semi-honest Yao (:mod:`pairwise.mpc.twopc`); inputs are range-checked
before the socket is opened, so a bad input never moves a secret.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit, CircuitError
from pairwise.circuits.kernels import KERNELS, pack_pair
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
    p.add_argument("--circuit", required=True, help=f"kernel ({', '.join(KERNELS)}), aes128, or a Bristol Fashion file")
    p.add_argument("--bits", type=int, default=32, help="kernel width (8..64), default 32")
    p.add_argument("--signed", action="store_true", help="kernel inputs are signed")
    p.add_argument("--input", required=True, help="this party's input (integer for kernels, x,y for kendall, hex for files)")
    p.add_argument("--output", choices=["both", "evaluator", "garbler"], default="both", help="who learns the output")
    add_json(p)
    add_transport_args(p)
    p.add_argument("--peer", metavar="NAME", help="with --tls: the other party's certificate name must be NAME")


def register(root, groups) -> None:
    p = root.add_parser("2pc", help="run one party of a two-party garbled-circuit computation")
    sub = p.add_subparsers(dest="twopc_command", metavar="ROLE")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])
    g = sub.add_parser("garbler", help="garbler: listens for the evaluator")
    g.add_argument("--listen", required=True, metavar="HOST:PORT",
                   help="address to listen on for the evaluator, e.g. 127.0.0.1:9000 (0.0.0.0 for all interfaces)")
    _add_common(g)
    g.add_argument("--timeout", type=seconds, default=30.0, metavar="S",
                   help="seconds to wait for the evaluator on any message (default 30)")
    g.add_argument("--connect-timeout", type=seconds, default=None, metavar="S",
                   help="seconds to wait for a valid evaluator to connect and finish the setup (default: --timeout)")
    g.set_defaults(func=cmd_garbler)
    e = sub.add_parser("evaluator", help="evaluator: connects to the garbler")
    e.add_argument("--connect", required=True, metavar="HOST:PORT",
                   help="the garbler's address, e.g. 127.0.0.1:9000 (retried until --connect-timeout)")
    _add_common(e)
    add_timeouts(e, timeout=30.0, connect_timeout=10.0, timeout_what="the garbler",
                 old_connect=("--connect-deadline",))
    e.set_defaults(func=cmd_evaluator)

    d = groups["demo"].add_parser("2pc", help="garbler and evaluator as two processes on loopback")
    d.add_argument("--circuit", default="gini",
                   help=f"kernel ({', '.join(KERNELS)}), aes128, or a Bristol Fashion file (default gini)")
    d.add_argument("--bits", type=int, default=32, help="kernel width (8..64), default 32")
    d.add_argument("--signed", action="store_true", help="kernel inputs are signed")
    d.add_argument("--garbler-input", default=None, metavar="V",
                   help="the garbler's input (default: a value that fits --bits, e.g. 1234; FIPS-197 key for aes128)")
    d.add_argument("--evaluator-input", default=None, metavar="V",
                   help="the evaluator's input (default: a value that fits --bits, e.g. 987; FIPS-197 plaintext)")
    add_timeouts(d, timeout=30.0, connect_timeout=30.0, timeout_what="the other party")
    add_json(d)
    d.set_defaults(func=cmd_demo)


def _is_kernel(spec: str) -> bool:
    return spec in KERNELS


def parse_party_input(circuit: Circuit, spec: str, party, text: str, bits: int, signed: bool,
                      flag: str = "--input") -> dict:
    """The party's input as {group: int}, validated against the circuit before anything is sent; errors name ``flag``."""
    groups = circuit.groups_of(party)
    if len(groups) != 1:
        raise CircuitError(f"{party.value} owns {len(groups)} input groups; this command takes exactly one")
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
            raise CircuitError(f"{flag} {v} is out of range for {g.width}-bit {'signed' if g.signed else 'unsigned'} [{lo}, {hi}]")
        return {g.name: v}
    return {g.name: parse_hex_input(text, g.width, g.name)}


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
        return (f"{FORMULAS[spec]} on {bits}-bit {'signed' if signed else 'unsigned'} values: "
                f"(x1, y1) = garbler's pair, (x2, y2) = evaluator's pair")
    if _is_kernel(spec):
        return (f"{FORMULAS[spec]} on {bits}-bit {'signed' if signed else 'unsigned'} values: "
                f"x = garbler's input, y = evaluator's input")
    if spec == "aes128":
        return "AES-128 encryption: output = AES(key, plaintext), key = garbler's input, plaintext = evaluator's input"
    ins = ", ".join(f"{g.name} ({g.party.value}, {g.width} bits)" for g in circuit.inputs)
    outs = ", ".join(f"{g.name} ({g.width} bits)" for g in circuit.outputs)
    return f"Bristol Fashion circuit {circuit.name}: {ins} -> {outs}"


def _report(args, circuit: Circuit, res, setup_s: float, role: str, ch) -> None:
    outs = None
    if res.outputs is not None:
        if _is_kernel(args.circuit):
            outs = [int(o) for o in res.outputs]
        else:
            outs = [format_hex_output(int(o), g.width) for o, g in zip(res.outputs, circuit.outputs)]
    d = {
        "role": role,
        "circuit": circuit.name,
        "computed": describe(circuit, args.circuit, args.bits, args.signed),
        "outputs": outs,
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
        for k in ("and_gates", "bytes_sent", "bytes_received", "messages_sent", "messages_received", "seconds", "setup_seconds"):
            print(f"  {k:<15} {d[k]}")
        print(f"  {'peer':<15} {ch.peer_identity if ch.peer_identity is not None else '(plaintext, loopback)'} at {ch.peer}")
    sys.stdout.flush()


def _run_party(args, party) -> int:
    tls = tls_from_args(args)
    if args.peer is not None and tls is None:
        raise ValueError("--peer NAME needs --tls DIR --name NAME (a plaintext peer has no verified name)")
    circuit = resolve_circuit(args.circuit, args.bits, args.signed)
    inputs = parse_party_input(circuit, args.circuit, party, args.input, args.bits, args.signed)
    circuit.levels  # compute the (cached) schedule before any socket opens: off the peer's clock
    # one execution: the numpy program beats loading the compiled loops (0.4-0.9 s per process, mpc.jit),
    # which pay off only over hundreds of executions (benchmarks/twoparty.py, a long-running party)
    from pairwise.mpc import jit

    with jit.disabled():
        return _run_session(args, party, tls, circuit, inputs)


def _run_session(args, party, tls, circuit: Circuit, inputs) -> int:
    """Connect, set up the session and run the one execution (see :func:`_run_party`)."""
    from pairwise.mpc.channel import TCPChannel, TCPListener
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest

    session_args = {"ot_batch": _ot_batch(circuit), "extra": circuit_digest(circuit)}
    t0 = time.perf_counter()
    if party == GARBLER:
        host, port = _hostport(args.listen)
        with TCPListener(host, port, tls=tls, insecure=args.insecure) as lst:
            # a stray connection is rejected and the garbler keeps waiting for its evaluator
            accept = args.timeout if args.connect_timeout is None else args.connect_timeout
            ch, s = lst.accept_first(accept, lambda c: GarblerSession(c, **session_args),
                                     recv_timeout=args.timeout, peer_names=args.peer,
                                     on_reject=lambda msg: print(f"pairwise: {msg}", file=sys.stderr, flush=True))
        t0 = time.perf_counter() - s.setup_seconds
    else:
        host, port = _hostport(args.connect)
        ch = TCPChannel.connect(host, port, deadline=args.connect_timeout, timeout=args.timeout, tls=tls,
                                insecure=args.insecure, peer_names=args.peer)
        s = None
    try:
        if s is None:
            t0 = time.perf_counter()
            s = EvaluatorSession(ch, **session_args)
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


def cmd_garbler(args) -> int:
    return _run_party(args, GARBLER)


def cmd_evaluator(args) -> int:
    return _run_party(args, EVALUATOR)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_demo(args) -> int:
    from pairwise.mpc.tls import throwaway_credentials
    from pairwise.protocols.processes import spawn, terminate

    circuit = resolve_circuit(args.circuit, args.bits, args.signed)
    if _is_kernel(args.circuit):
        small = args.bits < 12  # 1234 needs 11 bits (12 signed): 8-bit demos get inputs that fit
        gi = args.garbler_input or ("12,7" if args.circuit == "kendall" else "123" if small else "1234")
        ei = args.evaluator_input or ("3,9" if args.circuit == "kendall" else "98" if small else "987")
    else:
        gi = args.garbler_input or "000102030405060708090a0b0c0d0e0f"
        ei = args.evaluator_input or "00112233445566778899aabbccddeeff"
    # validate both inputs here so a typo fails before any process starts
    parse_party_input(circuit, args.circuit, GARBLER, gi, args.bits, args.signed, "--garbler-input")
    parse_party_input(circuit, args.circuit, EVALUATOR, ei, args.bits, args.signed, "--evaluator-input")
    port = _free_port()
    common = ["--circuit", args.circuit, "--bits", str(args.bits), "--json", "--timeout", str(args.timeout),
              "--connect-timeout", str(args.connect_timeout)]
    if args.signed:
        common.append("--signed")
    exe = [sys.executable, "-m", "pairwise", "2pc"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = []
    # a throwaway CA: both parties authenticate each other and pin the other's name
    with throwaway_credentials([("garbler", "client"), ("evaluator", "client")]) as certs:
        try:
            g = spawn(exe + ["garbler", "--listen", f"127.0.0.1:{port}", f"--input={gi}", "--peer", "evaluator"]
                      + transport_argv(certs, "garbler") + common, **pipes)
            procs.append(g)
            e = spawn(exe + ["evaluator", "--connect", f"127.0.0.1:{port}", f"--input={ei}", "--peer", "garbler"]
                      + transport_argv(certs, "evaluator") + common, **pipes)
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
        raise RuntimeError(f"demo failed: garbler rc={g.returncode}: {gerr.strip()} | evaluator rc={e.returncode}: {eerr.strip()}")
    gd, ed = json.loads(gout.strip().splitlines()[-1]), json.loads(eout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"garbler": gd, "evaluator": ed, "inputs": {"garbler": gi, "evaluator": ei},
                          "computed": gd["computed"]}))
    else:
        print(f"two processes on 127.0.0.1:{port} in mutual TLS 1.3 (throwaway CA), circuit {gd['circuit']}")
        print(f"  computed  {gd['computed']}")
        print(f"  inputs    garbler {gi}, evaluator {ei}")
        print(f"  output    {', '.join(map(str, gd['outputs']))}")
        for d in (gd, ed):
            print(f"  {d['role']:<9} outputs={d['outputs']} and_gates={d['and_gates']} sent={d['bytes_sent']} "
                  f"received={d['bytes_received']} messages={d['messages_sent']}/{d['messages_received']} "
                  f"seconds={d['seconds']} peer={d['peer_name']}")
    return 0
