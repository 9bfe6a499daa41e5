"""The aggregator's side of the shuffle model: task keys, the shuffler's requests, and the analyzer at the end.

What it does
    :class:`ShuffleOps` is a mixin of :class:`pairwise.protocols.collect.aggregator.Aggregator`:

    * :meth:`ShuffleOps._shuffle_keys`: a new ``shuffle-histogram`` task gets
      a fresh X25519 key pair (OS CSPRNG); the public key goes into its spec
      (``seal_public_key``, hex: every user sees it with the other public
      parameters) and the private key into the aggregator's state, in the
      task's own transaction;
    * ``shuffle_task``: the shuffler reads a task's public description;
    * ``shuffle_batch``: the shuffler delivers a batch: a JSON header
      (``task``, ``batch``, ``batch_id``, ``users``, ``boxes``, ``final``,
      ``dropped_users``) and then the boxes in frames of at most
      :data:`BATCH_FRAME` bytes, each a whole number of boxes.  The batch is
      stored (primary key: its id) before it is acknowledged; a redelivered
      batch is acknowledged again and not stored twice;
    * :meth:`ShuffleOps._close_shuffle`: when registration closes (the
      deadline, or ``task close``) the task is ``closed``, which tells the
      shuffler to cut its final batch; once that batch is stored the
      analyzer runs over all stored batches
      (:meth:`pairwise.protocols.collect.tasks.shuffle_histogram.ShuffleHistogram.finish`)
      and the result is stored; without a final batch within the task's
      ``timeout`` the task fails.

Authorization
    Both requests need a ``server`` certificate (the shuffler is a service)
    and, when the task names ``shuffler_name``, that very certificate name:
    no other party can feed a task's batches.

Security model
    The aggregator receives permuted sealed boxes and the number of users
    per batch; no request of the shuffler carries a user's name, and users
    never send it anything for a shuffle task (they only read its public
    parameters).  A batch of fewer than the task's n users is refused: its
    noise would not give the promised privacy.
"""

from __future__ import annotations

import time

from . import storage as st
from .wire import CollectError, RegistrationClosed, Unauthorized

__all__ = ["BATCH_FRAME", "ShuffleOps"]

#: Largest frame of a batch's boxes (the aggregator's frame limit is 1 MiB); a whole number of boxes.
BATCH_FRAME = 1 << 20
#: Most boxes one batch may hold (10^6 users with 10 bins, 0.6 GB; larger studies cut several batches).
MAX_BATCH_BOXES = 1 << 24


def frame_boxes(box_bytes: int) -> int:
    """Boxes per frame of a batch."""
    return BATCH_FRAME // box_bytes


class ShuffleOps:
    """Mixin of the aggregator (see the module docstring); uses its ``tasks``, ``store``, ``_db``, ``_done``, ``_fail``."""

    def _shuffle_keys(self, spec: dict) -> bytes:
        """Put a fresh public key into a new shuffle task's spec; returns the private key to store with it."""
        from .sealed import generate_keypair

        sk, pk = generate_keypair()
        spec["seal_public_key"] = pk.hex()
        return sk

    def _shuffle_task_of(self, req: dict, name: str, conn):
        t = self._task(req)
        if t.proto.model != "shuffle":
            raise CollectError(f"task {t.id} is a {t.proto.model}-model task: it takes no shuffled batches")
        want = t.spec.get("shuffler_name")
        if want is not None and conn.identity is not None and conn.identity.name != want:
            raise Unauthorized(f"{conn.identity.name!r} is not task {t.id}'s shuffler ({want!r})")
        return t

    async def _op_shuffle_task(self, conn, name, req) -> dict:
        t = self._shuffle_task_of(req, name, conn)
        return {
            "task": {
                "id": t.id,
                "protocol": t.row.protocol,
                "state": t.row.state,
                "spec": t.spec,
                "aggregator": self.name,
                "model": t.proto.model,
            }
        }

    async def _op_shuffle_batch(self, conn, name, req) -> dict:
        from .histogram import HistogramTask, box_bytes, max_boxes

        t = self._shuffle_task_of(req, name, conn)
        size = box_bytes()
        task = HistogramTask.from_spec(t.spec)
        batch_id, seq, users, count = req.get("batch_id"), req.get("batch"), req.get("users"), req.get("boxes")
        final, dropped = req.get("final"), req.get("dropped_users", 0)
        ints = {"batch": seq, "users": users, "boxes": count, "dropped_users": dropped}
        for key, v in ints.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise CollectError(f"shuffle_batch: {key} must be a non-negative integer, got {v!r}")
        if not isinstance(batch_id, str) or not 8 <= len(batch_id) <= 64 or not isinstance(final, bool):
            raise CollectError("shuffle_batch: needs a batch_id string (8..64 characters) and a boolean final")
        if count > min(MAX_BATCH_BOXES, users * max_boxes(task)):
            raise CollectError(f"shuffle_batch: {count} boxes from {users} users is more than they can send")
        # read the boxes first (bounded, whole boxes per frame), so a refusal below is not lost to a reset
        data, per = bytearray(), frame_boxes(size) * size
        while len(data) < count * size:
            frame = await conn.recv(max_size=min(per, count * size - len(data)))
            if len(frame) == 0 or len(frame) % size:
                raise CollectError(f"shuffle_batch: a frame of {len(frame)} bytes is not whole {size}-byte boxes")
            data += frame
        if users and users < task.min_users:
            raise CollectError(
                f"shuffle_batch: a batch of {users} users is below the task's minimum of "
                f"{task.min_users}; the shuffler must never forward one"
            )
        if not users and count:
            raise CollectError("shuffle_batch: boxes without users")
        async with t.lock:
            if t.row.state not in (st.OPEN, st.CLOSED):
                raise RegistrationClosed(f"task {t.id} is {t.row.state}: it takes no more batches")
            new = await self._db(self.store.add_shuffle_batch, t.id, batch_id, seq, users, bytes(data), final, dropped)
        self._log(
            f"task {t.id}: shuffled batch {seq} {'stored' if new else 'redelivered'}: {users} users, "
            f"{count} boxes" + (" (final)" if final else "")
        )
        return {"stored": new}

    async def _close_shuffle(self, t) -> None:
        """Registration closed: wait for the shuffler's final batch, then run the analyzer once (t.lock held)."""
        if t.row.state == st.OPEN:
            await self._db(self.store.set_state, t.id, st.CLOSED)
            t.row.state, t.row.closed = st.CLOSED, time.time()
        if not await self._db(self.store.has_final_shuffle_batch, t.id):
            if time.time() - (t.row.closed or time.time()) > float(t.spec["timeout"]):
                await self._fail(
                    t, f"the shuffler delivered no final batch within {t.spec['timeout']:g} s of the close"
                )
            return
        batches = await self._db(self.store.shuffle_batches, t.id)
        key = await self._db(self.store.task_key, t.id)
        if key is None:
            await self._fail(t, "the task's private key is missing from the state")
            return
        from .histogram import box_bytes

        b = box_bytes()
        opened = [
            (users, [boxes[i : i + b] for i in range(0, len(boxes), b)]) for users, boxes, _, _ in batches if users
        ]
        dropped = sum(d for _, _, _, d in batches)
        try:
            result = await self._db(t.proto.finish, dict(t.spec), opened, key, t.id)
        except (CollectError, ValueError) as exc:
            await self._fail(
                t,
                f"{exc} ({dropped} user(s) dropped by the shuffler: fewer than n at the close)"
                if dropped
                else str(exc),
            )
            return
        await self._done(
            t,
            {**result, "users_dropped_by_shuffler": dropped},
            users_registered=result["n"],
            pairs_planned=None,
            pairs_completed=None,
            pairs_dropped=None,
        )
