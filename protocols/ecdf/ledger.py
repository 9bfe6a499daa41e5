"""The privacy ledger of one ECDF server: what each dataset, each data owner and the server have spent.

What it does
    Every release is charged (an exact :class:`fractions.Fraction` of
    epsilon; 0.6 + 0.4 is 1) against three budgets, each its own *unit of
    privacy*: the **dataset** budget (``--budget``, ``--dataset-budget``),
    the **owner** budget (``--budget-per-owner``: every dataset holding an
    upload of one data owner draws from it) and the **server-wide** budget
    (``--budget-total``).

    A release goes through three steps on every server: 1. **reserve**
    (request ``prepare``): the charge is checked against budget - spent -
    reserved of every scope and held in memory; 2. **charge** (request
    ``go``): the ledger row is written durably *before* any noise is drawn
    or any share leaves the server; 3. the reservation disappears with the
    request.  The querier compares the servers' :meth:`Ledger.digest` and
    asks each to *adopt* the entries it lacks (:meth:`Ledger.adopt`); a
    charge for a release id is the largest ever reserved, charged or adopted
    for it.  The scopes and the agreement between servers in full:
    ``docs/ecdf-server.md``, "The privacy ledger".

Security model
    Basic composition over all releases; charges never decrease.  The
    querier chooses release ids and may call ``adopt`` -- it is the party the
    budgets limit -- so no sequence of its requests may release more than a
    budget: ``tests/protocols/ecdf/test_ecdf_ledger.py`` checks that with a
    stateful property-based test over the ledger,
    ``tests/system/test_ecdf_ledger_processes.py`` over two real servers.
    Each server enforces its own ledger, so the data stay protected as long
    as one server's ledger is intact.  Every release is additionally
    (eps, delta)-DP with the delta reported in its reply; deltas are not
    budgeted.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from fractions import Fraction

from .ops import LEDGER_PAGE
from .storage import LedgerEntry, Storage
from .wire import BudgetExceeded, QueryRefused, fmt_eps

__all__ = ["LEDGER_PAGE", "Ledger"]


@dataclass
class _Scope:
    """Running sums of one budget scope (a dataset, an owner, or the server)."""

    spent: Fraction = Fraction(0)
    held: Fraction = Fraction(0)


def _scopes(dataset: str, owners) -> list[tuple[str, str]]:
    return [("dataset", dataset), *(("owner", o) for o in sorted(set(owners))), ("total", "")]


def _owner_label(owner: str) -> str:
    return repr(owner) if owner else "(uploads without a certificate)"


class Ledger:
    """Spent (durable) and reserved (in memory) epsilon per dataset, per data owner and per server.

    ``owner_budget`` / ``total_budget``: the budget of every data owner and of
    the whole server (None: no such limit).
    """

    def __init__(
        self,
        storage: Storage,
        server_id: int,
        *,
        owner_budget: Fraction | None = None,
        total_budget: Fraction | None = None,
    ) -> None:
        self._storage = storage
        self._server_id = server_id
        self.owner_budget = owner_budget
        self.total_budget = total_budget
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, LedgerEntry]] = {}
        self._reserved: dict[str, dict[str, tuple[Fraction, tuple[str, ...]]]] = {}
        self._sums: dict[tuple[str, str], _Scope] = {}

    def load(self, dataset: str | None = None) -> None:
        """Read the charges of ``dataset`` (None: of every dataset) from storage (at startup)."""
        stored = self._storage.ledger_all() if dataset is None else {dataset: self._storage.ledger(dataset)}
        with self._lock:
            for name, entries in stored.items():
                for e in self._entries.pop(name, {}).values():
                    self._add(name, e, -1)
                self._entries[name] = {}
                for e in entries:
                    self._entries[name][e.rid] = e
                    self._add(name, e, +1)
            if dataset is not None:
                self._entries.setdefault(dataset, {})

    def _add(self, dataset: str, e: LedgerEntry, sign: int) -> None:
        for key in _scopes(dataset, e.owners):
            self._sums.setdefault(key, _Scope()).spent += sign * e.epsilon

    def _hold(self, dataset: str, charge: Fraction, owners, sign: int) -> None:
        for key in _scopes(dataset, owners):
            self._sums.setdefault(key, _Scope()).held += sign * charge

    # ------------------------------------------------------------------ views
    def _get(self, kind: str, name: str) -> _Scope:
        with self._lock:
            sc = self._sums.get((kind, name), _Scope())
            return _Scope(sc.spent, sc.held)

    def spent(self, dataset: str) -> Fraction:
        return self._get("dataset", dataset).spent

    def reserved(self, dataset: str) -> Fraction:
        return self._get("dataset", dataset).held

    def owner_spent(self, owner: str) -> Fraction:
        return self._get("owner", owner).spent

    def owner_reserved(self, owner: str) -> Fraction:
        return self._get("owner", owner).held

    def total_spent(self) -> Fraction:
        return self._get("total", "").spent

    def total_reserved(self) -> Fraction:
        return self._get("total", "").held

    def left(self, dataset: str, budget: Fraction, owners) -> Fraction:
        """What a new release of ``dataset`` (with these data owners) may still spend: the least of its scopes."""
        with self._lock:
            return min(
                b - sc.spent - sc.held
                for (kind, name), b in self._budgets(dataset, budget, owners)
                for sc in [self._sums.get((kind, name), _Scope())]
            )

    def _budgets(self, dataset: str, budget: Fraction, owners) -> list[tuple[tuple[str, str], Fraction]]:
        out = [(("dataset", dataset), budget)]
        if self.owner_budget is not None:
            out += [(("owner", o), self.owner_budget) for o in sorted(set(owners))]
        if self.total_budget is not None:
            out.append((("total", ""), self.total_budget))
        return out

    def releases(self, dataset: str) -> int:
        with self._lock:
            return len(self._entries.get(dataset, {}))

    def digest(self, dataset: str) -> str:
        """SHA-256 over the sorted (release id, epsilon) pairs: equal on two servers iff their ledgers agree."""
        with self._lock:
            items = sorted((e.rid, str(e.epsilon)) for e in self._entries.get(dataset, {}).values())
        h = hashlib.sha256(b"pairwise-ecdf/ledger\x00")
        for rid, eps in items:
            h.update(f"{rid}={eps};".encode())
        return h.hexdigest()

    def page(self, dataset: str, offset: int) -> tuple[list[list[str]], bool]:
        """Entries ``offset .. offset + LEDGER_PAGE`` as [rid, epsilon] (sorted by rid), and whether more follow."""
        with self._lock:
            items = sorted((e.rid, str(e.epsilon)) for e in self._entries.get(dataset, {}).values())
        part = items[offset : offset + LEDGER_PAGE]
        return [list(x) for x in part], offset + LEDGER_PAGE < len(items)

    # ------------------------------------------------------------------ steps
    def reserve(self, dataset: str, budget: Fraction, rid: str, charge: Fraction, owners=()) -> None:
        """Hold ``charge`` for release ``rid`` in every scope, or raise :class:`BudgetExceeded` (nothing held).

        ``owners``: the data owners whose uploads the release covers.
        """
        owners = tuple(sorted(set(owners)))
        with self._lock:
            res = self._reserved.setdefault(dataset, {})
            if rid in res or rid in self._entries.get(dataset, {}):
                raise QueryRefused(f"release {rid} is already prepared or done")
            for (kind, name), b in self._budgets(dataset, budget, owners):
                sc = self._sums.get((kind, name), _Scope())
                if sc.spent + sc.held + charge > b:
                    what = {
                        "dataset": f"dataset {name!r}",
                        "owner": f"data owner {_owner_label(name)}",
                        "total": "the whole server",
                    }[kind]
                    flag = {"dataset": "--budget", "owner": "--budget-per-owner", "total": "--budget-total"}[kind]
                    raise BudgetExceeded(
                        f"privacy budget of {what} exhausted on server {self._server_id}: "
                        f"spent {fmt_eps(sc.spent)}"
                        + (f" (+{fmt_eps(sc.held)} reserved)" if sc.held else "")
                        + f", this release needs {fmt_eps(charge)}, budget {fmt_eps(b)} ({flag})"
                    )
            res[rid] = (charge, owners)
            self._hold(dataset, charge, owners, +1)

    def unreserve(self, dataset: str, rid: str) -> None:
        with self._lock:
            got = self._reserved.get(dataset, {}).pop(rid, None)
            if got is not None:
                self._hold(dataset, got[0], got[1], -1)

    def charge(self, dataset: str, rid: str, kind: str) -> Fraction:
        """Turn reservation ``rid`` into a durable ledger entry; returns the dataset's total spent afterwards.

        Returns only once the entry is on disk.  If writing fails the
        reservation is kept (the caller's request fails and releases it) and
        nothing is released.  While the entry is being written the id stays
        reserved, so :meth:`adopt` cannot slip a smaller charge under it.
        """
        with self._lock:
            got = self._reserved.get(dataset, {}).get(rid)
        if got is None:
            raise QueryRefused("the release was not prepared")
        charge, owners = got
        entry = LedgerEntry(rid, charge, "released", owners=owners)
        self._storage.record_charges(dataset, [entry])  # durable before any noise or share
        with self._lock:
            self._reserved[dataset].pop(rid, None)
            self._hold(dataset, charge, owners, -1)
            self._merge(dataset, entry)
            return self._sums[("dataset", dataset)].spent

    def adopt(self, dataset: str, pairs: list, owners=()) -> int:
        """Add the charges another server recorded; returns how many entries grew or are new.

        Each adopted charge only ever raises this server's entry for its
        release id to the larger of the two (never lowers or replaces it), and
        is charged to ``owners`` (the dataset's data owners on this server).  A
        release id that is reserved here -- prepared, or being charged -- is
        refused with nothing recorded: the querier chooses release ids, and an
        adopted entry must never stand in for the charge of a release that is
        still in flight.
        """
        owners = tuple(sorted(set(owners)))
        with self._lock:
            held = self._reserved.setdefault(dataset, {})
            busy = sorted({rid for rid, _ in pairs if rid in held})
            if busy:
                raise QueryRefused(
                    f"release {busy[0]} is prepared or in flight on server {self._server_id}; "
                    "a ledger entry can only be adopted for a release that has ended"
                )
            have = self._entries.get(dataset, {})
            new: dict[str, Fraction] = {}
            for rid, eps in pairs:
                cur = have.get(rid)
                if (cur is None or eps > cur.epsilon) and eps > new.get(rid, Fraction(0)):
                    new[rid] = eps
            if not new:
                return 0
            # hold the ids (at no charge) while the rows are written, so no prepare can take them meanwhile
            for rid in new:
                held[rid] = (Fraction(0), ())
        try:
            entries = [LedgerEntry(rid, eps, "adopted", owners=owners) for rid, eps in new.items()]
            self._storage.record_charges(dataset, entries)
            with self._lock:
                return sum(self._merge(dataset, e) for e in entries)
        finally:
            with self._lock:
                for rid in new:
                    held.pop(rid, None)

    def _merge(self, dataset: str, entry: LedgerEntry) -> bool:
        """Keep the larger charge for ``entry.rid`` in memory, as storage does on disk; True if it grew."""
        have = self._entries.setdefault(dataset, {})
        cur = have.get(entry.rid)
        if cur is not None:
            merged = LedgerEntry(
                entry.rid,
                max(cur.epsilon, entry.epsilon),
                entry.how if entry.epsilon > cur.epsilon else cur.how,
                cur.at,
                tuple(sorted(set(cur.owners) | set(entry.owners))),
            )
            if merged == cur:
                return False
            self._add(dataset, cur, -1)
            entry = merged
        have[entry.rid] = entry
        self._add(dataset, entry, +1)
        return cur is None or entry.epsilon > cur.epsilon
