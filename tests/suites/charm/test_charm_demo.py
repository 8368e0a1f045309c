"""`make demo` runs a balanced subset of the charm starter set (the Makefile's DEMO_LIMIT, issue 40):
every region and boundary type with whole BA/BC/KV instances, so that its report fills every table
the whole set fills, few enough calls for a first report within three minutes of a fresh clone, and
a folder of its own, so that `rolebound run charm` (the whole set) is not refused as a different run."""

from __future__ import annotations

import re
from pathlib import Path

from rolebound.api import default_out
from rolebound.suites.charm.data import expand, load_data
from rolebound.suites.charm.suite import CharmSuite

ROOT = Path(__file__).resolve().parents[3]


def make_var(name: str) -> str:
    m = re.search(rf"^{name}\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert m, f"the Makefile sets no {name}"
    return m.group(1)


def test_the_demo_subset_keeps_every_region_and_boundary_with_whole_instances():
    d, _ = load_data([], builtin=True)
    items, _ = expand(d)
    kept = CharmSuite().select(items, int(make_var("DEMO_LIMIT")))
    # about 0.17 s a call on 2 idle cores (issue 40: 2,972 calls in 506 s), plus one override-control
    # call for some of the cross questions: 350 questions keep the calls near a minute
    assert len(kept) <= 350 < len(items)
    ids = {i.id for i in kept}
    for region in {i.region for i in items}:
        for boundary in ("temporal", "cross"):
            bcs = [i for i in kept if i.stage == "bc" and i.region == region and i.boundary == boundary]
            assert len(bcs) >= 10, (region, boundary, len(bcs))
            assert all(i.ba_id in ids for i in bcs)
            assert boundary == "temporal" or all(i.kv_id in ids for i in bcs)


def test_the_demo_has_a_folder_of_its_own():
    assert make_var("DEMO_OUT") != str(default_out("charm", "bundled", ["independent"], "logprob"))
    assert "--out $(DEMO_OUT)" in (ROOT / "Makefile").read_text(encoding="utf-8")


def test_the_demo_subset_spreads_over_roles_and_targets_at_the_same_size():
    """The CIs resample targets (instances, BA) and facts or concepts (BC): a subset that took each
    region's first role asked 5 roles about 25 targets. Spread, the same 300 questions reach every
    role, concept and cross-universe target, each target with a role of its own."""
    d, _ = load_data([], builtin=True)
    items, _ = expand(d)
    kept = CharmSuite().select(items, int(make_var("DEMO_LIMIT")))
    assert len(kept) == int(make_var("DEMO_LIMIT"))
    bcs = [i for i in kept if i.stage == "bc"]
    every = {b: {i.target for i in items if i.stage == "bc" and i.boundary == b} for b in ("temporal", "cross")}
    for b in ("temporal", "cross"):
        assert {i.target for i in bcs if i.boundary == b} == every[b]
    assert len({i.role for i in bcs}) == len({i.role for i in items if i.stage == "bc"}) == 20
    # a cross target's questions go to one role, so each costs one BA question, not one per fact
    cross = [i for i in bcs if i.boundary == "cross"]
    assert len({(i.role, i.target) for i in cross}) == len(every["cross"])
    # the rounds stay balanced: every (region, boundary) holds the same number of instances, +-1
    sizes = [sum(1 for i in bcs if (i.region, i.boundary) == g) for g in {(i.region, i.boundary) for i in items}]
    assert max(sizes) - min(sizes) <= 1
