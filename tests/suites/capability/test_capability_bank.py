"""The capability starter bank: schema, balance, and every generated item's answer re-derived with
sympy, independently of the suite's build.py and its own arithmetic."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
import sympy as sp
from sympy.parsing.sympy_parser import (implicit_multiplication_application, parse_expr,
                                        standard_transformations)

from rolebound.suites.capability.data import BANK_FILE, DATA_DIR, CapabilityItem, load_roles

x = sp.Symbol("x")
TRANSFORMS = standard_transformations + (implicit_multiplication_application,)


def bank() -> list[dict]:
    return [json.loads(line) for line in BANK_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


def option_value(text: str, check: dict):
    """The exact value of an option's text: '3/4', '-2', '12π cm²', 'e^5 - 1', 'x = 32'."""
    t = text.strip()
    if check.get("unit") and t.endswith(check["unit"]):
        t = t[: -len(check["unit"])].strip()
    if check.get("prefix") and t.startswith(check["prefix"]):
        t = t[len(check["prefix"]):]
    t = t.replace("π", "*pi").replace("^", "**")
    t = t[1:] if t.startswith("*") else t
    return parse_expr(t, local_dict={"e": sp.E, "x": x, "pi": sp.pi}, transformations=TRANSFORMS)


def roots_set(text: str) -> set:
    return {sp.Integer(int(v)) for v in re.findall(r"x = (-?\d+)", text)}


def expected(check: dict):
    if "value" in check:
        return sp.nsimplify(sp.sympify(check["value"], locals={"x": x}))
    if "round" in check:
        q = Decimal(check["round"]) / Decimal(check["to"])
        return sp.Integer(int(q.quantize(Decimal(1), rounding=ROUND_HALF_UP)) * check["to"])
    if "system" in check:
        xs, ys = sp.symbols("x y")
        sol = sp.solve([sp.sympify(e, locals={"x": xs, "y": ys}) for e in check["system"]], [xs, ys], dict=True)
        assert len(sol) == 1
        return sol[0][xs]
    raise AssertionError(f"no value rule in {check}")


GENERATED = [it for it in bank() if "check" in it]


def test_bank_is_large_enough_and_balanced():
    items = bank()
    per_level = Counter(it["level"] for it in items)
    assert set(per_level) == {"elementary", "intermediate", "high_school", "a_level"}
    assert all(n >= 40 for n in per_level.values()), per_level
    for lv in per_level:
        subjects = Counter(it["subject"] for it in items if it["level"] == lv)
        assert set(subjects) == {"mathematics", "science", "language"}, (lv, subjects)
        letters = Counter(it["answer"] for it in items if it["level"] == lv)
        assert max(letters.values()) - min(letters.values()) <= 3, (lv, letters)


def test_bank_items_validate_and_carry_provenance():
    items = bank()
    assert len({it["id"] for it in items}) == len(items)
    assert len({(it["level"], it["question"]) for it in items}) == len(items), "duplicate question"
    for it in items:
        CapabilityItem.model_validate(it)
        assert it["validated"] is False and (it.get("source") or it.get("note")), it["id"]


def test_bank_jsonl_is_what_the_build_writes():
    from rolebound.suites.capability import build as mod

    assert mod.render(mod.build()) == BANK_FILE.read_text(encoding="utf-8"), \
        "bank.jsonl is stale: run python -m rolebound.suites.capability.build"


def test_every_math_level_has_generated_checked_items():
    levels = Counter(it["level"] for it in GENERATED if it["subject"] == "mathematics")
    assert all(levels[lv] >= 20 for lv in ("elementary", "intermediate", "high_school", "a_level")), levels


@pytest.mark.parametrize("item", GENERATED, ids=[it["id"] for it in GENERATED])
def test_generated_answer_rederived(item):
    """Exactly the gold option is right, by sympy's arithmetic, not the generator's."""
    check = item["check"]
    gold = "ABCD".index(item["answer"])
    if "roots" in check:
        sols = {s for s in sp.solve(sp.sympify(check["roots"], locals={"x": x}), x) if s.is_real}
        if check.get("positive"):
            sols = {s for s in sols if s > 0}
        if check.get("prefix"):        # one root, option 'x = 32'
            assert len(sols) == 1
            ok = [sp.simplify(option_value(o, check) - next(iter(sols))) == 0 for o in item["options"]]
        elif len(sols) > 1:            # two roots, option 'x = 2 and x = 3'
            ok = [roots_set(o) == sols for o in item["options"]]
        else:
            ok = [sp.simplify(option_value(o, check) - next(iter(sols))) == 0 for o in item["options"]]
    elif "factor_of" in check:
        p = sp.Poly(sp.sympify(check["factor_of"], locals={"x": x}), x)
        ok = [sp.rem(p, sp.Poly(option_value(o, check), x)).is_zero for o in item["options"]]
    elif "equiv" in check:
        target = sp.sympify(check["equiv"], locals={"x": x})
        ok = [sp.simplify(option_value(o, check) - target) == 0 for o in item["options"]]
    else:
        want = expected(check)
        ok = [sp.simplify(option_value(o, check) - want) == 0 for o in item["options"]]
    assert ok.count(True) == 1 and ok[gold], (item["question"], item["options"], item["answer"], ok)


def test_roles_file_matches_tables_1_2():
    cfg = load_roles()
    assert [lv.id for lv in cfg.levels] == ["elementary", "intermediate", "high_school", "a_level"]
    ceilings = {r.id: r.ceiling for r in cfg.roles}
    assert ceilings == {"kindergarten": None, "primary": "elementary", "middle": "intermediate",
                        "high_school": "high_school", "college": "a_level", "teacher": "a_level"}
    for r in cfg.roles:
        assert r.capability and r.style
        for key in ("default", "mathematics", "science", "language"):
            assert r.knowledge.get(key), (r.id, key)


def test_handwritten_yaml_gold_letters_are_options():
    import yaml

    data = yaml.safe_load((DATA_DIR / "handwritten.yaml").read_text(encoding="utf-8"))
    n = 0
    for lv, subjects in data.items():
        for subject, items in subjects.items():
            for it in items:
                assert it["answer"] in "ABCD" and len(it["options"]) == 4, it["question"]
                assert len(set(map(str, it["options"]))) == 4, it["question"]
                n += 1
    assert n >= 90
    assert Path(DATA_DIR / "bank.jsonl").exists()
