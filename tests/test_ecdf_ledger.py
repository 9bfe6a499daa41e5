"""The ECDF privacy ledger against a hostile querier: no sequence of requests releases more than the budget.

The querier chooses release ids and may call ``adopt``; it is exactly the
party the budget limits.  The state machine below drives one
:class:`pairwise.protocols.ecdf.ledger.Ledger` over a real SQLite file with
any interleaving of prepare (reserve), go (charge), abort, adopt and restart
(the ledger is rebuilt from disk, in-memory reservations are lost as in a
crash), and after every step checks, against a model of what was actually
released:

* released epsilon + epsilon still reserved <= budget (so the ``held`` term
  of the reservation check is exercised: two releases in flight at once);
* the ledger's spent epsilon, in memory and re-read from disk, is at least
  the released epsilon, and every released id is charged at least its epsilon.

The same attack is then replayed against two real server processes.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, upload
from pairwise.protocols.ecdf.ledger import Ledger
from pairwise.protocols.ecdf.storage import LedgerEntry, SQLiteStorage
from pairwise.protocols.ecdf.wire import (
    ROLE_QUERIER,
    BudgetExceeded,
    QueryRefused,
    connect,
    recv_json,
    send_json,
)

BUDGET = Fraction(1)
RIDS = [f"{i:02x}" * 8 for i in range(5)]
EPS = st.sampled_from([Fraction(1, 10**12), Fraction(1, 5), Fraction(3, 10), Fraction(3, 5), Fraction(9, 10)])


class LedgerMachine(RuleBasedStateMachine):
    """A querier against one server's ledger (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="pairwise-ledger-")
        self.path = f"{self._dir.name}/ledger.db"
        self._open()
        self.released: dict[str, Fraction] = {}  # what the querier really got, per release id
        self.reserved: dict[str, Fraction] = {}  # admitted reservations still in flight

    def _open(self) -> None:
        self.storage = SQLiteStorage(self.path, 0)
        self.ledger = Ledger(self.storage, 0)
        self.ledger.load("d")

    def teardown(self) -> None:
        self.storage.close()
        self._dir.cleanup()

    @rule(rid=st.sampled_from(RIDS), eps=EPS)
    def prepare(self, rid: str, eps: Fraction) -> None:
        try:
            self.ledger.reserve("d", BUDGET, rid, eps)
        except BudgetExceeded:
            assert sum(self.released.values()) + sum(self.reserved.values()) + eps > BUDGET or \
                self.ledger.spent("d") + sum(self.reserved.values()) + eps > BUDGET
            return
        except QueryRefused:
            assert rid in self.reserved or rid in {e.rid for e in self.storage.ledger("d")}
            return
        assert rid not in self.reserved
        self.reserved[rid] = eps

    @precondition(lambda self: self.reserved)
    @rule(data=st.data())
    def go(self, data) -> None:
        rid = data.draw(st.sampled_from(sorted(self.reserved)))
        self.ledger.charge("d", rid, "ecdf")
        self.released[rid] = self.reserved.pop(rid)  # the noisy release left the server

    @precondition(lambda self: self.reserved)
    @rule(data=st.data())
    def abort(self, data) -> None:
        rid = data.draw(st.sampled_from(sorted(self.reserved)))
        self.ledger.unreserve("d", rid)
        del self.reserved[rid]

    @rule(pairs=st.lists(st.tuples(st.sampled_from(RIDS), EPS), min_size=1, max_size=3))
    def adopt(self, pairs) -> None:
        try:
            self.ledger.adopt("d", pairs)
        except QueryRefused:
            assert any(rid in self.reserved for rid, _ in pairs)
            return
        assert not any(rid in self.reserved for rid, _ in pairs)

    @rule()
    def restart(self) -> None:
        """A crash and restart: reservations are lost (those releases never happen), the ledger is re-read."""
        self.storage.close()
        self._open()
        self.reserved.clear()

    @invariant()
    def released_within_budget(self) -> None:
        assert sum(self.released.values()) + sum(self.reserved.values()) <= BUDGET

    @invariant()
    def ledger_never_below_what_was_released(self) -> None:
        on_disk = {e.rid: e.epsilon for e in self.storage.ledger("d")}
        for rid, eps in self.released.items():
            assert on_disk.get(rid, Fraction(0)) >= eps, (rid, eps, on_disk.get(rid))
        assert self.ledger.spent("d") == sum(on_disk.values(), Fraction(0))
        assert self.ledger.spent("d") >= sum(self.released.values())


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=150, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- direct cases
def test_two_releases_in_flight_count_against_the_budget_together(tmp_path):
    led = Ledger(SQLiteStorage(str(tmp_path / "a.db"), 0), 0)
    led.reserve("d", BUDGET, "a" * 16, Fraction(3, 5))
    with pytest.raises(BudgetExceeded, match=r"\+0.6 reserved"):
        led.reserve("d", BUDGET, "b" * 16, Fraction(3, 5))
    led.unreserve("d", "a" * 16)
    led.reserve("d", BUDGET, "b" * 16, Fraction(3, 5))


def test_adopt_refuses_a_prepared_release_and_never_lowers_a_charge(tmp_path):
    storage = SQLiteStorage(str(tmp_path / "a.db"), 0)
    led = Ledger(storage, 0)
    led.reserve("d", Fraction(10), "r" * 16, Fraction(8))
    with pytest.raises(QueryRefused, match="in flight"):
        led.adopt("d", [("r" * 16, Fraction(1, 10**12))])
    assert storage.ledger("d") == []
    led.charge("d", "r" * 16, "ecdf")
    assert led.adopt("d", [("r" * 16, Fraction(1, 10**12))]) == 0
    assert led.adopt("d", [("r" * 16, Fraction(9))]) == 1  # another server recorded more: keep the larger
    storage.close()
    again = SQLiteStorage(str(tmp_path / "a.db"), 0)
    assert [(e.rid, e.epsilon) for e in again.ledger("d")] == [("r" * 16, Fraction(9))]


def test_storage_keeps_the_largest_charge_per_release_id(tmp_path):
    storage = SQLiteStorage(str(tmp_path / "a.db"), 0)
    storage.record_charges("d", [LedgerEntry("x" * 16, Fraction(1, 10**12), "adopted")])
    storage.record_charges("d", [LedgerEntry("x" * 16, Fraction(8), "released")])
    storage.record_charges("d", [LedgerEntry("x" * 16, Fraction(1), "adopted")])
    assert [(e.rid, e.epsilon, e.how) for e in storage.ledger("d")] == [("x" * 16, Fraction(8), "released")]


# --------------------------------------------------------------------------- two real servers
def _querier_channels(sp):
    return [connect(a, ROLE_QUERIER, label=f"server {j}", connect_timeout=10, timeout=60)
            for j, a in enumerate(sp.addresses)]


def test_adopting_a_prepared_release_id_cannot_shrink_its_charge_across_a_restart(tmp_path):
    """The attack of issue 22: prepare R at 8, adopt [R, 1e-12] on a second connection, go, restart."""
    x = np.random.default_rng(3).integers(0, 64, 50)
    rid = "ab" * 12
    with ServerProcesses(2, budget="10", timeout=60, state_dir=str(tmp_path)) as sp:
        upload(sp.addresses, "d", x, domain_bits=6)
        chans = _querier_channels(sp)
        other = _querier_channels(sp)
        try:
            prep = {"op": "prepare", "kind": "ecdf", "series": ["all"], "epsilon": "8", "mechanism": "paper",
                    "grid_bits": None, "tolerate": 0, "thresholds": None, "rid": rid, "dataset": "d",
                    "servers": [[h, p] for h, p in sp.addresses]}
            for ch in chans:
                send_json(ch, prep)
            assert all(recv_json(ch, timeout=60)["ok"] for ch in chans)
            for ch in other:  # the second connection tries to plant a tiny charge under the same id
                send_json(ch, {"op": "adopt", "dataset": "d", "entries": [[rid, "1e-12"]]})
                r = recv_json(ch, timeout=60)
                assert not r["ok"] and "in flight" in r["error"]
            send_json(chans[0], {"op": "link"})
            assert recv_json(chans[0], timeout=60)["ok"]
            for ch in chans:
                send_json(ch, {"op": "go"})
            for ch in chans:
                h = recv_json(ch, timeout=120)
                assert h["ok"], h
                ch.recv_array(np.int64 if h["encoding"] == "values" else np.uint64, int(h["count"]))
            for ch in other:  # after the release, adopting cannot lower it either
                send_json(ch, {"op": "adopt", "dataset": "d", "entries": [[rid, "1e-12"]]})
                assert recv_json(ch, timeout=60)["added"] == 0
        finally:
            for ch in chans + other:
                ch.close()
        for j in range(2):
            sp.kill(j, hard=True)
            sp.restart(j)
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)
        assert [s["info"]["spent"] for s in q.status("d")] == ["8", "8"]
        with pytest.raises(BudgetExceeded):
            q.ecdf("d", 8.9)
        q.ecdf("d", 2)  # exactly the rest of the budget
        assert [s["info"]["spent"] for s in q.status("d")] == ["10", "10"]
