"""Budgets and counts hold under any sequence of requests (hypothesis stateful tests).

* A user's own ledger: whatever tasks an aggregator offers, in any order,
  with retries and restarts, the user never spends more than its budget and
  never pays for one task twice.
* Hostile users against a real aggregator (this process, loopback TCP): any
  sequence of joins, valid, invalid, replayed and conflicting reports,
  reports without a join, a close and aggregator restarts counts each user's
  first valid report exactly once, and nothing after the close.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import HealthCheck, settings
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pairwise.protocols.collect.ledger import open_ledger
from pairwise.protocols.collect.wire import (
    ROLE_USER,
    AlreadyJoined,
    BadReport,
    CapExceeded,
    CollectError,
    RegistrationClosed,
    call,
    connect,
)

from .conftest import Study

EPS = [Fraction(1, 10), Fraction(1, 3), Fraction(1, 2), Fraction(1), Fraction(2)]


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="pairwise-ledger-")
        self.budget = Fraction(3)
        self.ledger = open_ledger(self.dir)
        self.charged: dict[tuple[str, str], Fraction] = {}

    @rule(agg=hs.sampled_from(["a", "b"]), task=hs.integers(0, 5), eps=hs.sampled_from(EPS))
    def charge(self, agg, task, eps):
        key = (agg, str(task))
        fits = sum(self.charged.values(), Fraction(0)) + eps <= self.budget
        try:
            new = self.ledger.charge(agg, str(task), "ldp-ustat", eps, 0.0, self.budget)
        except CapExceeded:
            assert key not in self.charged and not fits
            return
        assert new == (key not in self.charged)
        if new:
            assert fits
            self.charged[key] = eps

    @rule(agg=hs.sampled_from(["a", "b"]), task=hs.integers(0, 5), cell=hs.integers(0, 9))
    def keep(self, agg, task, cell):
        key = (agg, str(task))
        if key not in self.charged:
            return
        kept = self.ledger.keep_report(agg, str(task), {"cell": cell})
        first = self.ledger.entry(agg, str(task))["report"]
        assert kept == first  # the first report kept is the one every retry sends

    @rule()
    def reopen(self):
        self.ledger.close()
        self.ledger = open_ledger(self.dir)

    @invariant()
    def never_above_the_budget(self):
        spent = self.ledger.spent()
        assert spent == sum(self.charged.values(), Fraction(0)) and spent <= self.budget

    def teardown(self):
        self.ledger.close()


TestLedger = LedgerMachine.TestCase
TestLedger.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class HostileUsers(RuleBasedStateMachine):
    """Users u0..u2 drive raw requests; the model is what the aggregator must have counted."""

    def __init__(self) -> None:
        super().__init__()
        import pathlib
        import tempfile

        self.study = Study(pathlib.Path(tempfile.mkdtemp(prefix="pairwise-collect-")), timeout=30)
        self.study.create("ldp-ustat", "t", epsilon=1, kernel="gini", lower=0, upper=10, min_users=2, deadline=3600)
        self.joined: set[str] = set()
        self.counted: dict[str, int] = {}
        self.closed = False

    def _req(self, user: str, **msg):
        ch = connect(("127.0.0.1", self.study.port), ROLE_USER, timeout=30)
        try:
            return call(ch, {**msg, "user": user})
        finally:
            ch.close()

    @rule(user=hs.sampled_from(["u0", "u1", "u2"]))
    def join(self, user):
        try:
            self._req(user, op="join", task="t")
        except RegistrationClosed:
            assert self.closed  # a local-model task takes no join after its close, not even a repeat
            return
        assert not self.closed
        self.joined.add(user)

    @rule(
        user=hs.sampled_from(["u0", "u1", "u2"]),
        report=hs.one_of(
            hs.integers(-3, 12).map(lambda c: {"cell": c}),
            hs.just({"cell": "2"}),
            hs.just({}),
            hs.just([1]),
            hs.just({"cell": 1, "x": 0}),
        ),
    )
    def report(self, user, report):
        valid = (
            isinstance(report, dict)
            and set(report) == {"cell"}
            and isinstance(report["cell"], int)
            and 0 <= report["cell"] < 8
        )
        try:
            reply = self._req(user, op="report", task="t", report=report)
        except RegistrationClosed:
            assert self.closed
            return
        except BadReport:
            assert not valid
            return
        except AlreadyJoined:
            assert self.counted.get(user) not in (None, report.get("cell"))
            return
        except CollectError:
            assert user not in self.joined  # "join first"
            return
        assert valid and user in self.joined and not self.closed
        assert reply["duplicate"] == (user in self.counted)
        self.counted.setdefault(user, report["cell"])

    @precondition(lambda self: not self.closed)
    @rule()
    def close(self):
        with self.study.collector() as c:
            c.close_task("t")
        self.closed = True

    @rule()
    def restart(self):
        self.study.stop()
        self.study.start()

    @invariant()
    def each_first_valid_report_counted_once(self):
        t = self.study.show("t")
        assert t["reports"] == len(self.counted)
        if self.closed:
            assert t["state"] in ("done", "failed")
            if len(self.counted) >= 2:
                assert self.study.result("t")["n"] == len(self.counted)

    def teardown(self):
        self.study.stop()


TestHostileUsers = HostileUsers.TestCase
TestHostileUsers.settings = settings(
    max_examples=12, stateful_step_count=14, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
