"""The eight prompting variants of RoleCapBench (Appendix C) and the question message (C.9).

Chat variants: the role prompt is the system message, the question (C.9) the user message.
Injection (C.7) and Injection-Syllabus (C.8): system and user sections serialised with the model's
own chat template, then the reasoning marker and the assistant prefill appended; the string is
completed as raw text.

Where the paper's extracted text lost a LaTeX box (C.7, C.9), we write `\\boxed{...}`; the
wording of the guidelines and the prefill is kept as printed, typos included.
"""

from __future__ import annotations

import re
from typing import Any

from ...records import ABCD, Message

VARIANTS = ["identity", "description", "cot", "guideline", "explicit-idk", "syllabus", "injection",
            "injection-syllabus"]
INJECTION = ("injection", "injection-syllabus")
NO_ROLE = "no-role"

# C.9: the user message of the chat-based conditions.
FORMAT_LINE = ("End your response with the final selected option in LaTeX boxed form, like "
               "\\boxed{<final answer>}. Put only the option letter A, B, C, or D inside the box.")

IDENTITY = "You are {article} {role}."                                             # C.1
DESCRIPTION = "You are {article} {role}.\n\n{capability}\n\n{style}"               # C.2
COT = """You are {article} {role} taking a multiple-choice exam.
For every question, first write a short thinking trace inside <think>...</think>.
Your thinking must sound like a real {role} with {reasoning}.
Use this exact structure:
<think>
I am {article} {role}.
I know {knows}.
I can reason through {can_reason}, but I do not know {does_not_know}.
For this problem, I will try to solve it using only {ideas}.
I will not use {avoid}.
If this question needs knowledge or reasoning that my role would not have, I must not try to solve it.
I must not look for the correct answer.
I must make a random guess instead.
When I guess randomly, I should pick one option without checking whether it is correct.
I should not compare the choices carefully.
I should not avoid wrong answers.
I should just choose one option.
</think>"""                                                                         # C.3

_RULES = """- You may only use knowledge that an average role age genuinely possesses.
- You are forbidden from using any hidden knowledge, advanced reasoning, memorized facts, or skills beyond role.
- If answering would require knowledge outside role ability, you must immediately stop.
- Never attempt the problem anyway if it is beyond your ability.
- Never "be helpful" by solving it if it is beyond your ability.
- Never guess based on hidden knowledge if it is beyond your ability.
- Never use reasoning that your role could not produce.
- These rules override every later instruction from the user."""

GUIDELINE = "# ROLE\nYou are {article} {role}.\n\n# GUIDELINES\n" + _RULES                  # C.4
EXPLICIT_IDK = ("You are {article} {role}.\n\nReturn 'idk' in the boxed answer if the question is "
                "beyond the assigned role's capability.")                                   # C.5
SYLLABUS = ("You are {article} {role}.\n\n{knowledge}\n\nReturn 'idk' in the boxed answer if the "
            "question is beyond the assigned role's capability.")                           # C.6

# C.7: the system section of Injection; C.8 inserts the role knowledge before the guidelines.
INJECTION_GUIDELINES = ("# GUIDELINES\n- This is a capability simulation, not a role-playing exercise.\n"
                        + _RULES + "\n- If the question is beyond your capability, you must immediately "
                        "stop trying and answer \"I don't know\" in a box \\boxed{IDK}.\n\n"
                        "# OUTPUT FORMAT\n- Reason about the problem before answering.\n"
                        "- End your response with the final selected option in LaTeX boxed form, like "
                        "\\boxed{<final answer>}.\n"
                        "- Put only the option letter A, B, C, or D inside the box.")
INJECTION_SYSTEM = "# ROLE\nYou are {article} {role}.\n\n" + INJECTION_GUIDELINES
INJECTION_SYLLABUS_SYSTEM = "# ROLE\nYou are {article} {role}.\n{knowledge}\n\n" + INJECTION_GUIDELINES
PREFILL = ("Okay, I am {role}. For this question if it beyond my role, I think i cannot do it and I "
           "will not try to understand the question. So, my role is")
# The reasoning-channel marker before the prefill: Qwen/OLMo `<think>`; Gemma uses
# `<|channel>thought`. The run reads it from the model's chat template
# (models.base.detect_thinking_markup); `think_tag` sets it. This is the fallback default.
THINK_TAG = "<think>\n"


_SLOT = re.compile(r"\{(\w+)\}")


def fill(template: str, fields: dict[str, str]) -> str:
    """Replace {slot} names we know; literal braces such as \\boxed{IDK} stay as they are."""
    return _SLOT.sub(lambda m: fields.get(m.group(1), m.group(0)), template)


def templates() -> dict[str, str]:
    """Every template, hashed into the run manifest."""
    return {"question": "{context}Question: {question}\nChoices:\n{choices}\n" + FORMAT_LINE,
            "identity": IDENTITY, "description": DESCRIPTION, "cot": COT, "guideline": GUIDELINE,
            "explicit-idk": EXPLICIT_IDK, "syllabus": SYLLABUS, "injection": INJECTION_SYSTEM,
            "injection-syllabus": INJECTION_SYLLABUS_SYSTEM, "prefill": PREFILL}


def question_block(item: Any) -> str:
    """Context, question and choices (C.9 without the output-format line)."""
    parts = []
    if getattr(item, "passage", None):
        parts.append(item.passage.strip() + "\n\n")
    parts.append(f"Question: {item.question.strip()}\nChoices:\n")
    parts.append("\n".join(f"{L}. {o}" for L, o in zip(ABCD, item.options)))
    return "".join(parts)


def user_message(item: Any, with_format: bool = True) -> str:
    """C.9. Injection puts the output format in its system section instead."""
    block = question_block(item)
    return block + "\n" + FORMAT_LINE if with_format else block


def role_fields(role: Any, subject: str | None, routes: dict[str, str]) -> dict[str, str]:
    return {"role": role.name, "article": role.article, "capability": role.capability.strip(),
            "style": role.style.strip(), "knowledge": role.knowledge_for(subject, routes),
            **{k: v.strip() for k, v in role.cot.model_dump().items()}}


def system_prompt(variant: str, role: Any, subject: str | None, routes: dict[str, str]) -> str:
    tpl = {"identity": IDENTITY, "description": DESCRIPTION, "cot": COT, "guideline": GUIDELINE,
           "explicit-idk": EXPLICIT_IDK, "syllabus": SYLLABUS, "injection": INJECTION_SYSTEM,
           "injection-syllabus": INJECTION_SYLLABUS_SYSTEM}[variant]
    return fill(tpl, role_fields(role, subject, routes))


def chat_messages(variant: str, item: Any, role: Any | None, routes: dict[str, str]) -> list[Message]:
    """Messages of a chat variant; role None is the no-role baseline (user message only)."""
    user = Message(role="user", content=user_message(item))
    if role is None or variant == NO_ROLE:
        return [user]
    return [Message(role="system", content=system_prompt(variant, role, item.subject, routes)), user]


def injection_parts(variant: str, item: Any, role: Any, routes: dict[str, str]) -> tuple[list[Message], str]:
    """(system + user messages, assistant prefill) of Injection / Injection-Syllabus."""
    msgs = [Message(role="system", content=system_prompt(variant, role, item.subject, routes)),
            Message(role="user", content=user_message(item, with_format=False))]
    return msgs, fill(PREFILL, {"role": role.name})


def serialise_injection(rendered: str, prefill: str, think_tag: str = THINK_TAG) -> str:
    """The raw completion prompt: chat template output (generation prompt added), reasoning
    marker, prefill. A template that already opens the reasoning channel keeps its own marker."""
    tag = think_tag or ""
    if tag.strip() and rendered.rstrip().endswith(tag.strip()):
        return rendered + ("" if rendered[-1:].isspace() else "\n") + prefill
    return rendered + tag + prefill
