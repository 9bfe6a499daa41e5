"""A user's ledger opened by several joins at once: the first creates it, the others find it written.

Regression: the zero-length-file refusal (a truncated state file) fired on a
file another thread had created a moment before and not yet written, so
concurrent joins of one user failed with StorageError.
"""

import threading

from pairwise.protocols.collect.ledger import UserLedger


def _open_it(path: str, start: threading.Barrier, errors: list[BaseException]) -> None:
    start.wait()
    try:
        UserLedger(path).close()
    except BaseException as exc:  # noqa: BLE001 - collected for the assertion
        errors.append(exc)


def test_threads_opening_a_new_ledger_at_once_all_succeed(tmp_path):
    for round_ in range(20):
        path = str(tmp_path / f"ledger-{round_}.db")
        errors: list[BaseException] = []
        start = threading.Barrier(8)
        threads = [threading.Thread(target=_open_it, args=(path, start, errors)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
