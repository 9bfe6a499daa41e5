"""The mechanisms and the OT classes meet the interfaces of pairwise.dp.interfaces and pairwise.mpc.ot.

Checked twice: at run time (``isinstance`` on the runtime-checkable protocols: the methods and
attributes exist) and statically (the ``_static_*`` functions below type-check under mypy, which
``.ci/run`` runs over this file: the signatures are compatible).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pairwise.dp.interfaces import CentralMechanism, LocalRandomizer, Mechanism, Simulable, ValueRandomizer
from pairwise.dp.mechanisms import (
    GeometricMechanism,
    KaryRandomizedResponse,
    OneBitFlip,
    OneBitFlipVector,
    RandomizedResponse,
    SnappingLaplaceMechanism,
)
from pairwise.mpc.aes import random_blocks
from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.ot import (
    BaseCOTReceiver,
    BaseCOTSender,
    BaseOTReceiver,
    BaseOTSender,
    CorrelatedOTReceiver,
    CorrelatedOTSender,
    COTReceiver,
    COTSender,
    OTReceiver,
    OTSender,
    RandomCOTReceiver,
    RandomCOTSender,
)


def _mechanisms() -> dict[str, object]:
    return {
        "rr": RandomizedResponse(1.0),
        "krr": KaryRandomizedResponse(4, 1.0),
        "onebit": OneBitFlip(1.0, 0.0, 1.0),
        "onebit_vector": OneBitFlipVector.even_split(1.0, [0.0, 0.0], [1.0, 1.0]),
        "geometric": GeometricMechanism(1.0),
        "snapping": SnappingLaplaceMechanism(1.0, 1.0, 0.0, 10.0),
    }


@pytest.mark.parametrize(
    ("name", "roles"),
    [
        ("rr", {Mechanism, Simulable, LocalRandomizer, ValueRandomizer}),
        ("krr", {Mechanism, Simulable, LocalRandomizer, ValueRandomizer}),
        ("onebit", {Mechanism, Simulable, LocalRandomizer, ValueRandomizer}),
        ("onebit_vector", {Mechanism, Simulable, LocalRandomizer}),
        ("geometric", {Mechanism, Simulable, CentralMechanism}),
        ("snapping", {Mechanism, CentralMechanism}),
    ],
)
def test_each_mechanism_meets_exactly_its_roles(name, roles):
    mech = _mechanisms()[name]
    for proto in (Mechanism, Simulable, LocalRandomizer, ValueRandomizer, CentralMechanism):
        assert isinstance(mech, proto) == (proto in roles), (name, proto.__name__)


def test_the_words_mean_one_thing_local_randomizers_keep_the_shape_and_simulate_is_seeded():
    for name, mech in _mechanisms().items():
        if not isinstance(mech, LocalRandomizer):
            continue
        values = np.zeros((5, 2)) if name == "onebit_vector" else np.array([0, 1, 1, 0, 1])
        assert mech.randomize_array(values).shape[0] == 5
        a, b = (mech.simulate(values, np.random.default_rng(7)) for _ in range(2))
        assert np.array_equal(a, b), name


def test_ot_classes_meet_the_ot_interfaces_and_base_ot_works_through_them():
    a, b = MemoryChannel.pair()
    snd, rcv = BaseOTSender(a, b"sid"), BaseOTReceiver(b, b"sid")
    assert isinstance(snd, OTSender) and isinstance(rcv, OTReceiver)
    assert not isinstance(snd, CorrelatedOTSender) and not isinstance(rcv, CorrelatedOTReceiver)
    delta = random_blocks(1)[0]
    delta[0] |= np.uint64(1)
    cs, cr = COTSender(a, delta, b"sid"), COTReceiver(b, b"sid")
    for obj, protos in (
        (cs, (OTSender, RandomCOTSender, CorrelatedOTSender)),
        (cr, (OTReceiver, RandomCOTReceiver, CorrelatedOTReceiver)),
    ):
        assert all(isinstance(obj, p) for p in protos)
    bcs, bcr = BaseCOTSender(a, delta, b"sid"), BaseCOTReceiver(b, b"sid")
    assert isinstance(bcs, RandomCOTSender) and isinstance(bcr, RandomCOTReceiver)
    assert not isinstance(bcs, CorrelatedOTSender) and not isinstance(bcr, CorrelatedOTReceiver)
    # the base OT's chosen-message OT, called by the interface's names; the sender runs in a thread
    m0, m1 = random_blocks(4), random_blocks(4)
    bits = np.array([1, 0, 0, 1], dtype=bool)
    t = threading.Thread(target=snd.send_chosen, args=(m0, m1))
    t.start()
    got = rcv.recv_chosen(bits)
    t.join(timeout=60)
    assert np.array_equal(got, np.where(bits[:, None], m1, m0))


# ---- static conformance: mypy checks these assignments against the protocols' signatures
def _static_dp(
    rr: RandomizedResponse,
    krr: KaryRandomizedResponse,
    ob: OneBitFlip,
    obv: OneBitFlipVector,
    geo: GeometricMechanism,
    snap: SnappingLaplaceMechanism,
) -> None:
    local: list[ValueRandomizer] = [rr, krr, ob]
    vector: LocalRandomizer = obv
    central: list[CentralMechanism] = [geo, snap]
    simulable: Simulable = geo
    del local, vector, central, simulable


def _static_ot(
    bs: BaseOTSender, br: BaseOTReceiver, cs: COTSender, cr: COTReceiver, bcs: BaseCOTSender, bcr: BaseCOTReceiver
) -> None:
    senders: list[OTSender] = [bs, cs]
    receivers: list[OTReceiver] = [br, cr]
    random_cot: tuple[list[RandomCOTSender], list[RandomCOTReceiver]] = ([cs, bcs], [cr, bcr])
    correlated: tuple[CorrelatedOTSender, CorrelatedOTReceiver] = (cs, cr)
    del senders, receivers, random_cot, correlated
