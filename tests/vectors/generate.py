"""Golden vectors of the project's versioned byte formats: ``python tests/vectors/generate.py`` rewrites them.

What it does
    Builds, deterministically, one JSON file per format in this folder:

    ==========================  ==================================================
    ``fss_keys_v1.json``        DPF and DCF keys, ``fss/keys.py`` FORMAT_VERSION 1
    ``garbled_header_v3.json``  the garbled-circuit header (magic ``PWGC``),
                                ``mpc/garble/format.py`` version 3
    ``mshare_v1.json``          the ECDF ``mshare`` client keys,
                                ``protocols/ecdf/shares.py`` MSHARE_VERSION 1
    ``ir_v1.json``              the circuit IR's content hash,
                                ``circuits/ir.py`` IR_VERSION 1
    ``hello_v1.json``           the channel hello (magic ``PAIRWISE``),
                                ``mpc/channel/hello.py`` PROTOCOL_VERSION 1
    ``exec_header_v5.json``     the Yao runtime's execution header (magic
                                ``EXEC``) and version tag, ``mpc/twopc/wire.py``
                                ``pairwise-yao/5``
    ``baseot_v3.json``          the base-OT messages (Chou-Orlandi on
                                edwards25519), ``mpc/baseot.py`` OT_VERSION 3
    ==========================  ==================================================

    ``tests/vectors/test_vectors.py`` checks them both ways: encoding the
    recorded inputs gives the recorded bytes, and decoding the recorded bytes
    gives the recorded fields (and, for keys, shares that reconstruct to the
    function, checked with Python ints).  A change of format therefore fails
    the test until the version is bumped and the vectors are regenerated; run
    this script only for a deliberate format change.

Randomness
    The formats carry random seeds, which the library draws from the OS
    CSPRNG.  Here they come from :func:`fixed_blocks`, SHA-256 in counter mode
    over a label: fixed test values, never keys for real use.  The base OT's
    secrets (the sender's a, the receiver's b_j) come from :mod:`secrets` in
    the library; here :class:`FixedSecrets` stands in for that module, in this
    test-only generator alone.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent


def fixed_blocks(label: str, *shape: int) -> np.ndarray:
    """Deterministic uint64 blocks of shape ``(*shape, 2)`` from SHA-256(label || counter): test values only."""
    n = int(np.prod(shape, dtype=np.int64)) * 16
    out = b"".join(hashlib.sha256(f"{label}\0{i}".encode()).digest() for i in range((n + 31) // 32))[:n]
    return np.frombuffer(out, dtype="<u8").astype(np.uint64).reshape(*shape, 2)


@contextmanager
def fixed_random_blocks(module: str, label: str) -> Iterator[None]:
    """Replace ``random_blocks`` in ``module`` (the library's CSPRNG draw of seeds) by :func:`fixed_blocks`."""
    with mock.patch(f"{module}.random_blocks", lambda *shape: fixed_blocks(label, *shape)):
        yield


# ----------------------------------------------------------------------------- FSS keys
FSS_CASES: list[dict[str, Any]] = [
    {"kind": "dpf", "n": 1, "l": 8, "alphas": [1], "betas": [200]},
    {"kind": "dpf", "n": 5, "l": 16, "alphas": [0, 9, 31], "betas": [1, 65535, 12345]},
    {"kind": "dpf", "n": 8, "l": 64, "alphas": [200], "betas": [2**64 - 3]},
    {"kind": "dcf", "n": 4, "l": 8, "alphas": [0, 7, 15], "betas": [1, 255, 3], "comparison": "lt"},
    {"kind": "dcf", "n": 6, "l": 32, "alphas": [33], "betas": [2**31 + 5], "comparison": "le"},
    {"kind": "dcf", "n": 3, "l": 64, "alphas": [5, 2], "betas": [7, 2**63 - 1], "comparison": "gt"},
]


def fss_batches(case: dict[str, Any]):
    from pairwise.fss import dcf_gen_batch, dpf_gen_batch

    label = f"fss {case['kind']} n={case['n']} l={case['l']} {case['alphas']}"
    if case["kind"] == "dpf":
        with fixed_random_blocks("pairwise.fss.dpf", label):
            return dpf_gen_batch(case["alphas"], case["betas"], case["n"], case["l"])
    with fixed_random_blocks("pairwise.fss.dcf", label):
        return dcf_gen_batch(case["alphas"], case["betas"], case["n"], case["l"], comparison=case["comparison"])


def build_fss() -> dict[str, Any]:
    from pairwise.fss.keys import FORMAT_VERSION

    cases = []
    for case in FSS_CASES:
        k0, k1 = fss_batches(case)
        cases.append(
            {**case, "keys0": [b.hex() for b in k0.to_bytes_list()], "keys1": [b.hex() for b in k1.to_bytes_list()]}
        )
    return {
        "format": f"pairwise FSS key, version {FORMAT_VERSION} (fss/keys.py)",
        "version": FORMAT_VERSION,
        "cases": cases,
    }


# ----------------------------------------------------------------------------- garbled-circuit header
GARBLED_CASES: list[dict[str, Any]] = [
    {"circuit_hash": "00" * 32, "n_and": 0, "batch": 1, "chunk": 1, "instance_offset": 0, "tables": ""},
    {
        "circuit_hash": hashlib.sha256(b"a").hexdigest(),
        "n_and": 1,
        "batch": 2,
        "chunk": 1,
        "instance_offset": 7,
        "tables": bytes(range(64)).hex(),
    },
    {
        "circuit_hash": hashlib.sha256(b"b").hexdigest(),
        "n_and": 2**40,
        "batch": 2**20,
        "chunk": 2**19,
        "instance_offset": 2**62,
        "tables": None,
    },
]


def build_garbled_header() -> dict[str, Any]:
    from pairwise.mpc.garble.format import _VERSION, GarbledCircuit

    cases = []
    for case in GARBLED_CASES:
        gc = GarbledCircuit(
            case["circuit_hash"],
            case["n_and"],
            case["batch"],
            case["chunk"],
            case["instance_offset"],
            bytes.fromhex(case["tables"] or ""),
        )
        cases.append(
            {**case, "header": gc.header().hex(), "bytes": None if case["tables"] is None else gc.to_bytes().hex()}
        )
    return {
        "format": f"pairwise garbled circuit, version {_VERSION} (mpc/garble/format.py)",
        "version": _VERSION,
        "cases": cases,
    }


# ----------------------------------------------------------------------------- mshare keys
MSHARE_CASES: list[dict[str, Any]] = [
    {"m": 2, "n": 2, "l": 8, "values": [0, 3, 1], "weights": [1, 1, 255]},
    {"m": 3, "n": 3, "l": 12, "values": [7, 0, 5, 5], "weights": [1, 4095, 2, 3]},
    {"m": 2, "n": 1, "l": 64, "values": [1, 0], "weights": [2**63 - 1, 1]},
]


def mshare_keys(case: dict[str, Any]) -> list[list[bytes]]:
    from pairwise.protocols.ecdf.shares import mshare_client_keys

    with fixed_random_blocks("pairwise.protocols.ecdf.shares", f"mshare m={case['m']} n={case['n']} l={case['l']}"):
        return mshare_client_keys(
            case["values"], case["weights"], m=case["m"], domain_bits=case["n"], output_bits=case["l"]
        )


def build_mshare() -> dict[str, Any]:
    from pairwise.protocols.ecdf.shares import MSHARE_VERSION

    cases = [{**case, "keys": [[k.hex() for k in server] for server in mshare_keys(case)]} for case in MSHARE_CASES]
    return {
        "format": f"pairwise ECDF mshare key, version {MSHARE_VERSION} (protocols/ecdf/shares.py)",
        "version": MSHARE_VERSION,
        "cases": cases,
    }


# ----------------------------------------------------------------------------- circuit IR content hash
IR_CASES: list[dict[str, Any]] = [
    {"kernel": "gini", "bits": 8, "signed": False},
    {"kernel": "auc", "bits": 8, "signed": True},
    {"kernel": "kendall", "bits": 8, "signed": True},
    {"kernel": "collision", "bits": 16, "signed": False},
]


def build_ir() -> dict[str, Any]:
    from pairwise.circuits.ir import IR_VERSION
    from pairwise.circuits.kernels import build_kernel

    cases = []
    for case in IR_CASES:
        c = build_kernel(case["kernel"], case["bits"], case["signed"])
        cases.append(
            {**case, "n_and": c.n_and, "n_gates": c.n_gates, "n_wires": c.n_wires, "content_hash": c.content_hash}
        )
    return {
        "format": f"pairwise circuit IR content hash, version {IR_VERSION} (circuits/ir.py)",
        "version": IR_VERSION,
        "cases": cases,
    }


# ----------------------------------------------------------------------------- channel hello
HELLO_CASES: list[dict[str, Any]] = [
    {"role": "garbler", "session_id": b"vector-session".hex(), "extra": "", "nonce": bytes(range(16)).hex()},
    {"role": "evaluator", "session_id": b"s".hex(), "extra": b"pairwise-yao/4".hex() + "ab" * 32, "nonce": "ff" * 16},
    {"role": "server-3", "session_id": ("00" * 1024), "extra": "01" * 256, "nonce": "5a" * 16},
]


def build_hello() -> dict[str, Any]:
    from pairwise.mpc.channel.hello import MAGIC, PROTOCOL_VERSION, Hello

    cases = []
    for case in HELLO_CASES:
        h = Hello(
            role=case["role"],
            session_id=bytes.fromhex(case["session_id"]),
            extra=bytes.fromhex(case["extra"]),
            nonce=bytes.fromhex(case["nonce"]),
        )
        cases.append({**case, "bytes": h.encode().hex()})
    return {
        "format": f"pairwise channel hello, version {PROTOCOL_VERSION} (mpc/channel/hello.py)",
        "magic": MAGIC.decode(),
        "version": PROTOCOL_VERSION,
        "cases": cases,
    }


# ----------------------------------------------------------------------------- Yao execution header
EXEC_CASES: list[dict[str, Any]] = [
    {"kernel": "gini", "bits": 8, "signed": False, "batch": 1, "chunk": 1, "offset": 0, "output": "both"},
    {"kernel": "auc", "bits": 8, "signed": True, "batch": 1000, "chunk": 250, "offset": 2**40, "output": "evaluator"},
]


def build_exec_header() -> dict[str, Any]:
    from pairwise.circuits.kernels import build_kernel
    from pairwise.mpc.twopc.wire import RUNTIME_VERSION, VERSION_TAG, exec_header

    cases = []
    for case in EXEC_CASES:
        c = build_kernel(case["kernel"], case["bits"], case["signed"])
        raw = exec_header(c, case["batch"], case["chunk"], case["offset"], case["output"])
        cases.append({**case, "content_hash": c.content_hash, "n_and": c.n_and, "bytes": raw.hex()})
    return {
        "format": f"pairwise Yao execution header, {RUNTIME_VERSION.decode()} (mpc/twopc/wire.py)",
        "runtime_version": RUNTIME_VERSION.decode(),
        "version_tag": VERSION_TAG.decode(),
        "cases": cases,
    }


# ----------------------------------------------------------------------------- base OT (Chou-Orlandi)
BASEOT_CASES: list[dict[str, Any]] = [
    {"session_id": b"vector-session".hex(), "choices": [0, 1, 1], "chosen": False},
    {"session_id": b"run-7f3a/base-ot".hex(), "choices": [(i * 5 + i // 3) % 2 for i in range(33)], "chosen": True},
]


class FixedSecrets:
    """Stands in for :mod:`secrets` in ``pairwise.mpc.baseot`` while a vector is built: SHA-256 in counter
    mode over a label, so the OT secrets are fixed test values (never use them as keys)."""

    def __init__(self, label: str) -> None:
        self.label, self.count = label, 0

    def _next(self, n: int) -> bytes:
        out = b"".join(
            hashlib.sha256(f"{self.label}\0{self.count}\0{i}".encode()).digest() for i in range((n + 31) // 32)
        )[:n]
        self.count += 1
        return out

    def token_bytes(self, n: int) -> bytes:
        return self._next(n)

    def randbelow(self, k: int) -> int:
        return int.from_bytes(self._next(64), "little") % k  # 512 bits mod k: test values, bias irrelevant


def baseot_transcript(case: dict[str, Any]) -> tuple[list[tuple[str, bytes]], Any, Any]:
    """Run the case's base OT over a memory channel pair with fixed secrets: the frames in order
    ``(party, bytes)``, the sender's output and the receiver's output."""
    import threading

    from pairwise.mpc import baseot
    from pairwise.mpc.channel import MemoryChannel

    frames: list[tuple[str, bytes]] = []
    lock = threading.Lock()
    sch, rch = MemoryChannel.pair()
    for who, ch in (("sender", sch), ("receiver", rch)):

        def send(data, _orig=ch.send, _who=who):
            with lock:
                frames.append((_who, bytes(memoryview(data).cast("B"))))
            _orig(data)

        ch.send = send  # type: ignore[method-assign]
    sid = bytes.fromhex(case["session_id"])
    c = np.array(case["choices"], dtype=bool)
    m0, m1 = fixed_blocks(f"baseot m0 {sid!r}", c.size), fixed_blocks(f"baseot m1 {sid!r}", c.size)
    out: dict[str, Any] = {}

    def sender() -> None:
        s = baseot.BaseOTSender(sch, sid)
        out["sender"] = s.send(m0, m1) if case["chosen"] else s.send_random(c.size)

    with mock.patch.object(baseot, "secrets", FixedSecrets(f"baseot {sid!r}")):
        t = threading.Thread(target=sender)
        t.start()  # the sender draws a first, then waits; the receiver's draws follow in order
        try:
            r = baseot.BaseOTReceiver(rch, sid)
            got = r.recv(c) if case["chosen"] else r.recv_random(c)
        finally:
            t.join(60)
    return frames, out["sender"], (got, m0, m1)


def build_baseot() -> dict[str, Any]:
    from pairwise.mpc.baseot import CURVE, OT_VERSION

    def hexblocks(b):
        return [np.ascontiguousarray(r, dtype="<u8").tobytes().hex() for r in b]

    cases = []
    for case in BASEOT_CASES:
        sid = bytes.fromhex(case["session_id"])
        frames, sent, (got, m0, m1) = baseot_transcript(case)
        fs = FixedSecrets(f"baseot {sid!r}")
        a = fs.token_bytes(32)
        row = {**case, "sender_secret": a.hex(), "frames": [{"from": who, "bytes": raw.hex()} for who, raw in frames]}
        if case["chosen"]:
            row.update(m0=hexblocks(m0), m1=hexblocks(m1), received=hexblocks(got))
        else:
            k0, k1 = sent
            row.update(k0=hexblocks(k0), k1=hexblocks(k1), received=hexblocks(got))
        cases.append(row)
    return {
        "format": f"pairwise base OT, OT_VERSION {OT_VERSION} (mpc/baseot.py): Chou-Orlandi on {CURVE}",
        "version": OT_VERSION,
        "cases": cases,
    }


#: file name -> builder
BUILDERS = {
    "fss_keys_v1.json": build_fss,
    "garbled_header_v3.json": build_garbled_header,
    "mshare_v1.json": build_mshare,
    "ir_v1.json": build_ir,
    "hello_v1.json": build_hello,
    "exec_header_v5.json": build_exec_header,
    "baseot_v3.json": build_baseot,
}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str]) -> int:
    names = argv or list(BUILDERS)
    for name in names:
        (HERE / name).write_text(dumps(BUILDERS[name]()))
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
