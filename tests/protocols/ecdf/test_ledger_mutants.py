"""The ECDF ledger's bookkeeping, exactly: the cases a source-level mutation run found untested (issue 25 item 6).

``tests/mutation/source_mutants.py`` over ``protocols/ecdf/ledger.py`` left
mutants alive that keep every budget safe but break the ledger's accounting:
a charge that does not give back its reservation (the budget then shrinks by
every release twice), or an adopted *equal* charge that re-writes the entry
with the adopting server's current owners.  The state machine of
``test_ecdf_ledger.py`` checks safety (released <= budget), not that the
ledger's sums are exact, so these tests check the sums in every scope
against hand-computed Fractions.  Survivors and their fates:
``benchmarks/RESULTS.md``, "Source-level mutation run over the ECDF ledger and noise".
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from pairwise.protocols.ecdf.ledger import LEDGER_PAGE, Ledger
from pairwise.protocols.ecdf.storage import SQLiteStorage
from pairwise.protocols.ecdf.wire import BudgetExceeded

BUDGET = Fraction(1)
R, S = "a" * 16, "b" * 16


@pytest.fixture
def ledger(tmp_path):
    storage = SQLiteStorage(str(tmp_path / "ledger.db"), 0)
    yield storage, Ledger(storage, 0, owner_budget=Fraction(2), total_budget=Fraction(3))
    storage.close()


def _held(led: Ledger) -> tuple[Fraction, Fraction, Fraction]:
    return led.reserved("d"), led.owner_reserved("alice"), led.total_reserved()


def _spent(led: Ledger) -> tuple[Fraction, Fraction, Fraction]:
    return led.spent("d"), led.owner_spent("alice"), led.total_spent()


def test_a_charge_turns_its_reservation_into_spent_in_every_scope(ledger):
    """reserve 3/10 -> held 3/10 in the dataset, owner and server scopes; charge -> held 0, spent 3/10;
    the remaining 7/10 of the dataset budget can then be reserved exactly, and not a 10^-12 more."""
    storage, led = ledger
    led.reserve("d", BUDGET, R, Fraction(3, 10), ["alice"])
    assert _held(led) == (Fraction(3, 10),) * 3 and _spent(led) == (0, 0, 0)
    assert led.charge("d", R, "ecdf") == Fraction(3, 10)
    assert _held(led) == (0, 0, 0)
    assert _spent(led) == (Fraction(3, 10),) * 3
    assert led.left("d", BUDGET, ["alice"]) == Fraction(7, 10)
    with pytest.raises(BudgetExceeded):
        led.reserve("d", BUDGET, S, Fraction(7, 10) + Fraction(1, 10**12), ["alice"])
    led.reserve("d", BUDGET, S, Fraction(7, 10), ["alice"])
    assert _held(led) == (Fraction(7, 10),) * 3


def test_an_aborted_reservation_gives_back_exactly_what_it_held(ledger):
    _, led = ledger
    led.reserve("d", BUDGET, R, Fraction(2, 5), ["alice"])
    led.unreserve("d", R)
    assert _held(led) == (0, 0, 0) and _spent(led) == (0, 0, 0)
    assert led.left("d", BUDGET, ["alice"]) == BUDGET
    led.unreserve("d", R)  # a second abort of the same id changes nothing
    assert _held(led) == (0, 0, 0)
    led.reserve("d", BUDGET, S, BUDGET, ["alice"])


def test_adopting_an_equal_charge_changes_nothing_on_disk_or_in_memory(ledger):
    """A release charged to alice; another server reports the same charge while bob's upload is now here too.

    An adopted charge only ever *raises* an entry (module docstring); an equal one is not new, so bob (whose
    data the release did not cover) is not charged for it, and the stored entry keeps its owners and how.
    """
    storage, led = ledger
    led.reserve("d", BUDGET, R, Fraction(1, 2), ["alice"])
    led.charge("d", R, "ecdf")
    before = storage.ledger("d")
    assert led.adopt("d", [(R, Fraction(1, 2))], ["alice", "bob"]) == 0
    assert storage.ledger("d") == before and before[0].owners == ("alice",) and before[0].how == "released"
    assert led.owner_spent("bob") == 0 and _spent(led) == (Fraction(1, 2),) * 3
    again = Ledger(storage, 0, owner_budget=Fraction(2))
    again.load()
    assert again.owner_spent("bob") == 0 and again.owner_spent("alice") == Fraction(1, 2)


def test_adopt_counts_only_the_entries_that_grew_or_are_new(ledger):
    _, led = ledger
    led.reserve("d", BUDGET, R, Fraction(1, 2), ["alice"])
    led.charge("d", R, "ecdf")
    assert led.adopt("d", [(R, Fraction(1, 4))], ["alice"]) == 0  # smaller: ignored
    assert led.adopt("d", [(R, Fraction(1, 2)), (S, Fraction(1, 8))], ["alice"]) == 1  # S is new
    assert led.adopt("d", [(R, Fraction(3, 4)), (S, Fraction(1, 8))], ["alice"]) == 1  # R grew
    assert led.spent("d") == Fraction(7, 8) and led.releases("d") == 2


def test_reloading_one_dataset_replaces_its_sums(ledger):
    """load(dataset) (a dataset created again under a name with a ledger) re-reads its charges: not added twice."""
    _, led = ledger
    led.reserve("d", BUDGET, R, Fraction(1, 3), ["alice"])
    led.charge("d", R, "ecdf")
    led.load("d")
    led.load("d")
    assert _spent(led) == (Fraction(1, 3),) * 3 and led.releases("d") == 1
    led.load()
    assert _spent(led) == (Fraction(1, 3),) * 3


def test_the_ledger_pages_say_whether_more_follow(ledger):
    _, led = ledger
    rids = [f"{i:016x}" for i in range(LEDGER_PAGE + 1)]
    led.adopt("d", [(r, Fraction(1, 10**6)) for r in rids], ["alice"])
    first, more = led.page("d", 0)
    assert [r for r, _ in first] == rids[:LEDGER_PAGE] and more is True
    last, more = led.page("d", LEDGER_PAGE)
    assert last == [[rids[-1], "1/1000000"]] and more is False
    assert led.page("d", LEDGER_PAGE + 1) == ([], False)
