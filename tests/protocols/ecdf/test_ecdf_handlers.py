"""The ECDF server's handlers, release planning and ledger in one process: memory channels, SQLite in tmp_path.

Each server is a :class:`pairwise.protocols.ecdf.handlers.ServerState` over a
real SQLite file; each connection a :class:`pairwise.mpc.channel.MemoryChannel`
pair whose server end a thread serves with :meth:`Session.answer` (what the
server process does per request, authorization included).  The two servers
of a garbled-circuit release reach each other over a memory channel too
(``ServerState.dial``).  The clients are the library's own uploader and
querier with their transport swapped for memory channels, so the bytes are
those of the real service.  References are numpy counts at an epsilon so large
that the noise is zero except with probability about 1e-12 per release.
"""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pytest

from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.errors import ChannelError, PeerClosed
from pairwise.protocols.ecdf import uploader
from pairwise.protocols.ecdf.auth import Policy
from pairwise.protocols.ecdf.client import ECDFQuerier, make_keys, make_series, upload
from pairwise.protocols.ecdf.handlers import Budgets, PeerLinks, ServerState, Session
from pairwise.protocols.ecdf.ops import (
    AbortRequest,
    AdoptRequest,
    PrepareRequest,
    StatusRequest,
    UploadRequest,
)
from pairwise.protocols.ecdf.release import plan_release
from pairwise.protocols.ecdf.storage import SQLiteStorage
from pairwise.protocols.ecdf.wire import (
    BudgetExceeded,
    DatasetError,
    QueryRefused,
    recv_json,
    send_json,
)

NB = 6
HUGE = 1e4
RID = "00112233445566778899aabb"


def exact_counts(x, bits: int = NB) -> np.ndarray:
    return np.array([(np.asarray(x) <= t).sum() for t in range(1 << bits)], dtype=float)


class Servers:
    """m server states on SQLite files, served over memory channels (see the module docstring)."""

    def __init__(self, m: int, path, budget: str = "1000000", accept_unverified: bool | None = None) -> None:
        self.m, self.path, self.budget = m, path, Fraction(budget)
        # three or more servers take mshare keys, which only a server run with --accept-unverified takes
        self.accept_unverified = m > 2 if accept_unverified is None else accept_unverified
        self.logs: list[list[str]] = [[] for _ in range(m)]
        self.threads: list[threading.Thread] = []
        self.channels: list[MemoryChannel] = []
        self.states = [self._state(j) for j in range(m)]
        self.addresses = [("127.0.0.1", 1 + j) for j in range(m)]

    def _state(self, j: int) -> ServerState:
        st = ServerState(
            j,
            SQLiteStorage(str(self.path / f"ecdf-server-{j}.db"), j),
            budgets=Budgets(self.budget),
            links=PeerLinks({}, Policy(), 60.0),
            log=self.logs[j].append,
            num_servers=self.m,
            accept_unverified=self.accept_unverified,
        )
        st.dial = self._dial
        return st

    def _dial(self, addr, label, policy, server_id, **_):
        """Server 0 reaches server ``server_id``: its peer hub accepts the other end (as over TCP)."""
        ours, theirs = MemoryChannel.pair(timeout=60)
        ours.peer = theirs.peer = "memory"
        t = threading.Thread(target=self.states[server_id].hub.accept, args=(theirs,), daemon=True)
        t.start()
        self.threads.append(t)
        return ours

    def connect(self, j: int) -> MemoryChannel:
        """A client's connection to server j (its server end is served by a thread until it closes)."""
        ours, theirs = MemoryChannel.pair(timeout=60)
        ours.peer = theirs.peer = "memory"
        session = Session(self.states[j], theirs)

        def serve() -> None:
            try:
                while True:
                    try:
                        req = recv_json(theirs, timeout=60)
                    except PeerClosed:
                        break
                    if not session.answer(req, None):
                        break
            except ChannelError:
                pass
            finally:
                session.close()
                theirs.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        self.threads.append(t)
        self.channels.append(ours)
        return ours

    def connect_all(self, servers, role, *args, **kwargs) -> list:
        return [self.connect(j) for j in range(self.m)]

    def querier(self) -> ECDFQuerier:
        servers = self

        class Querier(ECDFQuerier):
            def _open(self):
                return servers.connect_all(None, None)

        return Querier(self.addresses, timeout=60, connect_timeout=5)

    def restart(self) -> None:
        """Every server forgets its memory and reads its state again (a restart)."""
        self.close()
        self.states = [self._state(j) for j in range(self.m)]

    def close(self) -> None:
        for ch in self.channels:
            ch.close()
        for t in self.threads:
            t.join(timeout=60)
        self.channels, self.threads = [], []
        for st in self.states:
            st.hub.close_all()
            st.storage.close()


@pytest.fixture
def servers(tmp_path, monkeypatch):
    made: list[Servers] = []

    def make(m: int = 2, **kw) -> Servers:
        s = Servers(m, tmp_path / f"set{len(made)}", **kw)
        made.append(s)
        monkeypatch.setattr(uploader, "connect_all", s.connect_all)
        return s

    (tmp_path / "set0").mkdir(mode=0o700)
    for k in range(1, 4):
        (tmp_path / f"set{k}").mkdir(mode=0o700)
    yield make
    for s in made:
        s.close()


def test_two_servers_upload_release_and_restart_in_process(servers):
    sv = servers(2)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 1 << NB, 150), rng.integers(0, 2, 150)
    rep = upload(sv.addresses, "d", x, labels=y, domain_bits=NB)
    assert rep.accepted == [150, 150] and rep.rejected_count == [0, 0]
    q = sv.querier()
    infos = [s["info"] for s in q.status("d")]
    assert infos[0]["digest"] == infos[1]["digest"] and infos[0]["clients"] == 150
    rel = q.ecdf("d", HUGE)
    assert np.array_equal(rel.cumulative, exact_counts(x)) and rel.noise == "gc"
    roc = q.roc("d", 2 * HUGE)
    assert np.array_equal(roc.positives.cumulative, exact_counts(x[y == 1]))
    assert np.array_equal(roc.negatives.cumulative, exact_counts(x[y == 0]))
    spent = Fraction(int(HUGE)) * 3
    assert [Fraction(s["info"]["spent"]) for s in q.status("d")] == [spent, spent]
    sv.restart()  # state read back from SQLite: the clients and every charge
    q = sv.querier()
    assert [(s["info"]["clients"], Fraction(s["info"]["spent"])) for s in q.status("d")] == [(150, spent)] * 2
    assert np.array_equal(q.ecdf("d", HUGE, mechanism="hierarchical").cumulative, exact_counts(x))


def test_three_servers_polya_release_and_group_counts_in_process(servers):
    sv = servers(3)
    x = np.random.default_rng(2).integers(0, 1 << NB, 90)
    assert upload(sv.addresses, "m", x, domain_bits=NB).accepted == [90] * 3
    q = sv.querier()
    assert np.array_equal(q.ecdf("m", HUGE, tolerate=1).cumulative, exact_counts(x))
    cr = q.counts("m", [10, 40], HUGE, ["all"])
    assert cr.values["all"].tolist() == [(x <= 10).sum(), ((x > 10) & (x <= 40)).sum(), (x > 40).sum()]


def test_bad_keys_and_repeated_ids_reject_their_clients_only(servers):
    sv = servers(2)
    x = np.arange(40) % (1 << NB)
    series = make_series()
    keys = make_keys(x, series, scheme="vdpf", m=2, domain_bits=NB)
    keys[1]["all"][3] = keys[1]["all"][3][:-1]  # truncated: client 3
    keys[0]["all"][7] = b"\x99" + keys[0]["all"][7][1:]  # another version byte: client 7
    ids = np.arange(40, dtype=np.uint64)
    ids[9] = ids[8]  # a repeated id within the upload: the second is rejected
    rep = uploader.send_keys(
        sv.addresses, "k", scheme="vdpf", domain_bits=NB, output_bits=32, series_meta={"all": 1}, ids=ids, keys=keys
    )
    assert rep.accepted == [37, 37] and rep.rejected_count == [3, 3]
    keep = np.setdiff1d(np.arange(40), [3, 7, 9])
    assert np.array_equal(sv.querier().ecdf("k", HUGE).cumulative, exact_counts(x[keep]))
    # an append of ids 0..4: only id 3 (rejected before) is new; the others are duplicates on both servers
    again = upload(sv.addresses, "k", x[:5], domain_bits=NB, append=True)
    assert again.accepted == [1, 1] and again.total_clients == [38, 38]
    assert sorted(r["reason"] for r in again.rejected[0]) == [f"duplicate client id {i}" for i in (0, 1, 2, 4)]
    # the append's shares are the check's histograms less the duplicates: the release counts client 3 once more
    assert np.array_equal(sv.querier().ecdf("k", HUGE).cumulative, exact_counts(np.append(x[keep], x[3])))


def _plan(sv: Servers, **fields):
    ds = sv.states[0].dataset("d")
    base = dict(kind="ecdf", rid=RID, dataset="d", series=("all",), epsilon=Fraction(1))
    return plan_release(ds, PrepareRequest(**{**base, **fields}))


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"grid_bits": 7}, r"grid_bits must be in \[1, 6\], got 7"),
        ({"thresholds": (64,)}, r"grid indices in \[0, 63\]"),
        ({"grid_bits": 3, "thresholds": (8,)}, r"grid indices in \[0, 7\]"),
        ({"tolerate": 1}, "tolerate must be an integer in"),
        ({"series": ("pos",)}, "has no series 'pos'"),
        ({"servers": (("h", 1), ("h", 2), ("h", 3))}, "shared among m = 2 servers, the request lists 3"),
        ({"kind": "counts", "cuts": (3, 64), "epsilon_per_value": Fraction(1)}, r"grid indices in \[0, 63\]"),
    ],
)
def test_release_plans_check_the_dataset_bounds_before_anything_is_reserved(servers, fields, match):
    sv = servers(2)
    upload(sv.addresses, "d", np.arange(20), domain_bits=NB)
    with pytest.raises((QueryRefused, DatasetError), match=match):
        _plan(sv, **fields)
    plan = _plan(sv, grid_bits=3, thresholds=(1, 5, 5))
    assert plan.thresholds.tolist() == [1, 5] and plan.charge == 1 and plan.grid_bits == 3
    led = sv.states[0].ledger
    assert (led.spent("d"), led.reserved("d")) == (0, 0)


def test_the_ledger_through_the_handlers_reserve_adopt_abort_and_budget(servers):
    sv = servers(2, budget="1")
    upload(sv.addresses, "d", np.arange(20), domain_bits=NB)
    a, b = sv.connect(0), sv.connect(0)

    def ask(ch, req) -> dict:
        send_json(ch, req.to_json())
        return recv_json(ch, timeout=60)

    prep = PrepareRequest(kind="ecdf", rid=RID, dataset="d", series=("all",), epsilon=Fraction(3, 5))
    assert ask(a, prep)["ok"]
    refused = ask(b, AdoptRequest("d", ((RID, Fraction(1, 10**12)),)))  # the querier's own id, in flight
    assert not refused["ok"] and "in flight" in refused["error"]
    second = ask(b, PrepareRequest(kind="ecdf", rid="ff" * 12, dataset="d", series=("all",), epsilon=Fraction(3, 5)))
    assert not second["ok"] and second["code"] == "budget" and "+0.6 reserved" in second["error"]
    assert ask(a, AbortRequest())["ok"]
    assert ask(b, AdoptRequest("d", ((RID, Fraction(1, 2)),)))["added"] == 1
    info = ask(b, StatusRequest("d"))["info"]
    assert (Fraction(info["spent"]), Fraction(info["reserved"]), Fraction(info["left"])) == (
        Fraction(1, 2),
        0,
        Fraction(1, 2),
    )
    with pytest.raises(BudgetExceeded, match="exhausted on server 0"):
        sv.querier().ecdf("d", 0.6)
    assert [Fraction(s["info"]["spent"]) for s in sv.querier().status("d")] == [Fraction(1, 2)] * 2  # agreed


def test_requests_are_authorized_before_they_are_parsed(servers):
    from pairwise.protocols.ecdf.auth import Peer

    sv = servers(2)
    _, theirs = MemoryChannel.pair(timeout=60)
    ours = _
    theirs.peer = "memory"
    session = Session(sv.states[0], theirs)
    stranger = Peer("mallory", "client")
    # a malformed release request from a client certificate: refused for its role, not for its fields
    assert session.answer({"op": "prepare", "rid": 5}, stranger)
    reply = recv_json(ours, timeout=60)
    assert reply["code"] == "unauthorized" and "needs the role querier" in reply["error"]
    # an upload header with a bad field ends the connection (bulk frames may follow)
    bad = UploadRequest(
        dataset="d",
        scheme="vdpf",
        m=2,
        server_id=1,
        domain_bits=NB,
        output_bits=32,
        series=(),
        chunks=(1,),
        upload_id="ab" * 8,
    ).to_json()
    assert not session.answer(bad, None)
    assert "series must be a list" in recv_json(ours, timeout=60)["error"]
    session.close()


@pytest.mark.parametrize("mechanism", ["hierarchical", "kary"])
def test_node_mechanisms_release_every_label_series_exactly_at_huge_epsilon(servers, mechanism):
    """The class series of a tree release against the exact counts: their root is noised, not the public n.

    80 clients, 20 positives (issue 25: a planted fault made the positives' last count 80 instead of 20).
    """
    sv = servers(2)
    x = np.random.default_rng(7).integers(0, 1 << NB, 80)
    y = np.zeros(80, dtype=int)
    y[::4] = 1
    upload(sv.addresses, "lab", x, labels=y, domain_bits=NB)
    q = sv.querier()
    roc = q.roc("lab", 2 * HUGE, mechanism=mechanism)
    close = lambda a, b: np.allclose(a, b, rtol=0, atol=1e-9)  # noqa: E731 (the consistent tree is real-valued)
    assert close(roc.positives.cumulative, exact_counts(x[y == 1])), roc.positives.cumulative[-4:]
    assert close(roc.negatives.cumulative, exact_counts(x[y == 0]))
    assert close(roc.positives.cumulative[-1], 20) and close(roc.negatives.cumulative[-1], 60)
    assert roc.positives.noise_map.root_public is False and roc.positives.noise_map.radices is not None
    rel = q.ecdf("lab", HUGE, mechanism=mechanism)
    assert close(rel.cumulative, exact_counts(x)) and rel.noise_map.root_public is True
    # the intervals hold the exact values and have a width from public parameters (tiny at this epsilon)
    lo, hi = rel.interval(0.05)
    assert np.all(lo <= exact_counts(x) / 80 + 1e-12) and np.all(exact_counts(x) / 80 <= hi + 1e-12)
    assert np.all(hi - lo < 0.1)
    cp, cn = exact_counts(x[y == 1]), exact_counts(x[y == 0])
    exact_auc = float(np.dot(np.diff(np.concatenate([[0], cp])), (np.concatenate([[0], cn[:-1]]) + cn) / 2) / (20 * 60))
    assert roc.auc == pytest.approx(exact_auc, abs=1e-9)
    assert roc.auc_interval[0] - 1e-9 <= exact_auc <= roc.auc_interval[1] + 1e-9


def test_release_states_its_noise_law_and_radices(servers):
    """What the servers publish next to a release is public: the radices and the node law's a (= exp(-eps_v))."""
    sv = servers(2)
    x = np.arange(50) % (1 << NB)
    upload(sv.addresses, "law", x, domain_bits=NB)
    q = sv.querier()
    rel = q.ecdf("law", 3.0, mechanism="kary")
    from pairwise.dp.kary import tree_radices

    assert rel.noise_map.radices == tree_radices(NB)
    h = len(rel.noise_map.radices)
    assert rel.noise_map.law.a == pytest.approx(np.exp(-3.0 / (2 * h)))
    rel = q.ecdf("law", 3.0)
    assert rel.noise_map.radices is None and rel.noise_map.law.a == pytest.approx(np.exp(-3.0 / (NB + 1)))


def test_noisy_group_counts_are_signed_and_polya_states_its_distance(servers):
    """Group counts decode as signed values (an empty group's noise may be negative), and three servers state
    the Polya noise's distance to its law: 2m draws of the rounded table per value (kills m draws)."""
    import math

    from pairwise.protocols.ecdf.noise import polya_shape, polya_table, value_epsilon

    sv = servers(2)
    x = np.full(40, 3)
    upload(sv.addresses, "sg", x, domain_bits=NB)
    cr = sv.querier().counts("sg", list(range(10, 60, 5)), 1.0, ["all"])  # ten empty groups
    assert np.abs(cr.values["all"]).max() < 1000
    sv3 = servers(3)
    upload(sv3.addresses, "p3", np.arange(30) % (1 << NB), domain_bits=NB)
    rel = sv3.querier().ecdf("p3", 2.0)
    eps_v = value_epsilon(Fraction(2), NB + 1)
    table = polya_table(polya_shape(3, 0), eps_v, 1)
    assert rel.noise_map.law.tv == math.nextafter(2 * 3 * table.tv_bound, math.inf)
    assert rel.noise_map.law.shape == pytest.approx(float(polya_shape(3, 0) * 3))


def test_a_pointwise_round_is_released_only_on_its_own_grid(servers):
    """Kills the inverted grid check of _grid_bits: a pointwise round sent for 2^4 thresholds is refused on
    2^5 (before anything is reserved) and released on 2^4."""
    from pairwise.protocols.ecdf.uploader import upload_pointwise

    sv = servers(2, accept_unverified=True)
    x = np.random.default_rng(3).integers(0, 1 << NB, 30)
    upload_pointwise(sv.addresses, "pw", x, grid_bits=4, domain_bits=NB)
    q = sv.querier()
    with pytest.raises(QueryRefused, match="pointwise round"):
        q.ecdf("pw", HUGE, grid_bits=5)
    rel = q.ecdf("pw", HUGE, grid_bits=4)
    assert np.array_equal(rel.cumulative, [(x <= (t + 1) * 4 - 1).sum() for t in range(16)])
    assert [Fraction(s["info"]["spent"]) for s in q.status("pw")] == [Fraction(int(HUGE))] * 2


@pytest.mark.parametrize("m,scheme", [(2, "pointwise"), (3, "mshare")])
def test_uploads_the_servers_cannot_check_are_refused_unless_the_operator_accepts_them(servers, m, scheme):
    """Only vdpf keys are checked per client (issue 22, item 2): pointwise shares and mshare keys are refused by
    default, before anything is staged, and taken only by servers run with --accept-unverified."""
    from pairwise.protocols.ecdf.uploader import upload_pointwise

    x = np.arange(20) % (1 << NB)

    def send(sv):
        if scheme == "pointwise":
            return upload_pointwise(sv.addresses, "u", x, grid_bits=4, domain_bits=NB)
        return upload(sv.addresses, "u", x, domain_bits=NB)

    strict = servers(m, accept_unverified=False)
    with pytest.raises(QueryRefused, match="--accept-unverified"):
        send(strict)
    assert all("u" not in st.datasets for st in strict.states)
    assert all(st.staging.reserved == 0 for st in strict.states)
    send(servers(m, accept_unverified=True))
