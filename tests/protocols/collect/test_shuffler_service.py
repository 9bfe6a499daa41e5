"""The shuffler's listener and forwarder over real mutual-TLS sockets (protocols.collect.shuffler).

The aggregator here is a recording stand-in for the upstream interface (the
end-to-end tests with the real aggregator are in tests/system/); it checks
what an aggregator receives: permuted boxes and a user count, never a name.
"""

from __future__ import annotations

import threading
import time

import pytest

from pairwise.mpc.errors import AccessDenied
from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.protocols.collect import histogram as H
from pairwise.protocols.collect import sealed
from pairwise.protocols.collect.shuffler import (
    Batch,
    ShuffleError,
    Shuffler,
    ShufflerServer,
    ShufflerStore,
    Upstream,
    submit,
)

N = 600
SPEC = {"epsilon": 1.0, "delta": 0.9, "lower": [1], "upper": [5], "min_users": N, "beta": 0.05}
USERS = 8  # users that connect over TLS; the rest of the n are submitted to the store directly


class RecordingAggregator(Upstream):
    def __init__(self) -> None:
        self.status = "open"
        self.delivered: list[Batch] = []
        self.fail_next = 0

    def task(self, task_id):
        if task_id != "t1":
            raise ShuffleError(f"unknown task {task_id!r}", "unknown_task")
        return {"protocol": "shuffle-histogram", "state": self.status, "spec": SPEC}

    def deliver(self, batch):
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("aggregator unreachable")
        self.delivered.append(batch)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    create_certificate(d, "shuffler", "server")
    for i in range(USERS):
        create_certificate(d, f"user{i}", "client")
    create_certificate(d, "querier", "querier")
    return d


@pytest.fixture()
def service(pki):
    agg = RecordingAggregator()
    shuf = Shuffler(ShufflerStore(None), agg)
    srv = ShufflerServer(shuf, "127.0.0.1", 0, tls=TLSConfig(pki, "shuffler"), poll=0.2, user_roles=("client",))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield agg, shuf, srv
    srv.stop()
    t.join(30)


def user_boxes(pk, value):
    return H.user_messages(value, H.HistogramTask(1.0, 0.9, 1, 5, N), pk, "t1")[0]


def test_users_submit_over_tls_and_the_aggregator_gets_no_names(pki, service):
    agg, shuf, srv = service
    sk, pk = sealed.generate_keypair()
    sent = []
    for i in range(USERS):
        boxes = user_boxes(pk, 1 + i % 5)
        sent += boxes
        assert submit("127.0.0.1", srv.port, "t1", boxes, tls=TLSConfig(pki, f"user{i}"), peer_names="shuffler") == len(
            boxes
        )
    # the same user again: refused, nothing stored
    with pytest.raises(ShuffleError, match="already submitted") as e:
        submit("127.0.0.1", srv.port, "t1", user_boxes(pk, 2), tls=TLSConfig(pki, "user0"))
    assert e.value.code == "duplicate"
    # a replayed box (user1's), submitted under another name: refused by its ephemeral key
    info = shuf.task_info("t1")
    with pytest.raises(ShuffleError, match="replay"):
        shuf.submit("someone", "t1", sent[-1])
    # the other n - USERS users (their sealing and TLS would only slow the test down)
    for u in range(N - USERS):
        b = user_boxes(pk, 3)
        sent += b
        shuf.store.submit(info, f"direct{u}", b"".join(b))
    assert not agg.delivered  # open task: nothing leaves the shuffler
    agg.fail_next = 2  # the first deliveries fail: the outbox keeps the batch
    agg.status = "closed"
    deadline = time.monotonic() + 30
    while not agg.delivered and time.monotonic() < deadline:
        time.sleep(0.1)
    [batch] = agg.delivered
    assert batch.final and batch.users == N and batch.count == len(sent)
    box = H.box_bytes()
    got = [batch.boxes[i * box : (i + 1) * box] for i in range(batch.count)]
    assert sorted(got) == sorted(sent) and got != sent
    blob = batch.boxes + repr(batch).encode()
    for i in range(USERS):
        assert f"user{i}".encode() not in blob
    out = H.analyze([(batch.users, got)], H.HistogramTask(1.0, 0.9, 1, 5, N), sk, "t1")
    assert out["messages"] == len(sent) and out["messages_rejected"] == 0
    # after the final batch the task is closed at the shuffler
    with pytest.raises(ShuffleError, match="closed"):
        submit("127.0.0.1", srv.port, "t1", user_boxes(pk, 2), tls=TLSConfig(pki, "user7"))


def test_refusals_name_the_problem(pki, service):
    agg, shuf, srv = service
    _, pk = sealed.generate_keypair()
    tls = TLSConfig(pki, "user1")
    with pytest.raises(ShuffleError, match="unknown task") as e:
        submit("127.0.0.1", srv.port, "nope", user_boxes(pk, 1), tls=tls)
    assert e.value.code == "unknown_task"
    with pytest.raises(ShuffleError, match="at most 6"):
        submit(
            "127.0.0.1",
            srv.port,
            "t1",
            [sealed.seal(sealed.pack_label(0), pk, sealed.box_context("t1", H.PURPOSE)) for _ in range(7)],
            tls=tls,
        )
    with pytest.raises(ShuffleError, match="sent 53 bytes"):
        submit("127.0.0.1", srv.port, "t1", [b"x" * 53], tls=tls)
    # a certificate of another role may not submit
    with pytest.raises(AccessDenied):
        submit("127.0.0.1", srv.port, "t1", user_boxes(pk, 1), tls=TLSConfig(pki, "querier"))
    assert shuf.store.pending_users("t1") == 0
