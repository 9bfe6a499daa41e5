"""The privacy ledger of one ECDF server: what each dataset has spent, reserved and may still spend.

What it does
    Every release is charged against its dataset's budget (an exact
    :class:`fractions.Fraction` of epsilon; charges add up exactly, 0.6 + 0.4
    is 1).  A release goes through three steps on every server:

    1. **reserve** (request ``prepare``): the charge is checked against
       budget - spent - reserved and held in memory.  A refusal by any server
       aborts the release on all of them, and nothing is charged.
    2. **charge** (request ``go``): the ledger row is written durably
       (:meth:`pairwise.protocols.ecdf.storage.Storage.record_charges`, fsync)
       *before* any noise is drawn or any share leaves the server.  A crash
       after this point loses the release, never the charge.
    3. the reservation disappears with the request (an abort, a refused
       peer, a closed connection release it).

    **Agreement between servers.**  Each server enforces its own ledger, so
    the dataset stays protected as long as one server's ledger is intact.  A
    crash in the middle of a release can leave one server with a charge the
    others lack (it received ``go``, they did not).  The querier compares
    the servers' :meth:`Ledger.digest` before each release and on ``ecdf
    status``; when they differ it reads every server's entries and asks each
    to *adopt* the ones it lacks (:meth:`Ledger.adopt`), so all ledgers
    become the union: always the conservative choice (a charge is never
    removed, only added).  A charge for a release id is the largest ever
    reserved, charged or adopted for it: adopting never lowers an entry, and
    an id that is reserved or in flight cannot be adopted at all.

Security model
    The ledger is the DP accounting of the dataset: basic composition over
    all releases (each entry is the epsilon of one release, already summed
    over its series).  Charges never decrease; only a querier (the role that
    may spend budget anyway) can make a server adopt a charge.  Every
    release is additionally (eps, delta)-DP with the delta reported in its
    reply; deltas are not budgeted.
"""

from __future__ import annotations

import hashlib
import threading
from fractions import Fraction

from .storage import LedgerEntry, Storage
from .wire import BudgetExceeded, QueryRefused, fmt_eps

__all__ = ["LEDGER_PAGE", "Ledger"]

#: Ledger entries per ``ledger``/``adopt`` message.
LEDGER_PAGE = 2000


class Ledger:
    """Spent (durable) and reserved (in memory) epsilon per dataset of one server."""

    def __init__(self, storage: Storage, server_id: int) -> None:
        self._storage = storage
        self._server_id = server_id
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, LedgerEntry]] = {}
        self._reserved: dict[str, dict[str, Fraction]] = {}

    def load(self, dataset: str) -> None:
        """Read ``dataset``'s charges from storage (at startup)."""
        entries = {e.rid: e for e in self._storage.ledger(dataset)}
        with self._lock:
            self._entries[dataset] = entries

    # ------------------------------------------------------------------ views
    def spent(self, dataset: str) -> Fraction:
        with self._lock:
            return sum((e.epsilon for e in self._entries.get(dataset, {}).values()), Fraction(0))

    def reserved(self, dataset: str) -> Fraction:
        with self._lock:
            return sum(self._reserved.get(dataset, {}).values(), Fraction(0))

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
        part = items[offset:offset + LEDGER_PAGE]
        return [list(x) for x in part], offset + LEDGER_PAGE < len(items)

    # ------------------------------------------------------------------ steps
    def reserve(self, dataset: str, budget: Fraction, rid: str, charge: Fraction) -> None:
        """Hold ``charge`` for release ``rid``, or raise :class:`BudgetExceeded` (nothing held)."""
        with self._lock:
            spent = sum((e.epsilon for e in self._entries.get(dataset, {}).values()), Fraction(0))
            res = self._reserved.setdefault(dataset, {})
            if rid in res or rid in self._entries.get(dataset, {}):
                raise QueryRefused(f"release {rid} is already prepared or done")
            held = sum(res.values(), Fraction(0))
            if spent + held + charge > budget:
                raise BudgetExceeded(
                    f"privacy budget of dataset {dataset!r} exhausted on server {self._server_id}: "
                    f"spent {fmt_eps(spent)}" + (f" (+{fmt_eps(held)} reserved)" if held else "")
                    + f", this release needs {fmt_eps(charge)}, budget {fmt_eps(budget)}")
            res[rid] = charge

    def unreserve(self, dataset: str, rid: str) -> None:
        with self._lock:
            self._reserved.get(dataset, {}).pop(rid, None)

    def charge(self, dataset: str, rid: str, kind: str) -> Fraction:
        """Turn reservation ``rid`` into a durable ledger entry; returns the total spent afterwards.

        Returns only once the entry is on disk.  If writing fails the
        reservation is kept (the caller's request fails and releases it) and
        nothing is released.  While the entry is being written the id stays
        reserved, so :meth:`adopt` cannot slip a smaller charge under it.
        """
        with self._lock:
            charge = self._reserved.get(dataset, {}).get(rid)
        if charge is None:
            raise QueryRefused("the release was not prepared")
        entry = LedgerEntry(rid, charge, "released")
        self._storage.record_charges(dataset, [entry])  # durable before any noise or share
        with self._lock:
            self._reserved[dataset].pop(rid, None)
            self._merge(dataset, entry)
            return sum((e.epsilon for e in self._entries[dataset].values()), Fraction(0))

    def adopt(self, dataset: str, pairs: list) -> int:
        """Add the charges another server recorded; returns how many entries grew or are new.

        Each adopted charge only ever raises this server's entry for its
        release id to the larger of the two (never lowers or replaces it).  A
        release id that is reserved here -- prepared, or being charged -- is
        refused with nothing recorded: the querier chooses release ids, and an
        adopted entry must never stand in for the charge of a release that is
        still in flight.
        """
        with self._lock:
            held = self._reserved.get(dataset, {})
            busy = sorted({rid for rid, _ in pairs if rid in held})
            if busy:
                raise QueryRefused(f"release {busy[0]} is prepared or in flight on server {self._server_id}; "
                                   "a ledger entry can only be adopted for a release that has ended")
            have = self._entries.get(dataset, {})
            new = {}
            for rid, eps in pairs:
                cur = have.get(rid)
                if (cur is None or eps > cur.epsilon) and eps > new.get(rid, Fraction(0)):
                    new[rid] = eps
            if not new:
                return 0
            # hold the ids while the rows are written, so no prepare can take them meanwhile
            for rid in new:
                held[rid] = Fraction(0)
        try:
            entries = [LedgerEntry(rid, eps, "adopted") for rid, eps in new.items()]
            self._storage.record_charges(dataset, entries)
            with self._lock:
                return sum(self._merge(dataset, e) for e in entries)
        finally:
            with self._lock:
                for rid in new:
                    held.pop(rid, None)

    def _merge(self, dataset: str, entry: LedgerEntry) -> bool:
        """Keep the larger charge for ``entry.rid`` in memory (as storage does on disk); True if it grew."""
        have = self._entries.setdefault(dataset, {})
        cur = have.get(entry.rid)
        if cur is not None and cur.epsilon >= entry.epsilon:
            return False
        have[entry.rid] = entry
        return True
