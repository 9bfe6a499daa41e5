"""The seed protocols among real users: an aggregator service, tasks, a user client, a relay.

Every user holds only their own record, runs :func:`join` (``pairwise
collect join``) on their own device, and connects outbound to one
aggregator (``pairwise collect serve``); an analyst (``collector`` role)
creates tasks and reads their results.  Modules, from the bottom up:

- :mod:`pairwise.protocols.collect.wire`: roles, requests, errors, the client connection.
- :mod:`pairwise.protocols.collect.tasks`: protocols and their public parameters
  (``ustat-2pc``, ``ldp-ustat``, ``ldp-auc``, ``ldp-qmle``, ``shuffle-histogram``);
  the place a protocol plugs in.
- :mod:`pairwise.protocols.collect.storage`: the aggregator's SQLite state.
- :mod:`pairwise.protocols.collect.relay`: the byte relay between two users' connections.
- :mod:`pairwise.protocols.collect.aggregator_pairs`: the aggregator's 2PC model (control connections,
  pairing, relays).
- :mod:`pairwise.protocols.collect.aggregator`: the asyncio service
  (its shuffle-model requests: :mod:`pairwise.protocols.collect.aggregator_shuffle`).
- :mod:`pairwise.protocols.collect.sealed`: sealed boxes (HPKE base mode) to a task's key.
- :mod:`pairwise.protocols.collect.histogram`: the shuffled histogram split between users and aggregator.
- :mod:`pairwise.protocols.collect.shuffler`: the shuffler process (``pairwise collect shuffler``).
- :mod:`pairwise.protocols.collect.ledger`: a user's own privacy ledger.
- :mod:`pairwise.protocols.collect.pairchannel`: the channel a pair's 2PC runs on inside the relay.
- :mod:`pairwise.protocols.collect.pair`: one user's side of a pair (TLS 1.3 to the partner, Yao, costs).
- :mod:`pairwise.protocols.collect.user`: the user client (:func:`join`).
- :mod:`pairwise.protocols.collect.collector`: the analyst's client.
- :mod:`pairwise.protocols.collect.processes`: an aggregator process on loopback (tests, demos).
- :mod:`pairwise.protocols.collect.simulate`: the load generator (``pairwise collect simulate-users``).

How to run a study: ``docs/collect.md``; TLS through the relay, sealed boxes
and the shuffler: ``docs/collect-relay-shuffler.md``.  Security model: semi-honest users
and aggregator; each user's guarantee is the task protocol's (local DP, or
computational DP of the 2PC subsampling protocol), bounded by the user's own
cap and ledger.
"""

from .collector import Collector
from .tasks import PROTOCOLS, validate_task
from .user import JoinOptions, JoinOutcome, join
from .wire import CapExceeded, CollectError

__all__ = [
    "PROTOCOLS",
    "CapExceeded",
    "CollectError",
    "Collector",
    "JoinOptions",
    "JoinOutcome",
    "join",
    "validate_task",
]
