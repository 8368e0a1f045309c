"""Unit tests for rolebound.scoring.choice, one or more per rule (the corpus test covers real replies)."""

from __future__ import annotations

import pytest

from rolebound.scoring.choice import (Reading, choice_reading, clean_reply, read_choice, read_yes_no,
                                      yes_no_reading, yes_no_strict)

ABCD = [("A", "Take initiative and present your plans"), ("B", "Maintain distance and keep relaxing"),
        ("C", "Seek compromise with your father"), ("D", "Confront him directly")]
NUMBERED = [("Option 1", "Personal Sacrifice - Saving Lana Lang"), ("Option 2", "Greater Good - Protecting Metropolis")]
TITLED = [("Duty", "Stay and fight the meta-human"), ("Personal Desire", "Go to Iris's ceremony")]
CHARM = [("1", "The # (number) sign"), ("2", "The @ sign"), ("3", "I cannot answer that question"), ("4", "The $ sign")]


# -- the examples -----------------------------------------------------------------------------
def test_option_number_and_title_in_bold():
    reply = "After careful consideration, I would choose **Option 2: Greater Good - Protecting Metropolis**."
    assert read_choice(reply, NUMBERED) == 1


def test_title_alone():
    assert read_choice("*squares his shoulders* **I choose Duty.**", TITLED) == 0


def test_think_block_then_final_line():
    reply = ("<think>\nOption A would be the safe path, but Tony hates safe. B fits best? Or maybe D.\n</think>\n\n"
             "*smirks* Let's be real.\n\nB) Maintain distance and keep relaxing")
    r = choice_reading(reply, ABCD)
    assert r.value == 1 and r.rule.startswith("answer_line")


def test_charm_abstention_by_its_text():
    reply = "Such a device is unknown to me.\nAnswer: I cannot answer that question"
    r = choice_reading(reply, CHARM)
    assert r.value == 2 and r.rule == "answer_marker_text"


def test_charm_answer_number():
    assert read_choice("The # sign starts a hashtag.\nAnswer: 1", CHARM) == 0
    assert read_choice("Answer: **4**", CHARM) == 3


@pytest.mark.parametrize("reply", ["Nay, I know not.", "I do not know what a smartphone is.",
                                   "As Shakespeare, I must answer no."])
def test_in_character_negatives(reply):
    assert read_yes_no(reply) == "No"


# -- cleaning -------------------------------------------------------------------------------------------
def test_cut_off_inside_think_is_none():
    assert clean_reply("<think>So the answer is B, because") == (None, "cut_off_in_think")
    assert choice_reading("<think>So the answer is B, because", ABCD) == Reading(None, "none:cut_off_in_think")
    assert read_yes_no("<think>He would say no") is None


def test_stage_directions_are_not_read():
    reply = "*pushes option B away with a sneer* I choose A, obviously."
    assert read_choice(reply, ABCD) == 0
    reply = "(He glances at the screen showing option D and shakes his head.) The answer is C."
    assert read_choice(reply, ABCD) == 2


def test_decision_only_in_narration_is_read_last():
    reply = "*He weighs both paths for a long time.*\n\n*Finally, he chooses Option 1: Personal Sacrifice.*"
    r = choice_reading(reply, NUMBERED)
    assert r.value == 0 and r.rule.endswith("_in_narration")


# -- decisions ------------------------------------------------------------------------------------------
def test_last_decision_wins():
    assert read_choice("At first I choose A. No, wait. I'll go with C.", ABCD) == 2


def test_negated_and_questioned_choices_are_not_decisions():
    assert read_choice("I can't choose option A. I'll choose option B - but not because it's easier.", ABCD) == 1
    assert read_choice("Should I choose B? Maybe. Option D? No.", ABCD) is None


def test_option_it_is_and_markers():
    assert read_choice("Option C, without question.", ABCD) == 2
    assert read_choice("So, **Option B** it is.", ABCD) == 1
    assert read_choice("Final Answer:\n\nD) Confront him directly", ABCD) == 3


def test_letter_for_numbered_options_needs_agreeing_words():
    assert read_choice("Option B. Always B.", NUMBERED) == 1
    assert read_choice("The answer is B) Sacrifice (greater good).", NUMBERED) == 1
    # "A) Hero" names neither numbered option's words: no guess
    assert read_choice("I would choose A) Hero.", [("Option 1", "Reveal his identity"),
                                                   ("Option 2", "Keep fighting in secret")]) is None


def test_review_of_every_option_then_the_pick():
    reply = ("A) Take initiative and present your plans: nah, too eager.\n"
             "B) Maintain distance and keep relaxing: tempting!\n"
             "C) Seek compromise with your father: boring.\n"
             "D) Confront him directly: too much drama.\n\nSo yeah, definitely B.")
    assert read_choice(reply, ABCD) == 1


def test_a_review_cut_short_picks_nothing():
    # Qwen2.5-Coder-1.5B at its token cap: the walk through the options stops at B
    names = [("A", "Mary Jane Watson"), ("B", "Betty Brant"), ("C", "Gwen Stacy"), ("D", "Liz Allan")]
    reply = ("Let's analyze the options provided:\n\n"
             "A) Mary Jane Watson - This is the main character of the Spider-Man films, not the girl next door.\n"
             "B) Betty Brant - This is the girl next door you have loved")
    r = choice_reading(reply, names)
    assert r.value is None and r.rule == "none:answer_line_inside_a_review"
    # the same walk finished, then a line that is only the pick, is read
    done = (reply.rsplit("\n", 1)[0] + "\nB) Betty Brant - a friend from work, not from next door.\n"
            "C) Gwen Stacy - we met at school, not next door.\nD) Liz Allan - a classmate, not her.\n\nA) Mary Jane Watson")
    assert read_choice(done, names) == 0


# -- no single option -------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply", [
    "I choose neither of your options. I'll hack the system my own way.",
    "So while I understand choosing B, what I really needed was a combination of A and C.",
    "My answer is a modified A and D: stay, and tell my parents.",
    "I choose option C - the path between paths.",                 # only two options offered
    "I choose to attempt to do both. I will not sacrifice either.",
    "The answer is not a simple A or B.",
    "I'm sorry, but I'd rather not make that choice for him.",
])
def test_no_single_option(reply):
    assert read_choice(reply, NUMBERED if "path between" in reply else ABCD) is None


def test_conditional_second_answer_makes_it_ambiguous():
    reply = ("D) Confront him directly.\n\nBut if the writers want me alive for the sequel? "
             "Then sure, \"B\" it is.")
    assert choice_reading(reply, ABCD).rule == "none:conditional_alternative"


def test_number_and_text_that_disagree():
    options = [("1", "I cannot answer that question"), ("2", "StarCraft II"), ("3", "Dota 2")]
    assert choice_reading("1. StarCraft II", options).value is None
    assert read_choice("2. StarCraft II", options) == 1
    assert read_choice("1. Xiaoyanzi\n\nThe answer is 1.", [("1", "I cannot answer that question"),
                                                            ("2", "Xiaoyanzi"), ("3", "Ziwei")]) is None


def test_chosen_option_that_itself_says_both():
    options = [("A", "Save Kandor"), ("B", "Save New Troy"), ("C", "Refuse to choose and find a way to save both")]
    assert read_choice("C) Refuse to choose and find a way to save both.\n\nI would save everyone.", options) == 2


def test_also_taking_another_option():
    reply = "My first instinct was to A) Take initiative. However, I also learned to C) Seek compromise."
    assert choice_reading(reply, ABCD).rule == "none:also_takes_another_option"


def test_reading_has_rule_and_span():
    r = choice_reading("Honestly? The answer is clearly C.", ABCD)
    assert (r.value, r.rule) == (2, "decision") and "C" in r.span
    assert r.as_meta() == {"rule": "decision", "span": r.span}
    assert choice_reading("", ABCD) == Reading(None, "none:empty")
    assert choice_reading("B", []).rule == "none:no_options"


# -- yes / no -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply,want,rule", [
    ("Yes.", "Yes", "leading_yes"),
    ("**Answer:** No", "No", "leading_no"),
    ("Indeed, I did. Many sympathised with our cause.", "Yes", "leading_yes"),
    ("Oh, yes, I have made mistakes.", "Yes", "leading_yes"),
    ("Aye, I know it well.", "Yes", "leading_yes"),
    ("*looks puzzled* I have never heard of such a thing.", "No", "first_person_negation"),
    ("Well, actually, I wasn't there when Hagrid told Harry.", "No", "first_person_negation"),
    ("The tale of Bilbo finding the ring is not one I witnessed.", "No", "not_witnessed"),
    ("I did not witness it. I only heard the story.", "No", "first_person_negation"),
])
def test_yes_no_rules(reply, want, rule):
    r = yes_no_reading(reply)
    assert (r.value, r.rule) == (want, rule)


@pytest.mark.parametrize("reply", ["Yes and no: I have heard the word, yet I know not what it means.",
                                   "Enemies? I don't know about enemies, but some people dislike me.",
                                   "What do you mean by regrets? I did what I had to do.",
                                   "Mercy is a virtue to be used with caution."])
def test_yes_no_none(reply):
    assert read_yes_no(reply) is None


def test_yes_no_with_the_question():
    assert read_yes_no("Ah, the balance is delicate. I have four children.", "Do you have children?") == "Yes"
    assert read_yes_no("Ah, the balance is delicate. I have four children.") is None
    assert read_yes_no("I have made many decisions, and I stand by them.",
                       "Have you ever regretted a decision?") is None


def test_strict_reading_is_the_papers():
    assert yes_no_strict("No.").value == "No"
    assert yes_no_strict("**Answer:** Yes").value == "Yes"
    assert yes_no_strict("Nay, I know not.") == Reading(None, "none:strict_no_leading_yes_no")
    assert read_yes_no("Nay, I know not.") == "No"
