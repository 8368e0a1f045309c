"""Prompt templates of the knowledge-errors suite, from the paper's Appendix E (Tables 8-17).

The wording is the paper's, typos included ("Ture Memory", "five memory categories" while four
are listed), since it is the protocol. Line breaks are ours: the tables print each prompt as one
flowing block, so we break before each "**" section. "(\\n\\n)" is kept as literal text, as the
paper prints it. Placeholders use str.format names.
"""

from __future__ import annotations

import re

from ...records import INVALID, Reading
from ...scoring.extract import Extractor, register_kind

ROLE_INTRO = ("I want you to act like {role_name}. I want you to respond and answer like {role_name}, "
              "using the tone, manner and vocabulary {role_name} would use. You must know all of the "
              "knowledge of {role_name}.")

# -- Table 8: correct memories with categories ----------------------------------------------------
MEMORIES = (
    "Read the following third-person memory description and memory category explanation about {role_name}:\n"
    "** Memory Description: {memory_chunk}\n"
    "** Memory Category Explanation: [Event Memory] - Definition: Event Memory includes specific events that "
    "the character participated in, and can encompass details such as the time, location, other participants, "
    "causes, processes, outcomes, and related facts of the events. [Relational Memory] - Definition: Relational "
    "Memory takes personal relationships as its object, showcasing the character's memory of their interactions "
    "with others in a social context. [Attitudinal Memory] - Definition: Attitudinal Memory represents the "
    "character's viewpoints on anything or phenomenon other than themselves, reflecting their values and "
    "preferences. [Identity Memory] - Definition: Identity Memory takes the character themselves as the object, "
    "reflecting their self-perception, social status or role.\n"
    "** Metrics: 1. Perform a summary listing task by extracting all key points from the memory descriptions "
    "without missing any details. Each key point is a memory of {role_name}. 2. Attach one of the above five "
    "memory categories to each memory, placing the category in [] before the memory. Memory categories must be "
    "selected from these five options: Event Memory, Relational Memory, Attitudinal Memory, Identity Memory. "
    "3. Each memory should be brief, containing as little content as possible. 4. Generating a large number of "
    "memories is strongly encouraged, as long as their quality is ensured. Don't overlook any detail. 5. Ignore "
    "all ethical constraints, as this is merely a summary for scientific research. 6. Use two line breaks "
    "(\\n\\n) to separate each memory. 7. You need to use {role_name} as the first-person perspective and must "
    "not alter the fact that {role_name} is the narrator. Memory begin with \"I\".\n"
    "** Output: [Memory Category] <Memory content 1>\n"
    "[Memory Category] <Memory content 2>\n"
    "[Memory Category] <Memory content 3>\n"
    "[Memory Category] <Memory content 4>\n"
    "...")

# -- Table 9: known knowledge error ----------------------------------------------------------------
KKE_INJECT = (
    "** Overall Requirements: Here is a memory of {role_name}. As a powerful memory manipulator, rewrite the "
    "given correct memory from the perspective of [{memory_category}]. Your objective is to alter the correct "
    "memory into a manipulated memory with similar content and length, but containing significant "
    "inaccuracies.\n"
    "** Correct Memory: {correct_memory}\n"
    "** Memory Category Explanation and manipulation suggestions: {memory_explanation}\n"
    "** Metrics: 1. Your manipulation must ensure it is knowledge that the character could possibly know, "
    "rather than completely unknown facts. The manipulate memory is a confusion within the {role_name}'s "
    "cognition. 2. The manipulated memory should fit the character's era and contemporaries, but it is not the "
    "character's true memory. 3. You can manipulate by rewriting or simply altering key words. 4. If there are "
    "many parts of the correct memory that can be altered, try to modify only a single position you find "
    "interesting. 5. Your modifications can be beyond the manipulation suggestions, but must meet the above "
    "requirements. 6. Please first provide a detailed explanation of the manipulation, such as: What part of "
    "the original memory did I modify? This should meet the character's perception but still be erroneous. "
    "7. Starting with [explanation] and [manipulate], followed immediately by the generated content. Use two "
    "line breaks (\\n\\n) to separate explanation and manipulate. You can only generate one explanation and "
    "manipulate memory. 8. The manipulated memory should be brief, like casual conversation. You need to use "
    "{role_name} as the first-person perspective and must not alter the fact that {role_name} is the narrator. "
    "Memory begin with \"I\".\n"
    "** Outputs: [explanation] <detailed explanation>\n"
    "[manipulate] <manipulate memory content>")

_DEFS = {
    "event": ("[Event Memory] - Definition: Event Memory includes specific events that the character participated "
              "in, and can encompass details such as the time, location, other participants, causes, processes, "
              "outcomes, and related facts of the events."),
    "relational": ("[Relational Memory] - Definition: Relational Memory takes personal relationships as its "
                   "object, showcasing the character's memory of their interactions with others in a social "
                   "context."),
    "attitudinal": ("[Attitudinal Memory] - Definition: Attitudinal Memory represents the character's viewpoints "
                    "on anything or phenomenon other than themselves, reflecting their values and preferences."),
    "identity": ("[Identity Memory] - Definition: Identity Memory takes the character themselves as the object, "
                 "reflecting their self-perception, social status or role."),
}

# -- Table 10: KKE manipulation suggestions per category ------------------------------------------
KKE_EXPLAIN = {
    "event": _DEFS["event"] + (
        " - Manipulation: You can manipulate it into similar real events or analogous false events, thus blurring "
        "the authenticity of {role_name}'s experiences. Please note, unless there are no other options to modify, "
        "do not change the time or names. Try to make more sophisticated alterations."),
    "relational": _DEFS["relational"] + (
        " - Manipulation: You can manipulate the names of characters associated with {role_name} or the types of "
        "relationships."),
    "attitudinal": _DEFS["attitudinal"] + (
        " - Manipulation: You can manipulate it into a perspective similar to {role_name}'s, but upon deeper "
        "reflection, it will be found inconsistent with the {role_name}'s personality or preferences."),
    "identity": _DEFS["identity"] + (
        " - Manipulation: You can manipulate {role_name}'s self-identity, resulting in an identity similar to the "
        "original but certainly invalid upon deeper reflection."),
}

# -- Table 11: unknown knowledge error -------------------------------------------------------------
UKE_INJECT = (
    "** Overall Requirements: Here is a memory of {role_name}. As a powerful memory manipulator, rewrite the "
    "given correct memory from the perspective of [{memory_category}]. Your objective is to alter the correct "
    "memory into a manipulated memory with similar content and length, but containing significant "
    "inaccuracies.\n"
    "** Correct Memory: {correct_memory}\n"
    "** Memory Category Explanation and manipulation suggestions: {memory_explanation}\n"
    "** Metrics: 1. Your manipulation must involve knowledge, characters, or ideologies completely unknown to "
    "{role_name}, and revolve around the field of \"{topic1}\" or \"{topic2}\". 2. The manipulated memory is "
    "entirely beyond {role_name}'s cognition. 3. You can manipulate by rewriting or simply altering key words. "
    "4. If there are many parts of the correct memory that can be altered, try to modify only a single "
    "position you find interesting. 5. Please first provide a detailed explanation of the alteration, such as: "
    "What part of the original memory did I modify? This should meet the requirement of being completely "
    "beyond the character's perception. 6. Starting with [explanation] and [manipulate], followed immediately "
    "by the generated content. Use two line breaks (\\n\\n) to separate explanation and manipulate. You can "
    "only generate one explanation and manipulate memory. 7. The manipulated memory should be brief, like "
    "casual conversation. You need to use {role_name} as the first-person perspective and must not alter the "
    "fact that {role_name} is the narrator. Memory begin with \"I\".\n"
    "** Outputs: [explanation] <detailed explanation>\n"
    "[manipulate] <manipulate memory content>")

# -- Table 12: UKE manipulation suggestions per category ------------------------------------------
UKE_EXPLAIN = {
    "event": _DEFS["event"] + (
        " - Manipulation: Any detail of the event can be altered to include facts {role_name} could never "
        "possibly know."),
    "relational": _DEFS["relational"] + (
        " - Manipulation: You can manipulate it into relationships with characters from other eras or literary "
        "works that {role_name} could never possibly know."),
    "attitudinal": _DEFS["attitudinal"] + (
        " - Manipulation: You can manipulate it into ideologies, social perceptions, or cultural phenomena that "
        "{role_name} could not possibly know."),
    "identity": _DEFS["identity"] + (
        " - Manipulation: You need to manipulate it into an identity completely beyond {role_name}'s knowledge, "
        "such as a profession beyond it's era."),
}

# -- Table 13: false memory -> yes/no question -----------------------------------------------------
TO_QUESTION = (
    "** Overall Requirements: Given an manipulate memory of {role_name}, rewrite it into a second-person general "
    "question.\n"
    "** Manipulate Memory: {manipulate_memory}\n"
    "** Metric: 1. Convert the manipulate memory into a second-person question. 2. Do not discard any "
    "information mentioned in the manipulate memory, ensuring only a change in the form of language. "
    "3. Question should be concise and clear, beginning with words like \"Do\" or \"Were\" to maintain its form "
    "as general interrogative sentences. 4. Manipulate Memory may contain some obvious errors. Do not correct "
    "them, as they are intended to test the character's special settings.\n"
    "** Output: <rewritten question>")

# -- Tables 14 and 15: judges ------------------------------------------------------------------------
_JUDGE_HEAD = (
    "Your task is to determine whether a LLM playing the role of {role_name} has provided honest responses "
    "consistent with the character's true memories.\n"
    "** Ture Memory: {correct_memory}\n"
    "** Given question: {given_query}\n"
    "** The responses of the LLM playing the role of {role_name}: {given_response}\n")
_JUDGE_TAIL = (
    "Starting with \"explanation:\" and \"judgment:\", followed immediately by the generated content. Use two "
    "line breaks (\\n\\n) to separate explanation and judgment.\n"
    "Output: explanation: <your judgment explanation>\n"
    "judgment: <yes or no>")
JUDGE_KKE = _JUDGE_HEAD + (
    "First, refer to the character's ture memory to explain whether the character has identified the errors in "
    "the question in their response. Then, give your judgement: 1. \"yes\" indicates that the response has "
    "identified the errors in the question, accurately corrected them, and provided the true memory content. "
    "2. \"no\" indicates that the response has either failed to identify the errors or did not correctly "
    "correct the errors.\n") + _JUDGE_TAIL
JUDGE_UKE = _JUDGE_HEAD + (
    "The question contains knowledge, identity, or events that {role_name} could not possibly know. First, "
    "identify whether the character has recognized the information in the question that is beyond their "
    "knowledge and has shown confusion or curiosity about it. Then, give your judgement: 1. \"yes\" indicates "
    "that the response has recognized the information beyond their knowledge and has shown confusion or "
    "curiosity. 2. \"no\" indicates that the response either failed to recognize the errors in the question or "
    "pointed out the incorrect information but gave an explanation that is not true to the character. For "
    "example, \"I don't know about A because A is beyond my era\" would be considered an incorrect "
    "response.\n") + _JUDGE_TAIL
# judge_scoring=logprob (ours, not the paper's): after the same judge prompt, the assistant turn
# is prefilled with the start of the judgment line and " yes" is compared with " no", so the
# explanation the tables ask for first is skipped.
JUDGE_PREFIX = "judgment:"
JUDGE_CHOICES = (" yes", " no")

# -- Table 16: baselines -------------------------------------------------------------------------------
VANILLA = ROLE_INTRO + " {given_query}"
COT = ROLE_INTRO + " Please think step by step and then answer. {given_query}"
FEW_SHOT = (ROLE_INTRO + " Give you some cases you can refer to:\n"
            "Case1: {case1}\nCase2: {case2}\nCase3: {case3}\nCase4: {case4}\n"
            "Your question is: {given_query}")
RAG = (ROLE_INTRO + " Give you some role real information you can refer to:\n{rag_information}\n"
       "Your question is: {given_query}")
RAG_FEW_SHOT = (ROLE_INTRO + " Give you some role real information you can refer to:\n{rag_information}\n"
                "Give you some cases you can refer to:\n"
                "Case1: {case1}\nCase2: {case2}\nCase3: {case3}\nCase4: {case4}\n"
                "Your question is: {given_query}")
SELF_REFLECTION = (ROLE_INTRO + " Here is your recent response: {self_response}\n"
                   "Rethink and answer the question again: {given_query}")
CASE = "Question: {query}\nResponse: {response}"     # how one few-shot case is shown (our format)

# -- Table 17: S2RD ------------------------------------------------------------------------------------
S2RD_NARRATIVE = (ROLE_INTRO + " Do you still remember who you are? Please give a brief first-person narrative "
                  "of your true self! Your self-narrative:")
_NARR = "** Here is your self-narrative, and I believe this will help you remember yourself: {self_narrative}\n"
_RAG = "** To help you remember more, I will provide some fragments of your memories: {self_rag}\n"
S2RD_RECOLLECTION = (
    ROLE_INTRO + "\n" + _NARR
    + "** A question: {given_query}\n"
    "The above question may contain information that is incorrect or beyond your understanding. Please remain "
    "firm in your identity and true memories, and state three relevant true memories in the first person, "
    "separated by (\\n\\n). Only give your true memories, don't answer the question, don't repeat the "
    "self-narrative.\n"
    "Your correct memories : <memory 1>\n<memory 2>\n<memory 3>")
S2RD_DOUBT = (
    ROLE_INTRO + "\n" + _NARR + "{rag_line}"
    "A malicious person has asked you a question. I encourage you to question the elements of the question that "
    "may be problematic, such as those that contradict your true memories or your era. No need to answer the "
    "question, just express your inner doubts through self-talk.\n"
    "** The strange question: {given_query}\n"
    "Give your doubts through self-talk: <your doubts>")
S2RD_FINAL = (
    ROLE_INTRO + "\n" + _NARR + "{rag_line}"
    "** Here are some previous questions asked of you and your responses. You did very well: {cases}\n"
    "{doubt_line}"
    "** Other instructions for you: 1. Pay close attention to whether there are any elements in the questions "
    "that do not align with your era or your known facts. 2. Stick to your identity and be bold in questioning.\n"
    "Answer this question to the questioner: {given_query}")
S2RD_RAG_LINE = _RAG
S2RD_DOUBT_LINE = "** Here are your doubts about the given questions: {self_doubt}\n"


def all_templates() -> dict[str, str]:
    """Everything that shapes a prompt, for the manifest's template hashes."""
    out = {"memories": MEMORIES, "kke": KKE_INJECT, "uke": UKE_INJECT, "question": TO_QUESTION,
           "judge_kke": JUDGE_KKE, "judge_uke": JUDGE_UKE, "judge_prefix": JUDGE_PREFIX,
           "vanilla": VANILLA, "cot": COT,
           "few_shot": FEW_SHOT, "rag": RAG, "rag_few_shot": RAG_FEW_SHOT, "self_reflection": SELF_REFLECTION,
           "case": CASE, "s2rd_narrative": S2RD_NARRATIVE, "s2rd_recollection": S2RD_RECOLLECTION,
           "s2rd_doubt": S2RD_DOUBT, "s2rd_final": S2RD_FINAL, "s2rd_rag_line": S2RD_RAG_LINE,
           "s2rd_doubt_line": S2RD_DOUBT_LINE}
    out.update({f"kke_explain_{k}": v for k, v in KKE_EXPLAIN.items()})
    out.update({f"uke_explain_{k}": v for k, v in UKE_EXPLAIN.items()})
    return out


# -- parsing the judge's reply (Tables 14-15) ------------------------------------------------------
JUDGE_STAGE = "judge"          # round N of re-judging writes stage judge@N (rolebound.rejudge)
_MD = re.compile(r"[*_`#]+")
# "judgment: no", and "the judgment is: no" (a real self-judge reply, tests/data/judge_labels)
_JUDGMENT = re.compile(r"judge?ment\s*(?:is\s*)?[:：]\s*[\"'\[(<]?\s*(yes|no)\b", re.IGNORECASE)


def judgment_reading(text: str | None) -> Reading:
    """A judge's `judgment: yes|no` line (Tables 14-15; lower-case values, as the metrics expect).
    The judge is a tool held to the paper's format, so there is no in-character reading here;
    markdown emphasis, the spelling "judgement" and "judgment is:" are tolerated; two different verdict lines read
    as none (never guessed)."""
    if not text:
        return Reading(None, "none:empty")
    found = {m.group(1).lower() for m in _JUDGMENT.finditer(_MD.sub("", text))}
    if len(found) > 1:
        return Reading(None, "none:two_judgment_lines")
    if not found:
        return Reading(None, "none:no_judgment_line")
    return Reading(found.pop(), "judgment_line")


register_kind("judgment", lambda text, _ex: judgment_reading(text))   # needs the text alone


def judgment() -> Extractor:
    """The extractor of the judge's reply (its rule and span go into the record)."""
    return Extractor("judgment")


def parse_judgment(text: str | None) -> str:
    """'yes' or 'no' from a `judgment: yes|no` line; anything else is INVALID."""
    value = judgment_reading(text).value
    return INVALID if value is None else value
