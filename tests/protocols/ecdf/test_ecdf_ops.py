"""The ECDF requests as typed values: the bytes clients send, and what servers refuse before any handler runs.

Golden strings are the control frames the clients wrote as dict literals
before the request types existed (captured from a run of that code), so a
changed key order or spelling fails here.  Every field is fed values of the
wrong type (a ``bool`` is not an integer), out of range, or missing, and
must be refused with the error class the handlers raised before.
"""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwise.mpc.errors import ProtocolError
from pairwise.protocols.ecdf.ops import (
    REQUESTS,
    AbortRequest,
    AdoptRequest,
    CommitRequest,
    DiscardRequest,
    DropUploadRequest,
    GoRequest,
    LedgerRequest,
    LinkRequest,
    PeerHello,
    PointwiseRequest,
    PrepareRequest,
    SeriesSpec,
    StatusRequest,
    UploadRequest,
    UploadsRequest,
    VerifyHello,
    parse_request,
)
from pairwise.protocols.ecdf.wire import DatasetError, ECDFError, QueryRefused, UnknownDataset

UID = "0123456789abcdef0123456789abcdef"
RID = "00112233445566778899aabb"


def dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


UPLOAD = UploadRequest(
    dataset="d",
    scheme="vdpf",
    m=2,
    server_id=1,
    domain_bits=6,
    output_bits=32,
    series=(SeriesSpec("pos", 1), SeriesSpec("neg", 1), SeriesSpec("e1", 256), SeriesSpec("e0", 256)),
    chunks=(50,),
    upload_id=UID,
    append=True,
    meta={"a": 1},
)
POINTWISE = PointwiseRequest(
    dataset="p",
    scheme="pointwise",
    m=2,
    server_id=0,
    domain_bits=6,
    output_bits=32,
    series=(SeriesSpec("all", 1),),
    chunks=(50,),
    upload_id=UID,
    grid_bits=4,
    thresholds=tuple(range(16)),
    round="r1",
)
ECDF = PrepareRequest(
    kind="ecdf",
    rid=RID,
    dataset="d",
    series=("all",),
    epsilon=Fraction(1),
    grid_bits=4,
    thresholds=(1, 3),
    servers=(("127.0.0.1", 1000), ("127.0.0.1", 1001)),
)
HIER = PrepareRequest(
    kind="ecdf",
    rid=RID,
    dataset="d",
    series=("pos", "neg"),
    epsilon=Fraction(1, 2),
    mechanism="hierarchical",
    servers=(("127.0.0.1", 1000), ("127.0.0.1", 1001)),
)
COUNTS = PrepareRequest(
    kind="counts",
    rid=RID,
    dataset="m",
    series=("all",),
    cuts=(3, 9),
    epsilon_per_value=Fraction(1),
    tolerate=1,
    servers=(("127.0.0.1", 1000), ("127.0.0.1", 1001), ("127.0.0.1", 1002)),
)

GOLDEN = [
    (
        UPLOAD,
        '{"op":"upload","dataset":"d","scheme":"vdpf","m":2,"server_id":1,"domain_bits":6,"output_bits":32,'
        '"append":true,"meta":{"a":1},"series":[{"name":"pos","max_weight":1},{"name":"neg","max_weight":1},'
        '{"name":"e1","max_weight":256},{"name":"e0","max_weight":256}],"chunks":[50],"upload_id":"' + UID + '"}',
    ),
    (
        replace(UPLOAD, servers=(("127.0.0.1", 1000), ("127.0.0.1", 1001))),
        '{"op":"upload","dataset":"d","scheme":"vdpf","m":2,"server_id":1,"domain_bits":6,"output_bits":32,'
        '"append":true,"meta":{"a":1},"series":[{"name":"pos","max_weight":1},{"name":"neg","max_weight":1},'
        '{"name":"e1","max_weight":256},{"name":"e0","max_weight":256}],"chunks":[50],"upload_id":"' + UID + '",'
        '"servers":[["127.0.0.1",1000],["127.0.0.1",1001]]}',
    ),
    (VerifyHello(UID, (50, 7)), '{"op":"verify","upload_id":"' + UID + '","chunks":[50,7],"server_id":0}'),
    (
        POINTWISE,
        '{"op":"pointwise","dataset":"p","scheme":"pointwise","m":2,"server_id":0,"domain_bits":6,'
        '"output_bits":32,"grid_bits":4,"thresholds":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"round":"r1",'
        '"append":false,"meta":{},"series":[{"name":"all","max_weight":1}],"chunks":[50],'
        '"upload_id":"' + UID + '"}',
    ),
    (CommitRequest(UID, 3), '{"op":"commit","upload_id":"' + UID + '","drop":3}'),
    (DiscardRequest(), '{"op":"discard"}'),
    (StatusRequest(), '{"op":"status","dataset":null}'),
    (StatusRequest("d"), '{"op":"status","dataset":"d"}'),
    (
        ECDF,
        '{"kind":"ecdf","series":["all"],"epsilon":"1","mechanism":"paper","grid_bits":4,"tolerate":0,'
        '"thresholds":[1,3],"op":"prepare","rid":"' + RID + '","dataset":"d",'
        '"servers":[["127.0.0.1",1000],["127.0.0.1",1001]]}',
    ),
    (
        HIER,
        '{"kind":"ecdf","series":["pos","neg"],"epsilon":"1/2","mechanism":"hierarchical","grid_bits":null,'
        '"tolerate":0,"thresholds":null,"op":"prepare","rid":"' + RID + '","dataset":"d",'
        '"servers":[["127.0.0.1",1000],["127.0.0.1",1001]]}',
    ),
    (
        COUNTS,
        '{"kind":"counts","series":["all"],"cuts":[3,9],"epsilon_per_value":"1","grid_bits":null,"tolerate":1,'
        '"op":"prepare","rid":"' + RID + '","dataset":"m",'
        '"servers":[["127.0.0.1",1000],["127.0.0.1",1001],["127.0.0.1",1002]]}',
    ),
    (LinkRequest(), '{"op":"link"}'),
    (GoRequest(), '{"op":"go"}'),
    (AbortRequest(), '{"op":"abort"}'),
    (LedgerRequest("d", 2000), '{"op":"ledger","dataset":"d","offset":2000}'),
    (AdoptRequest("d", ((RID, Fraction(3, 5)),)), '{"op":"adopt","dataset":"d","entries":[["' + RID + '","3/5"]]}'),
    (UploadsRequest("d"), '{"op":"uploads","dataset":"d"}'),
    (DropUploadRequest("d", UID), '{"op":"drop_upload","dataset":"d","upload_id":"' + UID + '"}'),
    (PeerHello(RID), '{"op":"peer","rid":"' + RID + '","server_id":0}'),
]


@pytest.mark.parametrize(
    "request_, wire", GOLDEN, ids=[type(r).__name__ + "-" + str(i) for i, (r, _) in enumerate(GOLDEN)]
)
def test_requests_keep_the_bytes_of_the_dict_literals_and_parse_back(request_, wire):
    assert dumps(request_.to_json()) == wire
    back = type(request_).from_json(json.loads(wire))
    assert back == request_ if not isinstance(request_, UploadRequest) else back.to_json() == request_.to_json()
    if not isinstance(request_, (PeerHello, VerifyHello)):  # read by the peer hub, not by parse_request
        assert type(parse_request(json.loads(wire))) is type(request_)


def test_every_client_and_querier_op_has_a_type():
    assert set(REQUESTS) == {
        "upload",
        "pointwise",
        "commit",
        "discard",
        "status",
        "prepare",
        "link",
        "go",
        "abort",
        "ledger",
        "adopt",
        "uploads",
        "drop_upload",
    }
    with pytest.raises(QueryRefused, match="unknown operation 'steal'"):
        parse_request({"op": "steal"})
    with pytest.raises(QueryRefused, match="unknown operation None"):
        parse_request({})


def _with(base: dict, **change) -> dict:
    out = dict(base)
    for k, v in change.items():
        if v is _DROP:
            out.pop(k, None)
        else:
            out[k] = v
    return out


_DROP = object()


@pytest.mark.parametrize("key", ["m", "server_id", "domain_bits", "output_bits"])
@pytest.mark.parametrize("bad", [True, False, 2.0, "2", None, -1, 10**6])
def test_upload_integers_refuse_bools_floats_and_out_of_range(key, bad):
    with pytest.raises(QueryRefused, match=f"{key} must be an integer in"):
        UploadRequest.from_json(_with(UPLOAD.to_json(), **{key: bad}))


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"dataset": "a b"}, DatasetError, "dataset id must be"),
        ({"dataset": 7}, DatasetError, "dataset id must be"),
        ({"scheme": "pointwise"}, QueryRefused, "scheme must be one of"),
        ({"scheme": "vdpf", "m": 3, "server_id": 0}, QueryRefused, "vdpf scheme needs exactly 2 servers"),
        ({"scheme": "dcf"}, QueryRefused, "dcf keys cannot be verified and are no longer accepted"),
        (
            {"scheme": "mshare"},
            QueryRefused,
            "mshare keys are for 3 or more servers \\(two servers cannot check them\\)",
        ),
        ({"domain_bits": 21}, QueryRefused, r"domain bits must be in \[1, 20\]"),
        (
            {"series": [{"name": "pos", "max_weight": 1}, {"name": "neg", "max_weight": 2}]},
            QueryRefused,
            "the vdpf scheme supports the series",
        ),
        (
            {"series": [{"name": "all", "max_weight": 1}], "servers": [["h", 1]]},
            QueryRefused,
            "servers must be a list of",
        ),
        ({"server_id": 2}, QueryRefused, "server id 2 is not below m = 2"),
        ({"scheme": "mshare", "m": 3, "domain_bits": 17}, QueryRefused, "mshare keys need domain bits <= 16"),
        ({"series": []}, QueryRefused, "series must be a list of 1..8"),
        ({"series": [{"name": "all", "max_weight": True}]}, QueryRefused, "max_weight of series 'all'"),
        ({"series": [{"name": "all", "max_weight": 1 << 31}]}, QueryRefused, "max_weight of series 'all'"),
        ({"series": [{"name": "all", "max_weight": 1}, {"name": "all", "max_weight": 1}]}, QueryRefused, "repeated"),
        ({"series": [{"name": "Bad", "max_weight": 1}]}, QueryRefused, "bad or repeated series name"),
        ({"series": ["all"]}, QueryRefused, "each series must be an object"),
        ({"upload_id": "XYZ"}, QueryRefused, "upload_id must be 16-64 lowercase hex digits"),
        ({"upload_id": _DROP}, QueryRefused, "upload_id must be"),
        ({"append": 1}, QueryRefused, "append must be true or false"),
        ({"meta": []}, QueryRefused, "meta must be a JSON object"),
        ({"meta": {"x": "y" * 5000}}, QueryRefused, "meta must be a JSON object of at most 4096 bytes"),
        ({"chunks": []}, QueryRefused, "chunks must be a non-empty list"),
        ({"chunks": [True]}, QueryRefused, "chunks must be a non-empty list"),
        ({"chunks": [0]}, QueryRefused, "chunks must be a non-empty list"),
        ({"chunks": [10**6] * 11}, QueryRefused, "at most 10000000 clients per upload"),
        ({"chunks": [10**6]}, QueryRefused, "exceeds the limit"),
        ({"op": "pointwise"}, ProtocolError, "expected a 'upload' request"),
    ],
)
def test_upload_header_fields_are_refused_as_before(change, error, match):
    with pytest.raises(error, match=match):
        UploadRequest.from_json(_with(UPLOAD.to_json(), **change))


@pytest.mark.parametrize(
    "change, match",
    [
        ({"grid_bits": True}, "grid_bits must be in"),
        ({"grid_bits": 7}, "grid_bits must be in \\[1, 6\\]"),
        ({"thresholds": [16]}, "grid indices in \\[0, 15\\]"),
        ({"thresholds": [1.0]}, "thresholds must be integers"),
        ({"thresholds": []}, "non-empty list"),
        ({"round": ""}, "round must be a short string"),
        ({"round": 5}, "round must be a short string"),
    ],
)
def test_pointwise_round_fields(change, match):
    with pytest.raises(QueryRefused, match=match):
        PointwiseRequest.from_json(_with(POINTWISE.to_json(), **change))


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"upload_id": 5}, QueryRefused, "commit needs the upload staged"),
        ({"drop": True}, ProtocolError, "drop count True out of range"),
        ({"drop": -1}, ProtocolError, "out of range"),
        ({"drop": 1.5}, ProtocolError, "out of range"),
    ],
)
def test_commit_fields(change, error, match):
    with pytest.raises(error, match=match):
        CommitRequest.from_json(_with(CommitRequest(UID, 1).to_json(), **change))


@pytest.mark.parametrize(
    "base, change, error, match",
    [
        (ECDF, {"rid": "short"}, QueryRefused, "rid must be 16-64"),
        (ECDF, {"rid": _DROP}, QueryRefused, "rid must be"),
        (ECDF, {"dataset": 3}, UnknownDataset, "no dataset 3"),
        (ECDF, {"servers": [["h", True], ["h", 2]]}, QueryRefused, "servers must be a list of \\[host, port\\] pairs"),
        (ECDF, {"servers": [["h", 1]]}, QueryRefused, "servers must be"),
        (ECDF, {"kind": "sum"}, QueryRefused, "kind must be 'ecdf' or 'counts', got 'sum'"),
        (ECDF, {"grid_bits": True}, QueryRefused, "grid_bits must be in"),
        (ECDF, {"grid_bits": 21}, QueryRefused, "grid_bits must be in"),
        (ECDF, {"tolerate": True}, QueryRefused, "tolerate must be an integer"),
        (ECDF, {"tolerate": -1}, QueryRefused, "tolerate must be an integer"),
        (ECDF, {"mechanism": "laplace"}, QueryRefused, "mechanism must be one of paper, hierarchical, kary"),
        (ECDF, {"series": ["all", "all"]}, QueryRefused, "distinct names"),
        (ECDF, {"series": [1]}, QueryRefused, "distinct names"),
        (ECDF, {"thresholds": [True]}, QueryRefused, "thresholds must be integers"),
        (ECDF, {"thresholds": []}, QueryRefused, "non-empty list"),
        (ECDF, {"epsilon": True}, ECDFError, "epsilon must be a number"),
        (ECDF, {"epsilon": "0"}, ECDFError, "epsilon must lie in"),
        (ECDF, {"epsilon": "nan"}, ECDFError, "epsilon must be a positive number"),
        (COUNTS, {"cuts": [3, 1]}, QueryRefused, "cuts must be non-decreasing"),
        (COUNTS, {"cuts": [True]}, QueryRefused, "cuts must be a list"),
        (COUNTS, {"cuts": list(range(1025))}, QueryRefused, "cuts must be a list of at most 1024"),
        (COUNTS, {"series": "all"}, QueryRefused, "list of distinct series names for a counts release"),
        (COUNTS, {"epsilon_per_value": "-1"}, ECDFError, "epsilon_per_value must lie in"),
    ],
)
def test_prepare_fields(base, change, error, match):
    with pytest.raises(error, match=match):
        PrepareRequest.from_json(_with(base.to_json(), **change))


def test_a_prepare_defaults_to_the_all_series_and_the_paper_tree():
    r = PrepareRequest.from_json({"op": "prepare", "kind": "ecdf", "rid": RID, "dataset": "d", "epsilon": "0.1"})
    assert (r.series, r.mechanism, r.grid_bits, r.tolerate, r.thresholds, r.servers) == (
        ("all",),
        "paper",
        None,
        0,
        None,
        None,
    )
    assert r.epsilon == Fraction(1, 10)
    assert PrepareRequest.from_json(_with(r.to_json(), series="pos")).series == ("pos",)  # one name for an ecdf


@pytest.mark.parametrize(
    "entries, match",
    [
        ("x", "entries must be a list"),
        ([[RID, "1"]] * 2001, "at most 2000"),
        ([[RID]], "each ledger entry must be"),
        ([[RID, 1]], "each ledger entry must be"),
        ([[RID, "x"]], "bad epsilon 'x'"),
        ([[RID, "0"]], "out of range"),
        ([[RID, str(1 << 41)]], "out of range"),
        ([["nothex", "1"]], "rid must be"),
    ],
)
def test_adopt_entries(entries, match):
    with pytest.raises(QueryRefused, match=match):
        AdoptRequest.from_json({"op": "adopt", "dataset": "d", "entries": entries})


@pytest.mark.parametrize(
    "kind, obj, error, match",
    [
        (
            LedgerRequest,
            {"op": "ledger", "dataset": "d", "offset": True},
            QueryRefused,
            "offset must be a non-negative",
        ),
        (LedgerRequest, {"op": "ledger", "dataset": "d", "offset": -5}, QueryRefused, "offset must be a non-negative"),
        (UploadsRequest, {"op": "uploads", "dataset": None}, UnknownDataset, "no dataset None"),
        (StatusRequest, {"op": "status", "dataset": ["d"]}, UnknownDataset, "no dataset"),
        (
            DropUploadRequest,
            {"op": "drop_upload", "dataset": "d", "upload_id": "Z" * 16},
            QueryRefused,
            "upload_id must",
        ),
        (PeerHello, {"op": "peer", "rid": RID, "server_id": 1}, ProtocolError, "expected a peer hello"),
        (PeerHello, {"op": "peer", "rid": RID, "server_id": False}, ProtocolError, "expected a peer hello"),
        (PeerHello, {"op": "peer", "rid": "x", "server_id": 0}, QueryRefused, "rid must be"),
    ],
)
def test_other_requests(kind, obj, error, match):
    with pytest.raises(error, match=match):
        kind.from_json(obj)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=40), max_size=25), st.randoms(use_true_random=False))
def test_idset_equals_a_python_set(batches, rnd):
    """The committed client ids of a dataset (sorted arrays merged like a binary counter, by sorts rather than
    numpy 2.4's slow hash-based np.unique) against a Python set: membership, size and sorted order."""
    from pairwise.protocols.ecdf.dataset import IdSet

    ids, ref = IdSet(), set()
    for b in batches:
        new = [v for v in b if v not in ref]  # add() takes ids known to be new (repeats within a batch allowed)
        ids.add(np.array(new, dtype=np.uint64))
        ref.update(new)
        probe = list(ref)[:10] + [rnd.randrange(2**64) for _ in range(10)]
        assert ids.contains(np.array(probe, dtype=np.uint64)).tolist() == [v in ref for v in probe]
    assert len(ids) == len(ref) and ids.sorted().tolist() == sorted(ref)
