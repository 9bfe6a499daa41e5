"""The staging budget of an ECDF server under any sequence of uploads (issue 22, item 3).

:class:`pairwise.protocols.ecdf.staging.StagingBudget` bounds the disk that
staged, uncommitted uploads hold: each reserves its bound from its header, at
most ``per_connection``, all of them together at most ``total``; and the
memory of the vdpf checks in progress within ``check_memory``.  A hypothesis
state machine reserves and releases in any order, also from several threads
at once, and checks after every step that the reserved bytes are the sum of
the held reservations, never above the total, and that each refusal is the
right one (too large for a connection: ``QueryRefused``; the server's space
taken: ``ServerBusy``).  The real servers' use of it (refusals before a key
is read, reservations released with their connections) is tested in
tests/system/test_ecdf_attacks.py.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pairwise.protocols.ecdf.staging import StagedFile, StagingBudget, parse_size
from pairwise.protocols.ecdf.wire import QueryRefused, ServerBusy

TOTAL, PER_CONNECTION, CHECK = 1000, 400, 700


class StagingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.budget = StagingBudget(TOTAL, PER_CONNECTION, check_memory=CHECK)
        self.held: list[int] = []
        self.checks: list[int] = []  # memory held by vdpf checks (a pool of its own)

    @rule(n=st.integers(0, 2 * PER_CONNECTION))
    def reserve(self, n: int) -> None:
        if n > PER_CONNECTION:
            with pytest.raises(QueryRefused, match="one connection may stage"):
                self.budget.reserve(n, 0)
        elif sum(self.held) + n > TOTAL:
            with pytest.raises(ServerBusy, match="retry later"):
                self.budget.reserve(n, 0)
        else:
            self.budget.reserve(n, 0)
            self.held.append(n)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10**6))
    def release(self, i: int) -> None:
        self.budget.release(self.held.pop(i % len(self.held)))

    @rule(sizes=st.lists(st.integers(1, PER_CONNECTION), min_size=2, max_size=6))
    def reserve_at_once(self, sizes: list[int]) -> None:
        """Several connections reserve concurrently: exactly the granted ones are held, and each refused one
        did not fit (reservations only grow during this step, so it does not fit at the end either)."""
        got: list[int] = []
        refused: list[int] = []
        lock = threading.Lock()

        def one(n: int) -> None:
            try:
                self.budget.reserve(n, 0)
            except ServerBusy:
                with lock:
                    refused.append(n)
                return
            with lock:
                got.append(n)

        threads = [threading.Thread(target=one, args=(n,)) for n in sizes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(got + refused) == sorted(sizes)
        self.held.extend(got)
        assert all(sum(self.held) + n > TOTAL for n in refused)

    @rule(n=st.integers(0, CHECK + 100))
    def reserve_check(self, n: int) -> None:
        if n > CHECK:
            with pytest.raises(QueryRefused, match="--max-check-memory"):
                self.budget.reserve_check(n, 1)
        elif sum(self.checks) + n > CHECK:
            with pytest.raises(ServerBusy, match="checking other uploads.*retry later"):
                self.budget.reserve_check(n, 1)
        else:
            self.budget.reserve_check(n, 1)
            self.checks.append(n)

    @precondition(lambda self: self.checks)
    @rule(i=st.integers(0, 10**6))
    def release_check(self, i: int) -> None:
        self.budget.release_check(self.checks.pop(i % len(self.checks)))

    @invariant()
    def reserved_is_the_held_sum_within_the_total(self) -> None:
        assert self.budget.reserved == sum(self.held) <= TOTAL
        assert self.budget.checking == sum(self.checks) <= CHECK


TestStagingBudget = StagingMachine.TestCase
TestStagingBudget.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)


def test_a_staged_file_gives_back_its_chunks_and_drops_clients(tmp_path):
    f = StagedFile(str(tmp_path))
    try:
        f.put(np.array([7, 8, 9], np.uint64), np.array([0, 1, 2]), {"all": (np.array([2, 1, 3]), b"aabccc")})
        f.put(np.array([10], np.uint64), np.array([3]), {"all": (np.array([4]), b"dddd")})
        assert list(tmp_path.iterdir()) == []  # unlinked at once
        c0, c1 = list(f.chunks())
        assert c0.ids.tolist() == [7, 8, 9] and c0.raw["all"][1] == b"aabccc" and c1.raw["all"][1] == b"dddd"
        d = c0.drop(np.array([1]))
        assert d.ids.tolist() == [7, 9] and d.pos.tolist() == [0, 2] and d.raw["all"][1] == b"aaccc"
        assert f.clients == 4 and f.bytes == 3 * 16 + 3 * 4 + 6 + 16 + 4 + 4
    finally:
        f.close()


def test_sizes_parse_with_binary_units_and_refuse_nonsense():
    assert parse_size("512K") == 512 << 10 and parse_size("16G") == 16 << 30 and parse_size("1.5MiB") == 3 << 19
    for bad in ("0", "-1M", "lots", ""):
        with pytest.raises(ValueError, match="512M or 16G|positive"):
            parse_size(bad)
