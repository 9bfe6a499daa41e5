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
  the released epsilon, and every released id is charged at least its epsilon
  (a replayed id released twice counts twice);
* what the ledger holds reserved is exactly what is in flight, and a
  reservation is refused only when some budget really lacks room.

The same attack is replayed against two real server processes in
tests/system/test_ecdf_ledger_processes.py.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pairwise.protocols.ecdf.ledger import Ledger
from pairwise.protocols.ecdf.storage import LedgerEntry, SQLiteStorage
from pairwise.protocols.ecdf.wire import (
    BudgetExceeded,
    QueryRefused,
)

BUDGET = Fraction(1)  # per dataset
OWNER_BUDGET = Fraction(6, 5)
TOTAL_BUDGET = Fraction(3, 2)  # below what the dataset and owner budgets allow together (d + f = 2)
#: datasets and the data owners whose uploads they hold (owner budgets span datasets)
DATASETS = {"d": ("alice",), "e": ("alice", "bob"), "f": ("bob",)}
RIDS = [f"{i:02x}" * 8 for i in range(5)]
EPS = st.sampled_from([Fraction(1, 10**12), Fraction(1, 5), Fraction(3, 10), Fraction(3, 5), Fraction(9, 10)])


def _scopes(dataset: str) -> list[tuple[str, Fraction]]:
    return [
        (f"dataset:{dataset}", BUDGET),
        *((f"owner:{o}", OWNER_BUDGET) for o in DATASETS[dataset]),
        ("total", TOTAL_BUDGET),
    ]


class LedgerMachine(RuleBasedStateMachine):
    """A querier against one server's ledger (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="pairwise-ledger-")
        self.path = f"{self._dir.name}/ledger.db"
        self._open()
        self.released: dict[tuple[str, str], Fraction] = {}  # what the querier really got, per (dataset, id)
        self.reserved: dict[tuple[str, str], Fraction] = {}  # admitted reservations still in flight

    def _open(self) -> None:
        self.storage = SQLiteStorage(self.path, 0)
        self.ledger = Ledger(self.storage, 0, owner_budget=OWNER_BUDGET, total_budget=TOTAL_BUDGET)
        self.ledger.load()

    def teardown(self) -> None:
        self.storage.close()
        self._dir.cleanup()

    def _spent(self, scope: str) -> Fraction:
        kind, _, name = scope.partition(":")
        return {"dataset": self.ledger.spent, "owner": self.ledger.owner_spent}.get(
            kind, lambda _: self.ledger.total_spent()
        )(name)

    def _in_scope(self, book: dict, scope: str) -> Fraction:
        return sum((eps for (ds, _), eps in book.items() if scope in dict(_scopes(ds))), Fraction(0))

    @rule(ds=st.sampled_from(sorted(DATASETS)), rid=st.sampled_from(RIDS), eps=EPS)
    def prepare(self, ds: str, rid: str, eps: Fraction) -> None:
        try:
            self.ledger.reserve(ds, BUDGET, rid, eps, DATASETS[ds])
        except BudgetExceeded:
            # refused only if some scope's spent + still reserved + this charge exceeds its budget
            assert any(self._spent(scope) + self._in_scope(self.reserved, scope) + eps > b for scope, b in _scopes(ds))
            return
        except QueryRefused:
            assert (ds, rid) in self.reserved or rid in {e.rid for e in self.storage.ledger(ds)}
            return
        assert (ds, rid) not in self.reserved
        self.reserved[(ds, rid)] = eps

    @precondition(lambda self: self.reserved)
    @rule(data=st.data())
    def go(self, data) -> None:
        key = data.draw(st.sampled_from(sorted(self.reserved)))
        self.ledger.charge(key[0], key[1], "ecdf")
        # the noisy release left the server; a second release under a replayed id adds to the first
        self.released[key] = self.released.get(key, Fraction(0)) + self.reserved.pop(key)

    @precondition(lambda self: self.reserved)
    @rule(data=st.data())
    def abort(self, data) -> None:
        key = data.draw(st.sampled_from(sorted(self.reserved)))
        self.ledger.unreserve(*key)
        del self.reserved[key]

    @rule(
        ds=st.sampled_from(sorted(DATASETS)),
        pairs=st.lists(st.tuples(st.sampled_from(RIDS), EPS), min_size=1, max_size=3),
    )
    def adopt(self, ds: str, pairs) -> None:
        try:
            self.ledger.adopt(ds, pairs, DATASETS[ds])
        except QueryRefused:
            assert any((ds, rid) in self.reserved for rid, _ in pairs)
            return
        assert not any((ds, rid) in self.reserved for rid, _ in pairs)

    @rule()
    def restart(self) -> None:
        """A crash and restart: reservations are lost (those releases never happen), the ledger is re-read."""
        self.storage.close()
        self._open()
        self.reserved.clear()

    @invariant()
    def released_within_every_budget(self) -> None:
        for ds in DATASETS:
            for scope, budget in _scopes(ds):
                assert self._in_scope(self.released, scope) + self._in_scope(self.reserved, scope) <= budget, scope

    @invariant()
    def reservations_are_what_is_in_flight(self) -> None:
        for ds in DATASETS:
            assert self.ledger.reserved(ds) == self._in_scope(self.reserved, f"dataset:{ds}")
        for owner in ("alice", "bob"):
            assert self.ledger.owner_reserved(owner) == self._in_scope(self.reserved, f"owner:{owner}")
        assert self.ledger.total_reserved() == sum(self.reserved.values(), Fraction(0))

    @invariant()
    def ledger_never_below_what_was_released(self) -> None:
        everything = self.storage.ledger_all()
        for ds in DATASETS:
            on_disk = {e.rid: e for e in everything.get(ds, [])}
            for (d, rid), eps in self.released.items():
                if d == ds:
                    assert on_disk[rid].epsilon >= eps and set(DATASETS[ds]) <= set(on_disk[rid].owners)
            for e in on_disk.values():  # every charge, adopted too, counts against the dataset's owners
                assert set(DATASETS[ds]) <= set(e.owners), (ds, e)
            assert self.ledger.spent(ds) == sum((e.epsilon for e in on_disk.values()), Fraction(0))
            assert self.ledger.spent(ds) >= self._in_scope(self.released, f"dataset:{ds}")
        for owner in ("alice", "bob"):
            assert self.ledger.owner_spent(owner) >= self._in_scope(self.released, f"owner:{owner}")
            assert self.ledger.owner_spent(owner) == sum(
                (e.epsilon for es in everything.values() for e in es if owner in e.owners), Fraction(0)
            )
        assert self.ledger.total_spent() >= sum(self.released.values(), Fraction(0))


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(
    max_examples=150, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


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
    with pytest.raises(QueryRefused, match="already prepared or done"):  # a replayed id is not released again
        led.reserve("d", Fraction(10), "r" * 16, Fraction(1))
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


# --------------------------------------------------------------------------- budgets that follow the people


def test_a_schema_1_state_is_migrated_with_its_charges_on_the_unknown_owner(tmp_path):
    import sqlite3

    path = str(tmp_path / "ecdf-server-0.db")
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '1'), ('server_id', '0');
        CREATE TABLE datasets (name TEXT PRIMARY KEY, scheme TEXT NOT NULL, m INTEGER NOT NULL,
            domain_bits INTEGER NOT NULL, output_bits INTEGER NOT NULL, series TEXT NOT NULL, budget TEXT NOT NULL,
            meta TEXT NOT NULL, grid_bits INTEGER, thresholds TEXT, round TEXT, created REAL NOT NULL);
        INSERT INTO datasets VALUES ('d', 'dcf', 2, 6, 32, '{"all": 1}', '10', '{}', NULL, NULL, NULL, 1.0);
        CREATE TABLE uploads (dataset TEXT NOT NULL REFERENCES datasets(name), upload_id TEXT NOT NULL,
            seq INTEGER NOT NULL, committed REAL NOT NULL, PRIMARY KEY (dataset, upload_id));
        INSERT INTO uploads VALUES ('d', 'aaaaaaaaaaaaaaaa', 1, 1.0);
        CREATE TABLE ledger (dataset TEXT NOT NULL, rid TEXT NOT NULL, epsilon TEXT NOT NULL, how TEXT NOT NULL,
            at REAL NOT NULL, PRIMARY KEY (dataset, rid));
        INSERT INTO ledger VALUES ('d', 'bbbbbbbbbbbbbbbb', '7/2', 'released', 1.0);
    """)
    db.close()
    storage = SQLiteStorage(path, 0)
    try:
        assert storage.owners("d") == [""]
        assert storage.ledger("d") == [LedgerEntry("bbbbbbbbbbbbbbbb", Fraction(7, 2), "released", 1.0, ("",))]
        led = Ledger(storage, 0, owner_budget=Fraction(4))
        led.load()
        assert led.owner_spent("") == Fraction(7, 2)
        with pytest.raises(BudgetExceeded, match="uploads without a certificate"):
            led.reserve("e", Fraction(10), "c" * 16, Fraction(1), [""])
    finally:
        storage.close()
    again = sqlite3.connect(path)
    assert again.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("2",)
