"""The neighbouring-datasets comparison of the privacy audit: run a command on D and D', compare what it publishes."""

from __future__ import annotations

import json

from pairwise.cli import main


def _drop(d, dotted: tuple[str, ...]):
    """A copy of ``d`` without the (dotted) keys."""
    out = dict(d)
    for key in dotted:
        head, _, rest = key.partition(".")
        if head in out:
            if rest and isinstance(out[head], dict):
                out[head] = _drop(out[head], (rest,))
            elif not rest:
                del out[head]
    return out


def _has(d, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return False
        d = d[part]
    return True


def _get(d, dotted: str):
    for part in dotted.split("."):
        d = d[part]
    return d


def assert_same_public(a: dict, b: dict, dp_keys, not_private, measured=(), tolerance=0):
    """Everything but DP outputs and documented non-private keys must be equal on D and D'."""
    for key in dp_keys:  # a noisy output is published on both or on neither (no data-dependent shape)
        assert _has(a, key) == _has(b, key), key
    assert any(_has(a, key) for key in dp_keys)
    pa = _drop(a, tuple(dp_keys) + tuple(not_private) + tuple(measured))
    pb = _drop(b, tuple(dp_keys) + tuple(not_private) + tuple(measured))
    diff = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    assert not diff, "published keys that depend on one record: " + ", ".join(
        f"{k}: {pa.get(k)!r} vs {pb.get(k)!r}" for k in diff
    )
    for key in measured:
        assert abs(_get(a, key) - _get(b, key)) <= tolerance, key


def run_json(capsys, argv) -> dict:
    code = main(list(argv) + ["--json"])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    return json.loads(out.out.strip().splitlines()[-1])


def write_csv(path, header, *cols) -> str:
    path.write_text(
        ",".join(header) + "\n" + "".join(",".join(repr(float(v)) for v in row) + "\n" for row in zip(*cols))
    )
    return str(path)


def run_on_shipped_neighbours(capsys, monkeypatch, argv, column: str, value: float) -> tuple[dict, dict]:
    """``argv`` on the shipped data, then with row 0 of ``column`` moved to ``value`` (D and D')."""
    from pairwise.protocols import datasets

    real = datasets.load_dataset
    outs = []
    for moved in (False, True):

        def load(name, _moved=moved):
            d = real(name)
            if _moved:
                d[column] = d[column].copy()
                d[column][0] = value
            return d

        monkeypatch.setattr(datasets, "load_dataset", load)
        outs.append(run_json(capsys, argv))
    return outs[0], outs[1]
