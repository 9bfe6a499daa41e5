"""The ECDF privacy ledger against a hostile querier, over two real server processes (issue 22).

The in-process ledger, its state machine over one SQLite file and the schema migration are in
tests/protocols/ecdf/test_ecdf_ledger.py; here the same attack is replayed against ``ecdf serve``
processes (:class:`pairwise.protocols.ecdf.client.ServerProcesses`), killed and restarted on their state.
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, upload
from pairwise.protocols.ecdf.wire import ROLE_QUERIER, BudgetExceeded, connect, recv_json, send_json


def _querier_channels(sp):
    return [
        connect(a, ROLE_QUERIER, label=f"server {j}", connect_timeout=10, timeout=60)
        for j, a in enumerate(sp.addresses)
    ]


def test_adopting_a_prepared_release_id_cannot_shrink_its_charge_across_a_restart(tmp_path):
    """The attack of issue 22: prepare R at 8, adopt [R, 1e-12] on a second connection, go, restart."""
    x = np.random.default_rng(3).integers(0, 64, 50)
    rid = "ab" * 12
    with ServerProcesses(2, budget="10", timeout=60, state_dir=str(tmp_path)) as sp:
        upload(sp.addresses, "d", x, domain_bits=6)
        chans = _querier_channels(sp)
        other = _querier_channels(sp)
        try:
            prep = {
                "op": "prepare",
                "kind": "ecdf",
                "series": ["all"],
                "epsilon": "8",
                "mechanism": "paper",
                "grid_bits": None,
                "tolerate": 0,
                "thresholds": None,
                "rid": rid,
                "dataset": "d",
                "servers": [[h, p] for h, p in sp.addresses],
            }
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


def test_the_same_people_under_a_new_dataset_id_draw_from_their_owners_budget(tmp_path):
    """Issue 22: re-uploading one CSV under a new id gave a fresh budget (epsilon 20 on 10)."""
    from pairwise.mpc.tls import TLSConfig, create_certificate

    x = np.random.default_rng(5).integers(0, 64, 40)
    with ServerProcesses(2, budget="10", timeout=60, tls=True) as sp:
        create_certificate(sp.tls_dir, "owner-b", "client", days=2)
        other_owner = TLSConfig(sp.tls_dir, "owner-b")
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10, tls=sp.querier_tls)
        upload(sp.addresses, "scores", x, domain_bits=6, tls=sp.client_tls)
        q.ecdf("scores", 10)
        upload(sp.addresses, "scores-again", x, domain_bits=6, tls=sp.client_tls)  # same owner, new id
        with pytest.raises(BudgetExceeded, match=r"data owner 'ecdf-client' exhausted.*--budget-per-owner"):
            q.ecdf("scores-again", 1)
        info = q.status("scores-again")[0]["info"]
        assert info["left"] == "0" and info["spent"] == "0"
        assert info["owners"] == [{"owner": "ecdf-client", "spent": "10", "reserved": "0", "budget": "10"}]
        # another owner's people are not theirs: a fresh owner budget
        upload(sp.addresses, "other", x, domain_bits=6, tls=other_owner)
        q.ecdf("other", 4)
        # an owner who appends to a dataset is charged for its releases too (the release covers its people)
        upload(sp.addresses, "other", x, client_ids=np.arange(100, 140), domain_bits=6, tls=sp.client_tls, append=True)
        with pytest.raises(BudgetExceeded, match="'ecdf-client'"):
            q.ecdf("other", 1)


def test_the_same_csv_under_a_new_dataset_id_on_the_command_line_cannot_double_the_spend(tmp_path):
    """Issue 22 with the real CLI: `ecdf upload --dataset scores-again` of the same CSV got a fresh budget (epsilon
    20 of 10), and the DatasetExists refusal suggested exactly that ("upload under a new dataset id")."""
    import json
    import subprocess
    import sys

    def run(*args: str) -> tuple[int, str, str]:
        p = subprocess.run(
            [sys.executable, "-m", "pairwise", "ecdf", *args], capture_output=True, text=True, timeout=180
        )
        return p.returncode, p.stdout, p.stderr

    csv = tmp_path / "scores.csv"
    csv.write_text("score\n" + "".join(f"{v}\n" for v in np.random.default_rng(9).uniform(0, 30, 60).round(2)))
    with ServerProcesses(2, budget="10", timeout=60) as sp:
        where = ["--servers", sp.servers]
        up = ["upload", *where, "--data", str(csv), "--columns", "score", "--lower", "0", "--upper", "30"]
        up += ["--domain-bits", "6", "--json"]
        code, out, err = run(*up, "--dataset", "scores")
        assert code == 0, err
        code, out, err = run("query", *where, "--dataset", "scores", "--epsilon", "10", "--json")
        assert code == 0, err
        code, out, err = run(*up, "--dataset", "scores")  # the id is taken: the refusal names no loophole
        assert code != 0 and "already exists" in err and "ecdf query" in err, err
        assert "a new id does not renew" in " ".join(err.split()) and "upload under a new" not in err, err
        code, out, err = run(*up, "--dataset", "scores-again")  # the same people under a new id: accepted...
        assert code == 0, err
        code, out, err = run("query", *where, "--dataset", "scores-again", "--epsilon", "1", "--json")
        assert code != 0 and "exhausted" in err and "--budget-per-owner" in err, err  # ...with no budget left
        code, out, err = run("status", *where, "--dataset", "scores-again", "--json")
        assert code == 0, err
        for server in json.loads(out):
            info = server["info"]
            assert (info["spent"], info["left"]) == ("0", "0"), info
            assert [(o["spent"], o["budget"]) for o in info["owners"]] == [("10", "10")], info


def test_an_operator_may_opt_out_of_owner_budgets_and_cap_the_whole_server(tmp_path):
    x = np.random.default_rng(6).integers(0, 64, 40)
    with ServerProcesses(
        2, budget="10", timeout=60, extra_args=("--budget-per-owner", "none", "--budget-total", "15")
    ) as sp:
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)
        upload(sp.addresses, "a", x, domain_bits=6)
        upload(sp.addresses, "b", x, domain_bits=6)
        q.ecdf("a", 10)
        q.ecdf("b", 5)  # per-dataset budgets only: b has its own 10, but the server has 5 left
        with pytest.raises(BudgetExceeded, match=r"the whole server exhausted.*--budget-total"):
            q.ecdf("b", 1)
        info = q.status("b")[0]["info"]
        assert info["total"] == {"spent": "15", "reserved": "0", "budget": "15"} and info["left"] == "0"


class _Slot:
    """One release a querier has prepared on both servers (its own connections)."""

    def __init__(self, chans, rid: str, eps: Fraction) -> None:
        self.chans, self.rid, self.eps = chans, rid, eps
        self.held_by = {0, 1}  # the servers that still hold its reservation (a restart forgets it)

    def close(self) -> None:
        for ch in self.chans:
            ch.close()


def _ask(ch, msg: dict) -> dict:
    from pairwise.mpc.errors import ChannelError

    try:
        send_json(ch, msg)
        return recv_json(ch, timeout=60)
    except (ChannelError, OSError) as exc:
        return {"ok": False, "error": str(exc), "code": "channel"}


EPS = st.sampled_from([Fraction(3, 10), Fraction(3, 5)])


class TwoServerMachine(RuleBasedStateMachine):
    """A hostile querier against two real servers: any interleaving of prepare, go (one release, or two at
    once), abort, adopt, status, replayed release ids, and kill -9 and restart of either server.

    After every step, on both servers: every release the querier holds (both servers' shares) is charged at
    least its epsilon in the ledger in memory (request ``ledger``) and on disk (the SQLite file), memory and
    disk hold the same entries, and the released epsilon plus what is still reserved there is at most the
    budget.  After a ``status`` (which reconciles) the two servers' ledgers agree."""

    sp: ServerProcesses  # set by the test below, shared by every example (each example has its own dataset)
    BUDGET = Fraction(1)  # two reservations of 0.6 in flight at once exceed it (the ``held`` term)

    def __init__(self) -> None:
        super().__init__()
        self.ds = "m" + os.urandom(6).hex()
        upload(self.sp.addresses, self.ds, np.arange(16) % 8, domain_bits=3, timeout=60, connect_timeout=10)
        self.slots: dict[int, _Slot] = {}
        self.released: dict[str, Fraction] = {}  # release id -> epsilon the querier got under it (summed)
        self.used: list[str] = []  # release ids the querier has used (replayed by prepare and adopt)

    def teardown(self) -> None:
        for s in self.slots.values():
            s.close()

    def _rid(self, data, flying_first: bool = False) -> str:
        """A fresh release id or a replayed one (most often one already released), or (``flying_first``) most
        often one in flight."""
        flying = sorted(s.rid for s in self.slots.values())
        if flying_first and flying and data.draw(st.booleans()):
            return data.draw(st.sampled_from(flying))
        if self.used and data.draw(st.booleans()):
            return data.draw(st.sampled_from(sorted(self.released) or self.used))
        rid = os.urandom(8).hex()
        self.used.append(rid)
        return rid

    def _prepare(self, rid: str, eps: Fraction) -> None:
        from pairwise.mpc.errors import ChannelError

        try:
            chans = _querier_channels(self.sp)
        except (ChannelError, OSError):
            return
        prep = {
            "op": "prepare",
            "kind": "ecdf",
            "series": ["all"],
            "epsilon": str(eps),
            "mechanism": "paper",
            "grid_bits": None,
            "tolerate": 0,
            "thresholds": None,
            "rid": rid,
            "dataset": self.ds,
            "servers": [[h, p] for h, p in self.sp.addresses],
        }
        replies = [_ask(ch, prep) for ch in chans]
        if all(r["ok"] for r in replies):
            self.slots[min({0, 1} - set(self.slots))] = _Slot(chans, rid, eps)
            return
        for ch, r in zip(chans, replies):
            if r["ok"]:
                _ask(ch, {"op": "abort"})
            ch.close()

    @precondition(lambda self: len(self.slots) < 2)
    @rule(data=st.data(), eps=EPS)
    def prepare(self, data, eps: Fraction) -> None:
        self._prepare(self._rid(data), eps)

    @precondition(lambda self: not self.slots)
    @rule(data=st.data(), eps=st.tuples(EPS, EPS))
    def prepare_two_at_once(self, data, eps: tuple[Fraction, Fraction]) -> None:
        """Two releases reserved at once on every server (their charges must fit in the budget together)."""
        for e in eps:
            self._prepare(os.urandom(8).hex(), e)

    def _go(self, slots: list[_Slot]) -> None:
        """Start every slot's release on both servers, then wait for every reply: each server has finished
        (charged, released or failed) before the invariants read its ledger."""
        from pairwise.mpc.errors import ChannelError

        try:
            live = [s for s in slots if _ask(s.chans[0], {"op": "link"})["ok"]]
            sent = []
            for slot in live:
                for ch in slot.chans:
                    try:
                        send_json(ch, {"op": "go"})
                        sent.append((slot, ch))
                    except (ChannelError, OSError):
                        pass
            got = {id(s): 0 for s in live}
            for slot, ch in sent:
                try:
                    h = recv_json(ch, timeout=120)
                    if h.get("ok"):
                        ch.recv_array(np.int64 if h["encoding"] == "values" else np.uint64, int(h["count"]))
                        got[id(slot)] += 1
                except (ChannelError, OSError, KeyError):
                    pass
            for slot in live:
                if got[id(slot)] == 2:  # both servers' shares: the querier holds the noisy release
                    self.released[slot.rid] = self.released.get(slot.rid, Fraction(0)) + slot.eps
        finally:
            for slot in slots:
                slot.close()

    @precondition(lambda self: self.slots)
    @rule(data=st.data())
    def go(self, data) -> None:
        self._go([self.slots.pop(data.draw(st.sampled_from(sorted(self.slots))))])

    @precondition(lambda self: len(self.slots) == 2)
    @rule()
    def go_both_at_once(self) -> None:
        """Two prepared releases run concurrently (two garbled-circuit sessions between the servers)."""
        slots = [self.slots.pop(k) for k in sorted(self.slots)]
        self._go(slots)

    @precondition(lambda self: self.slots)
    @rule(data=st.data())
    def abort(self, data) -> None:
        k = data.draw(st.sampled_from(sorted(self.slots)))
        slot = self.slots.pop(k)
        for ch in slot.chans:
            _ask(ch, {"op": "abort"})
        slot.close()

    @rule(j=st.integers(0, 1), data=st.data(), eps=st.sampled_from(["1e-12", "1/10"]))
    def adopt(self, j: int, data, eps: str) -> None:
        """Adopt a charge for an id, most often one in flight (the attack of issue 22)."""
        from pairwise.mpc.errors import ChannelError

        rid = self._rid(data, flying_first=True)
        try:
            ch = connect(self.sp.addresses[j], ROLE_QUERIER, label=f"server {j}", connect_timeout=10, timeout=60)
        except (ChannelError, OSError):
            return
        try:
            r = _ask(ch, {"op": "adopt", "dataset": self.ds, "entries": [[rid, eps]]})
        finally:
            ch.close()
        if any(s.rid == rid and j in s.held_by for s in self.slots.values()) and r.get("code") != "channel":
            assert not r["ok"] and "in flight" in r["error"], r  # never a charge under a reserved id

    @rule(j=st.integers(0, 1))
    def kill_and_restart(self, j: int) -> None:
        self.sp.kill(j, hard=True)
        self.sp.restart(j)
        for s in self.slots.values():
            s.held_by.discard(j)

    @rule()
    def status(self) -> None:
        from pairwise.protocols.ecdf.wire import ECDFError, ServerUnavailable

        try:
            out = ECDFQuerier(self.sp.addresses, timeout=60, connect_timeout=10).status(self.ds)
        except (ECDFError, ServerUnavailable):
            assert self.slots  # only a release in flight may stop the ledgers from being reconciled
            return
        assert len({r["info"]["ledger"] for r in out}) == 1, "the servers' ledgers disagree after a status"
        assert len({r["info"]["spent"] for r in out}) == 1, out

    @invariant()
    def released_within_budget_and_charged_on_both_servers(self) -> None:
        released = sum(self.released.values(), Fraction(0))
        for j in range(2):  # what a server admitted: released + still reserved there (the held term)
            held = sum((s.eps for s in self.slots.values() if j in s.held_by), Fraction(0))
            assert released + held <= self.BUDGET, (j, self.released, held)
        for j in range(2):
            memory, disk = self._in_memory(j), self._on_disk(j)
            assert memory == disk, (j, memory, disk)
            for rid, eps in self.released.items():
                assert disk.get(rid, Fraction(0)) >= eps, (j, rid, disk.get(rid), eps)

    def _in_memory(self, j: int) -> dict[str, Fraction]:
        """Server j's ledger of the dataset as it holds it in memory (request ``ledger``, page by page)."""
        ch = connect(self.sp.addresses[j], ROLE_QUERIER, label=f"server {j}", connect_timeout=10, timeout=60)
        out: dict[str, Fraction] = {}
        try:
            while True:
                r = _ask(ch, {"op": "ledger", "dataset": self.ds, "offset": len(out)})
                assert r["ok"], r
                out.update((rid, Fraction(eps)) for rid, eps in r["entries"])
                if not r["more"]:
                    return out
        finally:
            ch.close()

    def _on_disk(self, j: int) -> dict[str, Fraction]:
        """Server j's charges for the dataset as its state file holds them now (read-only, beside the server)."""
        import sqlite3

        db = sqlite3.connect(f"file:{self.sp.state_dir}/ecdf-server-{j}.db?mode=ro", uri=True, timeout=30)
        try:
            rows = db.execute("SELECT rid, epsilon FROM ledger WHERE dataset = ?", (self.ds,)).fetchall()
        finally:
            db.close()
        return {rid: Fraction(eps) for rid, eps in rows}


def test_no_querier_sequence_beats_the_budget_of_two_real_servers(tmp_path):
    from hypothesis.stateful import run_state_machine_as_test

    with ServerProcesses(
        2, budget="1", timeout=30, state_dir=str(tmp_path), extra_args=("--budget-per-owner", "none")
    ) as sp:
        TwoServerMachine.sp = sp
        run_state_machine_as_test(
            TwoServerMachine,
            settings=settings(
                max_examples=12,
                stateful_step_count=10,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
