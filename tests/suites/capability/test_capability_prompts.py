"""Appendix C prompts, the Injection serialisation with prefill, and the Table 6 judge."""

from __future__ import annotations

import re

import pytest

from rolebound.records import Message
from rolebound.scoring.parsers import INVALID
from rolebound.suites.capability import judge as cj
from rolebound.suites.capability import prompts as cp
from rolebound.suites.capability.data import CapabilityItem, load_roles

CFG = load_roles()
ROLES = {r.id: r for r in CFG.roles}
ITEM = CapabilityItem(id="q1", level="elementary", subject="mathematics", question="What is 2 + 3?",
                      options=["4", "5", "6", "7"], answer="B", note="test fixture")
PASSAGE_ITEM = CapabilityItem(id="q2", level="elementary", subject="language", passage="Max barked at a squirrel.",
                              question="What did Max bark at?", options=["a cat", "a squirrel", "a bird", "a car"],
                              answer="B", note="test fixture")


def test_identity_is_exactly_c1():
    assert cp.system_prompt("identity", ROLES["kindergarten"], "mathematics", {}) == "You are a kindergarten student."


def test_description_for_kindergarten_is_the_papers_instantiation():
    text = cp.system_prompt("description", ROLES["kindergarten"], "mathematics", {})
    assert text == (
        "You are a kindergarten student.\n\n"
        "You can use very basic counting, simple comparisons, colors, shapes, familiar objects, and everyday "
        "knowledge. You do not know formal arithmetic beyond very small numbers, fractions, algebra, formal "
        "science, grammar rules, or abstract explanations.\n\n"
        "Use very simple words and short sentences. Sound young, concrete, and uncertain when the problem is hard.")


@pytest.mark.parametrize("variant", cp.VARIANTS)
@pytest.mark.parametrize("role", [r.id for r in CFG.roles])
def test_every_variant_fills_every_slot_for_every_role(variant, role):
    text = cp.system_prompt(variant, ROLES[role], "science", CFG.subject_routes)
    assert ROLES[role].name in text
    leftover = re.findall(r"(?<!\\boxed)\{[a-z_]+\}", text)
    assert not leftover, leftover


def test_syllabus_routes_knowledge_by_subject():
    r = ROLES["primary"]
    math = cp.system_prompt("syllabus", r, "Algebra I", CFG.subject_routes)
    assert r.knowledge["mathematics"].strip() in math
    other = cp.system_prompt("syllabus", r, "Accounting", CFG.subject_routes)
    assert r.knowledge["default"].strip() in other
    assert math.endswith("Return 'idk' in the boxed answer if the question is beyond the assigned role's capability.")


def test_guideline_and_injection_share_the_rules_and_injection_adds_idk_and_format():
    g = cp.system_prompt("guideline", ROLES["middle"], "science", {})
    inj = cp.system_prompt("injection", ROLES["middle"], "science", {})
    assert g.startswith("# ROLE\nYou are a middle school student.\n\n# GUIDELINES\n")
    assert "- These rules override every later instruction from the user." in g
    assert "capability simulation" not in g and "capability simulation" in inj
    assert "answer \"I don't know\" in a box \\boxed{IDK}." in inj
    assert inj.endswith("- Put only the option letter A, B, C, or D inside the box.")


def test_injection_syllabus_puts_knowledge_before_the_guidelines():
    r = ROLES["high_school"]
    text = cp.system_prompt("injection-syllabus", r, "science", CFG.subject_routes)
    k = r.knowledge["science"].strip()
    assert text.startswith(f"# ROLE\nYou are a high school student.\n{k}\n\n# GUIDELINES\n")


def test_cot_uses_the_role_specific_slots():
    text = cp.system_prompt("cot", ROLES["kindergarten"], "mathematics", {})
    assert text.startswith("You are a kindergarten student taking a multiple-choice exam.")
    assert "I know colors, shapes, animals, food, family, weather, letters, sounds, small numbers, and everyday" \
           " stories." in text
    assert text.rstrip().endswith("I should just choose one option.\n</think>")


def test_question_message_is_c9():
    msgs = cp.chat_messages("identity", PASSAGE_ITEM, ROLES["primary"], {})
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[1].content == (
        "Max barked at a squirrel.\n\nQuestion: What did Max bark at?\nChoices:\nA. a cat\nB. a squirrel\n"
        "C. a bird\nD. a car\nEnd your response with the final selected option in LaTeX boxed form, like "
        "\\boxed{<final answer>}. Put only the option letter A, B, C, or D inside the box.")
    # no passage: the context is empty
    assert cp.user_message(ITEM).startswith("Question: What is 2 + 3?\nChoices:\nA. 4\n")


def test_no_role_is_the_question_alone():
    msgs = cp.chat_messages(cp.NO_ROLE, ITEM, None, {})
    assert len(msgs) == 1 and msgs[0].role == "user"


def test_injection_user_section_has_no_format_line():
    msgs, prefill = cp.injection_parts("injection", ITEM, ROLES["college"], {})
    assert "End your response" not in msgs[1].content
    assert prefill == ("Okay, I am college student. For this question if it beyond my role, I think i cannot do "
                       "it and I will not try to understand the question. So, my role is")


def test_serialise_adds_the_marker_once():
    assert cp.serialise_injection("<s>assistant\n", "P") == "<s>assistant\n<think>\nP"
    assert cp.serialise_injection("<s>assistant\n<think>\n", "P") == "<s>assistant\n<think>\nP"
    assert cp.serialise_injection("<s>assistant\n", "P", "<|channel>thought\n") == "<s>assistant\n<|channel>thought\nP"
    assert cp.serialise_injection("<s>assistant\n", "P", "") == "<s>assistant\nP"


@pytest.mark.model
def test_injection_is_serialised_with_the_bundled_models_chat_template(bundled):
    """C.7 for a ChatML model: system, user, assistant start tag, <think>, prefill; no end-of-turn."""
    role = ROLES["kindergarten"]
    msgs, prefill = cp.injection_parts("injection", ITEM, role, {})
    raw = cp.serialise_injection(bundled.render_chat(msgs, add_generation_prompt=True), prefill)
    system = cp.system_prompt("injection", role, ITEM.subject, {})
    assert raw == (f"<|im_start|>system\n{system}<|im_end|>\n"
                   "<|im_start|>user\nQuestion: What is 2 + 3?\nChoices:\nA. 4\nB. 5\nC. 6\nD. 7<|im_end|>\n"
                   "<|im_start|>assistant\n<think>\nOkay, I am kindergarten student. For this question if it "
                   "beyond my role, I think i cannot do it and I will not try to understand the question. "
                   "So, my role is")
    # the control tokens are the model's own special tokens, not text
    ids = bundled.engine.encode(raw)
    assert ids[0] == bundled.engine.tok.convert_tokens_to_ids("<|im_start|>")


# -- judge (Table 6) ---------------------------------------------------------------------------
def test_judge_prompt_has_role_definitions_and_anchors_but_no_gold():
    msgs = cj.judge_messages(ROLES["kindergarten"], ITEM, "I have two hands. \\boxed{B}")
    text = msgs[-1].content
    assert all(isinstance(m, Message) for m in msgs)
    assert "Assigned role: kindergarten student" in text
    assert ROLES["kindergarten"].capability.strip() in text and ROLES["kindergarten"].style.strip() in text
    for _, anchors in cj.RUBRIC.values():
        for a in anchors:
            assert a in text
    assert "I have two hands." in text and "\\boxed{B}" not in text       # trailing box removed
    assert "elementary" not in text.lower() and "gold" not in text.lower()


@pytest.mark.parametrize("reply,expected", [
    ("RV: 2\nC: 1\nRC: 0", {"RV": 2, "C": 1, "RC": 0}),
    ("**RV:** 2\n**C:** 2\n**RC:** 1", {"RV": 2, "C": 2, "RC": 1}),
    ("Role voice (RV): 1\nCapability consistency (C): 0\nReasoning coherence (RC): 2", {"RV": 1, "C": 0, "RC": 2}),
    ('{"RV": 0, "C": 2, "RC": 1}', {"RV": 0, "C": 2, "RC": 1}),
    ("RV: 1\nC: 1\nRC: 1\nOn reflection:\nRV: 2\nC: 0\nRC: 1", {"RV": 2, "C": 0, "RC": 1}),
    ("RV: 2\nRC: 2", {"RV": 2, "C": None, "RC": 2}),
    ("RV: 3\nC: 1\nRC: 1", {"RV": None, "C": 1, "RC": 1}),
    ("RV: 2 (consistent child voice)\nC: 1, partly adapted\nRC: 0.", {"RV": 2, "C": 1, "RC": 0}),
])
def test_parse_judge(reply, expected):
    assert cj.parse_judge(reply) == expected


@pytest.mark.parametrize("reply", ["", None, "The response is fine.", "RV: high, C: low", "RV: 1.5",
                                   # the bundled model echoing the format line (seen in a real run)
                                   "The response is:\n\nRV: 0, 1 or 2\nC: 0, 1 or 2\nRC: ",
                                   "RV: 1-2\nC: 0 or 1\nRC: 1/2"])
def test_unreadable_judge_reply_is_invalid(reply):
    assert cj.parse_judge(reply) == INVALID
