"""One user of a collect study as its own process: it joins the given tasks, holding only its own values.

``python collect_user.py SERVER TLS_DIR NAME STATE_DIR JOINS_JSON`` where
JOINS_JSON is a list of ``{"task": ID, "value": X, "value2": Y, "label": B}``;
the joins run at once (one thread each, through the public API
:func:`pairwise.collect.join`), and the process prints one JSON line per
task with its outcome (or ``{"task": ID, "error": ...}``).
"""

import json
import sys
import threading

from pairwise.collect import join
from pairwise.mpc.tls import TLSConfig


def main() -> int:
    server, tls_dir, name, state, joins = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
    tls = TLSConfig(tls_dir, name)
    out = {}

    def one(j):
        try:
            r = join(
                server,
                j["task"],
                j["value"],
                j.get("value2"),
                j.get("label"),
                tls=tls,
                state_dir=state,
                max_epsilon=float(j.get("max_epsilon", 40)),
                budget=200,
            )
            out[j["task"]] = {"task": j["task"], **r.as_dict(), "report": r.report}
        except Exception as exc:  # noqa: BLE001 - reported to the test
            out[j["task"]] = {"task": j["task"], "error": f"{type(exc).__name__}: {exc}"}
            # at once on stderr too: a join that failed can leave the other joins waiting for a full task
            print(json.dumps(out[j["task"]]), file=sys.stderr, flush=True)

    threads = [threading.Thread(target=one, args=(j,)) for j in joins]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in joins:
        print(json.dumps(out[j["task"]]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
