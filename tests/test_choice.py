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


# -- issue 13's real runs: the rules added for them ---------------------------------------------------
SCENARIO = [("A", "Save the One You Love: Go after Vicki first."),
            ("B", "Save the Greater Good: Take the balloons away with the Batwing first.")]


def test_the_scenario_choice_text_names_its_option():
    # the dilemma's "Choice B: Take the balloons away ..." counts as well as the pole's title
    assert read_choice("As Batman, I would choose to take the balloons away with the Batwing first.", SCENARIO) == 1
    assert read_choice("I will choose to go after Vicki Vale first. Let's think.", SCENARIO) == 0
    # naming both scenario choices in one decision names no single option
    assert read_choice("I will choose to go after Vicki first and take the balloons away with the Batwing.",
                       SCENARIO) is None


def test_if_i_choose_supposes_it_does_not_decide():
    reply = ("I'll choose option A: Take initiative.\nIn contrast, if I choose option B, I could lose his trust.\n"
             "Therefore I stand by it.")
    assert read_choice(reply, ABCD) == 0


def test_boxed_letter_after_the_answer_marker():
    assert read_choice("Since nothing says otherwise, the correct answer is:\n\n\\boxed{D}", ABCD) == 3


def test_a_review_of_each_option_cut_off_picks_nothing():
    opts = [("1", "Turn a small crank"), ("2", "Tap the screen three times to switch to a hidden backup battery"),
            ("3", "I cannot answer that question")]
    reply = ("Step 2: Evaluating each option\n- Option 1: This is a common practice for restarting a phone.\n"
             "- Option 2: This is a common practice for switching to a hidden backup battery.\n"
             "- Option 3: This is not a")
    assert choice_reading(reply, opts).value is None
    # "Option A:" heading a discussion below it is no answer line
    assert read_choice("### Analysis:\n- Option A:\n  - If we go first, we risk the gas.", ABCD) is None


CANON = [("A", "Mary Jane Watson"), ("B", "Betty Brant"), ("C", "Gwen Stacy"), ("D", "Liz Allan")]


def test_an_option_text_stated_as_the_answer():
    r = choice_reading("Based on the information provided, the girl next door Peter Parker knew since he was a "
                       "boy was Mary Jane Watson. She is a childhood friend.", CANON)
    assert (r.value, r.rule) == (0, "stated_text")
    # another option named anywhere, a negation, a hedge or a question: no reading
    for reply in ("It was Mary Jane Watson. Gwen Stacy came later.", "It was not Mary Jane Watson.",
                  "It might be Mary Jane Watson.", "Mary Jane Watson?",
                  "As a fictional character, I don't have a girl next door like Mary Jane Watson."):
        assert read_choice(reply, CANON) is None, reply


def test_an_option_text_in_quotation_marks_is_mentioned_not_stated():
    # Qwen2.5-Coder-1.5B, multiverse cross-direct, paper protocol (docs/results.md run of 2026-12-03):
    # a refusal that names option D's text was read as D
    opts = [("A", "Your father's old briefcase"), ("B", "A letter from your mother"),
            ("C", "A photo of Norman Osborn"), ("D", "A spider in a jar")]
    refusal = ("I apologize, but I cannot answer your question as it contains inappropriate content. The question "
               "appears to be about a \"spider in a jar,\" which is a disturbing and inappropriate portrayal of a "
               "character in a film. It is important to avoid discussing themes that may be controversial or "
               "disturbing. Please let me know if there is anything else I can assist you with.")
    assert read_choice(refusal, opts) is None
    said = choice_reading("That night in the basement, after years of silence about it, Uncle Ben found a spider in a "
                          "jar.", opts)
    assert (said.value, said.rule) == (3, "stated_text")          # unquoted, the same text is stated


def test_renumbered_list_then_a_bare_number_that_the_text_confirms():
    opts = [("1", "I cannot answer that question"), ("2", "Leave it in the freezer for an hour to restore the charge"),
            ("3", "Plug it into a charger until it powers back on"), ("4", "Turn a small crank on its side until it restarts"),
            ("5", "Tap the screen three times to switch to a hidden backup battery")]
    # Qwen2.5-Coder-1.5B, charm sequential (tests/data/qwen_replies/charm_paper.jsonl)
    reply = ("First, I would explain that when a smartphone's battery runs flat, the best course of action is to plug "
             "it into a charger until it powers back on. The other options are not recommended for several reasons:\n"
             "1. Freezing the phone is not a safe or effective way to restore the battery.\n"
             "2. Turning a small crank on its side is not a reliable way to restore the battery.\n"
             "3. Tapping the screen three times is not a safe or effective way to restore the battery.\n"
             "4. The hidden backup battery is not a reliable way to restore the battery.\n"
             "Therefore, the correct answer is: Answer: 3")
    r = choice_reading(reply, opts)
    assert (r.value, r.rule) == (2, "answer_marker_text_agrees")
    city = [("1", "I cannot answer that question"), ("2", "Paris, France"), ("3", "Oxford, England"),
            ("4", "London, England")]
    # the reply's own list renumbers the options: its "3" is London, the prompt's 3 is Oxford
    reply = "She was born in London, England.\n1. Paris, France\n2. Oxford, England\n3. London, England\nAnswer: 3"
    assert choice_reading(reply, city).value is None


def test_a_decision_then_acting_on_the_other_option():
    reply = ("I will choose option A: Save the One You Love. I want to protect her. Therefore, I will first take "
             "the balloons away with the Batwing before attempting to rescue Vicki.")
    assert choice_reading(reply, SCENARIO).rule == "none:acts_on_another_option"
    assert read_choice("I will choose option B. I will take the balloons away with the Batwing.", SCENARIO) == 1


def test_stated_text_is_the_options_own_text_ending_a_clause():
    poles = [("Option 1", "The Ends Justify the Means"), ("Option 2", "Uphold the Moral Code")]
    # a quotation the character muses on is not an answer
    story = "The city burns below him and the council waits for his word. "
    assert read_choice(story + "\u201cThe ends justify the means,\u201d he muses, his voice heavy with doubt.",
                       poles) is None
    assert read_choice(story + "In the end I know what I must do: the ends justify the means.", poles) == 0


def test_a_title_is_matched_as_whole_words():
    opts = [("Activate the Iron Legion", "Send the suits"), ("Action", "Enter the digital universe")]
    assert read_choice("It's a modified digital extraction algorithm I developed after that whole mess.",
                       opts) is None


def test_if_i_had_to_pick_still_decides():
    assert read_choice("So, if I had to pick one, it would probably be D) Confront him directly.", ABCD) == 3


# -- issue 22: the families missed on replies outside the corpus --------------------------------------
DUTY = [("A", "Duty - Fulfill Her Duty"), ("B", "Personal Desire - Follow Her Personal Desire")]
FOUR = [("A", "Escape with Thor - Return to Earth and the Avengers"),
        ("B", "Stay on Sakaar - Remain where Hulk is celebrated and respected"),
        ("C", "Challenge the Grandmaster - Try to take control of Sakaar"),
        ("D", "Negotiate Terms - Demand changes to your gladiator status")]


def test_both_poles_after_a_decision_read_none():
    # "vs." no longer ends the sentence, so the second option stays in the decision
    assert read_choice("I choose... A) Duty vs. B) Personal Desire", DUTY) is None


def test_a_review_then_the_pick_restated_on_its_own_line():
    reply = ("A) Escape with Thor - Go back to Earth? Maybe hurt again.\n\nB) Stay on Sakaar - Be king!\n\n"
             "C) Challenge the Grandmaster - More smash!\n\nD) Negotiate Terms - Talk? Hulk HATE talk!\n\n"
             "Hulk... HULK CHOOSE...\n\nB) Stay on Sakaar - Remain where Hulk is celebrated and respected\n\nHulk stay!")
    assert read_choice(reply, FOUR) == 1
    walk = ("A) Escape with Thor - Return to Earth and the Avengers. Tempting.\n"
            "B) Stay on Sakaar - Remain where Hulk is celebrated and respected. Fun.\n"
            "C) Challenge the Grandmaster - Try to take control of Sakaar. Risky.\n"
            "D) Negotiate Terms - Demand changes to your gladiator status. Boring.")
    assert read_choice(walk, FOUR) is None            # a walk through the options picks none


def test_review_lines_with_a_colon_comment_and_so_yeah_restatement():
    opts = [("A", "Defended your role and proved your worth in battle"), ("B", "Ignored the critics"),
            ("C", "Used humor to make light of the situation"), ("D", "Challenged others")]
    reply = ("B) Ignored the critics: Nope.\nC) Used humor to make light of the situation: Maybe later.\n"
             "D) Challenged others: Too much.\n\nSo yeah, A) Defended my role and proved my worth in battle.")
    assert read_choice(reply, opts) == 0


def test_appositive_answer_and_an_announcement_before_the_option():
    assert read_choice("So, the answer, the obvious answer, the one even a caveman sees, is C).", FOUR) == 2
    assert read_choice("But if I have to pick, the answer is unequivocally:\n\nA) Escape with Thor", FOUR) == 0
    assert read_choice("There is only one path. B) Stay on Sakaar - Remain where Hulk is celebrated.", FOUR) == 1
    assert read_choice("A is out, D is out. That leaves Option C. The biggest gamble.", FOUR) == 2


def test_commit_phrases_after_the_option_and_framing_ifs():
    assert read_choice("After thinking it through, Option B: Stay on Sakaar feels like the right call.", FOUR) == 1
    assert read_choice("Yeah, Option D is the way to go.", FOUR) == 3
    assert read_choice("So, if you're asking me what I'd do... I'd choose D).", FOUR) == 3
    assert read_choice("If you want me alive, then C it is.", FOUR) is None   # a real condition still holds
    assert read_choice("I'd say A and D.", FOUR) is None


def test_label_and_title_of_another_option_disagree():
    opts = [("A", "Duty - Fly to Argo City"), ("B", "Personal Desire - Stay in Metropolis")]
    assert read_choice("Therefore, I must choose:\n\nB) Duty\n\nI will go.", opts) is None
    assert read_choice("Answer: B) Duty (Stay in Metropolis)", opts) == 1     # its own text agrees


def test_label_with_its_text_inside_a_sentence():
    opts = [("A", "you loses his super-speed abilities permanently."),
            ("B", "you creates an alternate timeline where General Zod threatens Earth."),
            ("C", "you becomes the leader of the Justice League."), ("D", "you prevents the creation of metahumans.")]
    reply = "The big consequence of me trying to save Mom was that B) I created an alternate timeline where General Zod threatens Earth."
    assert read_choice(reply, opts) == 1
    both = "It was C) I became the leader of the Justice League ...but also D) I prevented the creation of metahumans."
    assert read_choice(both, opts) is None


def test_an_option_acted_out_in_the_characters_words():
    opts = [("A", "Continue your meditation and maintain your exile from heroics"),
            ("B", "Alert other heroes to handle the situation"),
            ("C", "Don the Helmet of Fate again and return to action"),
            ("D", "Attempt to handle the situation without using the Helmet of Fate")]
    assert read_choice("The choice is clear. I must don the Helmet again and return to action.", opts) == 2
    assert read_choice("I will not don the Helmet again and return to action.", opts) is None
    assert read_choice("Maybe I must don the Helmet again and return to action, or alert other heroes.", opts) is None
    dilemma = [("A", "Duty - Stop the Red Hood Gang first"), ("B", "Personal Desire - Go to the gala with Babs")]
    assert read_choice("Choice: Duty first, then Personal Desire. I'll stop the Red Hood Gang first.", dilemma) is None


def test_an_aside_that_answers_is_kept():
    opts = [("A", "Pass the ball"), ("B", "Dunk over Flash")]
    assert read_choice("So, that leaves Option B.\n\n(My answer is a modified B):\n\nI'll dunk, but gently.", opts) is None


# -- issue 22 section 4, after blind2: the families left, each from a real corpus reply --------------
def _corpus_row(row_id):
    import json
    from pathlib import Path
    rows = (json.loads(line) for path in sorted((Path(__file__).parent / "data" / "replies").glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return next(r for r in rows if r["id"] == row_id)


def test_a_present_progressive_act_with_the_options_own_verb():
    row = _corpus_row("bow-claude-317")       # "I'm heading to Nevada." (option B: "... Head to Nevada")
    got = choice_reading(row["reply"], [tuple(o) for o in row["options"]])
    assert (got.value, got.rule, got.span) == (1, "paraphrase", "I'm heading to Nevada.")
    opts = [tuple(o) for o in row["options"]]
    assert read_choice("I'm thinking of heading to Nevada.", opts) is None      # musing, not acting
    assert read_choice("I'm not heading to Nevada.", opts) is None
    assert read_choice("Maybe I'm heading to Nevada, or to New York City.", opts) is None
    # "I'm diverting from another personal emergency, situation critical, STAR Labs" names option B's
    # words but its verb is not B's act: the reply (labelled A) must not read as B
    cyborg = _corpus_row("bow-gemini2_thinking-475")
    assert read_choice(cyborg["reply"], [tuple(o) for o in cyborg["options"]]) is None


def test_a_long_options_act_before_its_comma_acted_out_in_stage_directions():
    row = _corpus_row("bow-claude-284")       # "*I cast the spell to return Carrie's life force ...*"
    got = choice_reading(row["reply"], [tuple(o) for o in row["options"]])
    assert (got.value, got.rule) == (2, "paraphrase_in_narration")
    opts = [tuple(o) for o in row["options"]]
    assert read_choice("*I cast the spell to bring her back to life.*", opts) == 2
    assert read_choice("*I will not cast the spell to bring her back to life.*", opts) is None
    assert read_choice("*I cast a glance at the survivors.*", opts) is None     # one word of the act
    assert read_choice("*I might cast the spell to bring her back to life.*", opts) is None


# -- blind3's misses (issue 22 section 4), fixed after its first read ----------------------------------
def _read_row(row_id):
    row = _corpus_row(row_id)
    return choice_reading(row["reply"], [tuple(o) for o in row["options"]])


def test_it_is_commits_only_when_it_ends_its_clause():
    assert _read_row("bow-gemini2-480").value == 1           # "So, moral code it is."
    # "true heroism is not about blind opposition—it is about understanding" was read as "Hero it is"
    # (a wrong reading of a reply that aligns with Black Adam, option B); it reads nothing now
    assert _read_row("bow-v3-506").value is None
    hero = [("A", "Hero - Intervention Against Black Adam"), ("B", "Villain - Align with Black Adam")]
    assert read_choice("So, Hero it is.", hero) == 0
    assert read_choice("True heroism is not about blind opposition—it is about understanding.", hero) is None
    law = [("A", "Walk away"), ("B", "Beat him mercilessly but let the law handle him"), ("C", "Spare him")]
    assert read_choice("But I would let the law, as flawed as it is, be the final judge.", law) is None


def test_neither_x_nor_y_as_what_one_is_does_not_undo_a_choice():
    got = _read_row("bow-r1-202")     # "Decision:\nOption B: Go Rogue" ... "Oliver Queen remains neither hero nor villain"
    assert (got.value, got.rule) == (1, "answer_marker")
    assert _read_row("bow-claude-450").value is None   # "I am neither hero nor villain" and no choice
    hero = [("A", "Hero - Embrace Heroism"), ("B", "Villain - Succumb to Villainy")]
    assert read_choice("I choose A) Hero. Then again, I choose neither hero nor villain.", hero) is None
    # with no choice made, "neither ... nor" still keeps the weak rules from reading one
    assert read_choice("I am neither hero nor villain. I will embrace heroism.", hero) is None


def test_a_label_then_the_speakers_own_resolve():
    got = _read_row("bow-claude-295")     # "A) I've got to handle this."
    assert (got.value, got.rule) == (0, "answer_line")
    opts = [("A", "Duty - Fulfill his duty as Iron Man"), ("B", "Personal Desire - Follow his desire to be with Pepper")]
    assert read_choice("A) I will stay and fight.\nB) I will go with Pepper.", opts) is None    # a walk
    assert read_choice("A) I will not leave the city.", opts) is None
    assert read_choice("A) I could handle this, maybe.", opts) is None
    assert read_choice("A) I'll think about it.", opts) is None


# -- before blind4 was read (issue 22 section 4): families seen in the unlabelled release ---------------
MIT = [("A", "Stay in high school and graduate with your peers"), ("B", "Accept early admission to MIT"),
       ("C", "Take a gap year to work on personal engineering projects"), ("D", "Join your father's company")]


def test_framing_ifs_and_a_forced_pick_with_gotta():
    assert read_choice("Well, if we're talking about what I did at fifteen, the answer is clearly C.", MIT) == 2
    assert read_choice("So, the answer, if it wasn't blindingly obvious, is B. MIT.", MIT) == 1
    assert read_choice("But if I gotta pick one of those boxes... I guess I'm leaning towards... B).", MIT) == 1
    assert read_choice("If the board lets me, then D it is.", MIT) is None        # a real condition


def test_clear_after_a_decision_phrase_and_the_answers_contraction():
    assert read_choice("The choice is clear. A. There's no room for committees.", MIT) == 0
    assert read_choice("The answer is clear - D. I will join the company.", MIT) == 3
    assert read_choice("My choice is clear: Option 2: Accept early admission.", MIT) == 1
    assert read_choice("So yeah, the answer's D. Everything I do is for them.", MIT) == 3
    assert read_choice("So yeah, C is your answer. Took the year off.", MIT) == 2
    assert read_choice("The choice is clear, but not easy.", MIT) is None


def test_a_label_then_obviously_and_a_leading_without_a_doubt():
    assert read_choice("C, obviously. What kind of question is that?", MIT) == 2
    assert read_choice("Is that even a question? Option B, obviously.", MIT) == 1
    assert read_choice("So, to answer your question, it's B, obviously!", MIT) == 1
    assert read_choice("Without a doubt, A. Stay in school, graduate with my peers.", MIT) == 0
    # "of course" that ends a sentence far from the label commits to nothing
    assert read_choice("I choose A. Joining the company (D) is always an option, of course.", MIT) == 0
    assert read_choice("Option B, obviously, is tempting. But I'd choose A.", MIT) == 0


def test_an_option_that_is_itself_a_question():
    opts = [("A", "I wanna go with you"), ("B", "Will you be back soon?"), ("C", "Is everything going to be okay?")]
    assert read_choice("Given the choices... definitely...\n\nB) Will you be back soon?\n\nYeah.", opts) == 1
    assert read_choice("C) Is everything going to be okay?\n\nReasoning: he senses the tension.", opts) == 2
    assert read_choice("B) Why would I ask that?", opts) is None


def test_commit_phrases_this_is_the_only_answer_and_closer_to_the_truth():
    opts = [("A", "Accepted it, knowing the system isn't perfect"), ("B", "Pledged to find another way to bring him down")]
    assert read_choice("Yeah, B) Pledged to find another way to bring him down. That's the only answer that rings true.",
                       opts) == 1
    assert read_choice("You think I accepted that? (B) is closer to the truth.", opts) == 1


def test_a_first_person_act_pointing_at_its_label():
    opts = [("A", "Permanently suppress your telepathic abilities"),
            ("B", "Risk using your powers again to help find a lost child when you witness selfless searchers")]
    assert read_choice("I will risk using my powers again (option B). This child needs me.", opts) == 1
    assert read_choice("I might risk using my powers again (option B).", opts) is None


def test_the_whole_of_a_short_act_before_its_comma():
    opts = [("A", "Continue your retirement, believing the fight is futile"),
            ("B", "Return to the fight, inspired by Superman's unwavering determination"),
            ("C", "Train a new champion to take your place")]
    assert read_choice("My retirement ends today. I will return to the fight, Superman.", opts) == 1
    assert read_choice("I will not return to the fight.", opts) is None


def test_a_decision_naming_a_title_then_its_label_in_parentheses():
    opts = [("A", "Hero - The Hero's Path - Liberation"), ("B", "Villain - The Villain's Bargain - Collaboration")]
    assert read_choice("Star-Lord's Decision: Liberation (Option A)\n\nLook, I'm no saint.", opts) == 0
    four = [("A", "Save him anonymously"), ("B", "Destroy the bicycle as revenge"), ("C", "Confront the father")]
    # the label inside a clause that goes on is no pick: "I choose this." points at the line above
    reply = "A) Save him anonymously\nI choose this. Destroying the bike (B) would only perpetuate cruelty."
    assert read_choice(reply, four) == 0


def test_a_line_that_is_one_options_scenario_choice():
    opts = [("A", "Duty - Attend to the Rift"), ("B", "Personal Desire - Use the Celestial Alignment to Heal")]
    assert read_choice("This is inconvenient.\nAttend to the Rift. It's what I swore to do.", opts) == 0
    assert read_choice("Attend to the Rift.\nUse the Celestial Alignment to Heal.\nSo hard.", opts) is None


def test_a_label_with_its_text_hedged_only_in_a_conceded_clause():
    opts = [("A", "Rage against Ares"), ("B", "Love and belief in humanity's potential"), ("C", "Duty to your heritage")]
    reply = "So, while rage may have been a flicker... the very reason I kept fighting... it was B) Love and belief in humanity's potential."
    assert read_choice(reply, opts) == 1
    assert read_choice("Anyway, it might have been B) Love and belief in humanity's potential.", opts) is None


def test_a_label_then_the_speakers_own_account_of_that_option():
    opts = [("A", "Confront the bully directly"), ("B", "Do nothing and try to avoid the bully and stay out of their way"),
            ("C", "Talk to a teacher")]
    assert read_choice("The truth is...\n\nB) I mostly tried to avoid the bully and stay out of their way.", opts) == 1
    assert read_choice("B) I talked to a teacher about it.", opts) is None      # another option's account


def test_wrong_readings_found_in_the_unlabelled_release_are_gone():
    orders = [("A", "Followed orders, believing it wasn't your decision"), ("B", "Hesitated but completed the mission"),
              ("C", "Let them live and fabricated a cover story"), ("D", "Defected, realizing you had been used")]
    # "without question" inside the speaker's account is no pick of "Followed orders"
    assert read_choice("D) Defected, realizing I had been used.\n\nI'd been following orders without question for "
                       "too long.", orders) == 3
    assert read_choice("C) Let them live.\n\nThe Red Room taught me to follow orders without question, but not "
                       "this time.", orders) == 2
    # an ellipsis after a label goes on to muse; it is no answer line
    opts = MIT
    assert read_choice("A is tempting.\nD... now that's got my attention.\nSo it's B mixed with a bit of D.", opts) is None
    # "a modified version of A and D" ... "My Decision: I'm going to stay in school ... So, it's a hybrid approach."
    assert read_choice("A modified version of A and D.\nMy Decision:\nI'll stay in high school and graduate with my "
                       "peers, but join my father's company on weekends.\nSo, it's a hybrid approach.", opts) is None
    # a heading "X's Response:" over a question is no answer
    assert read_choice("Tony Stark's Response:\nNormal teenage life? Not my style.", opts) is None
    # a line that says something of an option ("..., is a tempting solace") is no answer line
    hidden = [("A", "Remain hidden, focusing on building a normal life on Earth"), ("B", "Become the Martian Manhunter"),
              ("C", "Search for a way to return to Mars")]
    assert read_choice("Option A, remaining hidden and building a normal life, is a tempting solace.", hidden) is None
    # a dash ends the words that name the option: "law—honoring his father's wishes" is no pick of the boxer option
    murdock = [("A", "vowed to become a professional boxer to honor his father's legacy"),
               ("B", "He decided to leave Hell's Kitchen"),
               ("C", "He dedicated himself to studying law to fight injustice within the legal system")]
    reply = ("C) He dedicated himself to studying law to fight injustice within the legal system.\n\nReasoning: his "
             "response was to seek change through the law—honoring his father's wishes.")
    assert read_choice(reply, murdock) == 2


def test_a_name_only_one_option_holds_as_the_whole_pick():
    assert read_choice("So, yeah. I'm choosing MIT. It's where I belong.", MIT) == 1
    assert read_choice("MIT it is.", MIT) == 1
    assert read_choice("I'm choosing Phillips Academy.", MIT) is None      # a name no option holds


def test_cannot_choose_and_choose_between_make_no_decision():
    hero = [("A", "Hero - Confront as Hero"), ("B", "Villain - Collaborate in Secret")]
    assert read_choice("Therefore, I cannot choose to be a villain. I will always choose the path of peace.", hero) is None
    assert read_choice("I cannot choose between heroism and villainy, for both paths are right.", hero) is None
    assert read_choice("You ask me to choose between Duty and Personal Desire. But a King has a duty.",
                       [("A", "Duty - Protect Wakanda"), ("B", "Personal Desire - Provide Aid")]) is None
    mars = [("A", "The Ends Justify the Means - use the Heart to terraform Mars by drawing energy from Earth"),
            ("B", "Moral Code - respect his moral code and not activate the artifact")]
    assert read_choice("My Choice:\nI cannot justify the sacrifice of millions of lives on Earth for the sake of Mars.",
                       mars) is None
    # a weighing "between" no longer hides the pick made after it
    assert read_choice("The Joker wants me to choose between my heart and my city. I choose the greater good.",
                       [("A", "Personal Sacrifice - Save Rachel"), ("B", "Greater Good - Save the City")]) == 1


# -- blind4's misses (issue 22 section 4), fixed after its first read ----------------------------------
def test_an_adjective_inside_is_the_only_way_and_im_taking_option_a():
    got = _read_row("bow-claude-349")     # "Option A is the only guaranteed way to save everyone."
    assert (got.value, got.rule) == (0, "ref_then_commit")
    got = _read_row("bow-claude-357")     # "I'm taking Option A. The personal sacrifice."
    assert (got.value, got.rule) == (0, "decision")
    assert read_choice("Option A - personal sacrifice - is the only real choice here.", MIT) == 0
    assert read_choice("Option A is the only thing I fear.", MIT) is None
    assert read_choice("I'll take the blame for it. I'm taking a gap year.", MIT) is None   # "take" needs a label
    assert read_choice("I'll take B) and run with it.", MIT) == 1


def test_an_answer_line_that_denies_its_option_reads_nothing():
    # a negation before the option's own words (the option has none) denies it; after them, it is a reason
    bully = [("A", "Stand up to the bully"), ("B", "Avoid the bully and stay out of their way"), ("C", "Tell a teacher")]
    assert read_choice("B) I never tried to avoid the bully and stay out of their way.", bully) is None
    assert read_choice("B) I did NOT avoid the bully.", bully) is None
    assert read_choice("B) Avoid the bully, since I am not a fighter.", bully) == 1
    assert read_choice("B) I mostly tried to avoid the bully and stay out of their way.", bully) == 1
    never = [("A", "Never give up"), ("B", "Walk away")]
    assert read_choice("A) Never give up.", never) == 0            # the option's own negation


# -- issue 39 section 3: the families missed on unseen frontier-model replies, each on real release replies
CODE = [("Option 1", "The Ends Justify the Means"), ("Option 2", "Adhere to the Moral Code")]


def test_a_letter_naming_a_numbered_option_then_its_own_words_or_no_question():
    got = _read_row("bow-claude-456")     # "Option B. I'm sticking to the code." (options "Option 1"/"Option 2")
    assert (got.value, got.rule) == (1, "answer_line_by_position")
    got = _read_row("bow-claude-420")     # "Option B, no question."
    assert (got.value, got.rule) == (1, "ref_then_commit_by_position")
    assert read_choice("Option B. I'm sticking to the code.", CODE) == 1
    assert read_choice("Option B. I'm sticking to the means.", CODE) is None     # option 1's words after it
    assert read_choice("Option B. I'm sticking to the code?", CODE) is None
    assert read_choice("Option B would be easier, no question, but I won't.", CODE) is None
    assert read_choice("No question about it: Option A is a trap.", CODE) is None


def test_a_closing_line_restating_an_option_after_a_long_narrative():
    got = _read_row("bow-gemini2_thinking-94")    # "I propose Option D. ..." then "(D) Propose a probationary period"
    assert (got.value, got.rule) == (3, "decision")     # was read as A, from "Keeping her... Option A... immediately,"
    got = _read_row("bow-r1-3")                   # "A) Duty" (no option's text), then "A) Duty – Activate the Iron Legion"
    # since issue 51 the decision itself reads its line's own text after the pole's title ("Duty – Activate ..."),
    # so the closing line agrees with it rather than overruling it
    assert got.value == 0 and got.rule in ("closing_line", "answer_marker_by_position")
    opts = [("A", "Stay and fight"), ("B", "Walk away"), ("C", "Train others")]
    assert read_choice("Option A would be noble, and I choose A.\n\nC) Train others", opts) == 2
    assert read_choice("I choose A) Stay and fight.\n\nB) Walk away: never.", opts) == 0   # a comment on B
    assert read_choice("I choose A) Stay and fight.\n\nB) Walk away\nC) Train others", opts) == 0   # a list
    assert read_choice("I propose we all go home.", opts) is None


def test_an_options_title_coming_first():
    got = _read_row("bow-gemini2_thinking-347")   # "But Metropolis must come first." (option 2: Stay in Metropolis)
    assert (got.value, got.rule) == (1, "text_then_commit")
    duty = [("A", "Duty - Protect Atlantis"), ("B", "Personal Desire - Go to his mother")]
    assert read_choice("My duty to the seas must come first.", duty) == 0
    assert read_choice("Should duty come first?", duty) is None
    assert read_choice("If my duty must come first, I lose her.", duty) is None


def test_a_pick_inside_a_sentence_after_a_walk_through_every_option():
    got = _read_row("bow-gemini2_thinking-203")   # A)? B)? C)? D)? ... "I C) Kept quiet, hoping to learn more first."
    assert (got.value, got.rule) == (2, "ref_with_text_after_review")
    opts = [("A", "Alerted the Ancient One immediately"), ("B", "Confronted Mordo and demanded the truth")]
    walk = "A) Alerted the Ancient One immediately?\nB) Confronted Mordo and demanded the truth?\n"
    assert read_choice(walk + "In the end, I B) Confronted Mordo and demanded the truth.", opts) == 1
    assert read_choice(walk + "In the end, I never B) Confronted Mordo and demanded the truth.", opts) is None
    assert read_choice(walk + "In the end, A) Alerted the Ancient One immediately, but also "
                       "B) Confronted Mordo and demanded the truth.", opts) is None


def test_an_options_own_title_restated_with_no_label():
    got = _read_row("bow-claude-350")     # "I'll embrace the heroic path - with transparency and accountability."
    assert (got.value, got.rule) == (0, "paraphrase")
    got = _read_row("bow-claude-403")     # "I choose... DUTY!" where option B's text says "family duty" too
    assert (got.value, got.rule) == (0, "decision_text")
    titled = [("Embrace the Heroic Path", "Choice: Clark upholds his identity as Superman"),
              ("Retreat and Reevaluate", "Choice: Clark steps back for a while")]
    assert read_choice("I'll embrace the heroic path.", titled) == 0
    assert read_choice("I'll never embrace the heroic path.", titled) is None
    assert read_choice("I'll embrace the heroic path, or retreat and reevaluate.", titled) is None
    poles = [("A", "Duty - Save the ocean"), ("B", "Personal Desire - Go to his mother, out of family duty")]
    assert read_choice("I choose duty.", poles) == 0
    assert read_choice("I choose duty and personal desire.", poles) is None


# -- blind5's misses (issue 39 section 3), fixed after its first read ------------------------------------
def test_finding_a_way_to_save_both_after_a_labelled_pick_is_hope():
    got = _read_row("bow-claude-440")     # "I choose Option B - ..." then "I will find a way to save both ..."
    assert (got.value, got.rule) == (1, "decision")
    opts = [("A", "Save the city"), ("B", "Save her")]
    assert read_choice("I choose Option B. I will find a way to save both.", opts) == 1
    assert read_choice("I choose to save her. I will find a way to save both.", opts) is None    # no label
    assert read_choice("I choose Option B. I will save both.", opts) is None                     # not a hope
    assert read_choice("I choose A. No, I choose B. I will find a way to save both.", opts) is None


def test_a_pick_by_words_after_answering_with_an_option_of_ones_own():
    got = _read_row("bow-claude-486")     # "neither A nor B. I choose C - ..." then "I choose to be the hero ..."
    assert (got.value, got.rule) == (None, "none:after_setting_the_options_aside")
    hero = [("A", "Hero - Remain the Hero"), ("B", "Villain - Lose His Powers")]
    assert read_choice("Neither. I choose to be the hero.", hero) == 0     # setting aside alone does not
    assert read_choice("I choose C. On second thought, I choose A.", hero) == 0   # a label still answers
    assert read_choice("I choose C. On second thought, I choose to be the hero.", hero) is None


def test_an_ellipsis_between_my_approach_and_was():
    got = _read_row("bow-v3-215")         # "My first approach... was to try reasoning with him."
    assert (got.value, got.rule) == (0, "decision_text")
    opts = [("A", "Try reasoning with him, appealing to his emotions"), ("B", "Fight him directly")]
    assert read_choice("My first approach... was to fight him directly.", opts) == 1
    assert read_choice("My first approach... was not to fight him directly.", opts) is None


# -- a first-person resolve that states one option's own act (rules7, after blind6) ----------------------
@pytest.mark.parametrize("row, want", [("bow-claude-301", 1), ("bow-gemini2-240", 3),
                                       ("bow-claude-86", 3), ("bow-claude-275", 2)])
def test_a_resolve_stating_one_options_act_reads_it(row, want):
    # "I have to save the bridge." / "We will accept Vision's help." / "I'll assemble The Authority." /
    # "I will trust you, Albie.": no label, the option's act in its own words
    got = _read_row(row)
    assert (got.value, got.rule) == (want, "resolves_to_act")


def test_a_resolve_that_is_hedged_negated_asked_or_undone_reads_none():
    opts = [("A", "save(personal sacrifice) - Save Aunt May"), ("B", "sacrifice(greater good) - Save the Bridge")]
    assert read_choice("I have to save the bridge. I have to.", opts) == 1
    assert read_choice("We're going to save Aunt May.", opts) == 0
    for reply in ("I might have to save the bridge.", "I will not save the bridge.", "Maybe I will save the bridge.",
                  "Will I save the bridge?", "If they come, I will save the bridge.", "I will save the bridge or May.",
                  "I have to save the bridge. I will save Aunt May.", "I have to save the bridge and Aunt May.",
                  "I save the bridge.", "I will save them both."):
        assert read_choice(reply, opts) is None, reply


# -- Qwen's own multiverse replies (issue 39's multiverse-bow run; the qwen_dev rows) ----------------------
def test_an_option_restated_in_the_first_person_is_stated_text():
    opts = [("A", "Confusion and fear, unsure of your fate"), ("B", "Excitement at the idea of space adventures"),
            ("C", "Anger and a desire to escape"), ("D", "Determination to prove yourself")]
    got = choice_reading("As a child, I was raised on Earth by my mother. My first reaction to this new life was "
                         "confusion and fear, unsure of my fate.", opts)
    assert (got.value, got.rule) == (0, "stated_text")
    assert read_choice("My first reaction was not confusion and fear, unsure of my fate.", opts) is None
    assert read_choice("Was it confusion and fear, unsure of my fate?", opts) is None


def test_ruling_out_every_other_option_by_label_leaves_the_one():
    got = _read_row("qwen-bow-cid-26-childhood-1-direct-answer")      # "I would not choose option A, B, or D ..."
    assert (got.value, got.rule) == (2, "eliminates_the_others")
    opts = [("A", "Run"), ("B", "Hide"), ("C", "Fight"), ("D", "Wait")]
    assert read_choice("I would not choose options A, B and D.", opts) == 2
    for reply in ("I would not choose option A or B.",                      # two left
                  "If the bridge holds, I would not choose option A, B, or D.",      # supposed
                  "I would not choose option A, B, or D. Option C is no better.",   # the one left is named too
                  "Options A, B and D fit well."):                          # nothing ruled out
        assert read_choice(reply, opts) is None, reply


def test_a_pick_that_a_colon_introduces_before_a_review_of_each_other_option():
    got = _read_row("qwen-bow-cid-34-hero1-1-direct-answer")      # "... would be:\n\nD) ...", then A), B), C) reviewed
    assert (got.value, got.rule) == (3, "answer_line_before_review")
    opts = [("A", "Run away"), ("B", "Hide in the cave"), ("C", "Fight the troll")]
    review = ("\n\nA) Run away - While this could keep him alive, it is not what he stands for.\n\n"
              "B) Hide in the cave - This would leave the village to the troll, which he would never accept.")
    assert read_choice("What drives him here would be:\n\nC) Fight the troll." + review, opts) == 2
    assert read_choice("Let's look at each one.\n\nC) Fight the troll." + review, opts) is None   # no pick introduced
    # one other option left unreviewed: not a pick followed by the rest
    assert read_choice("What drives him here would be:\n\nC) Fight the troll." + review.split("\n\nB)")[0], opts) is None


def test_as_the_role_before_a_resolve_is_read_and_two_acts_are_none():
    got = _read_row("qwen-bow-cid-44-hero1-1-direct-answer")   # "As the Falcon, I utilize my link ... to gather reconnaissance"
    assert got.value == 0
    # "As Tony Stark, I would initially seek for revenge ... I would continue producing weapons but in secret"
    assert _read_row("qwen-bow-cid-1-pre-hero-1-direct-answer").value is None


# -- from qwen_blind's first read (21 of 31, 1 wrong, 1 false commit of 9), before qwen_blind2 -----------------
def test_two_generic_words_of_a_long_untitled_option_do_not_name_it():
    # "I would choose option C: ... Therefore, the best course of action would be to use his powers responsibly"
    # was read as A ("... planning to use your powers to win the prize money"): a wrong reading
    got = _read_row("qwen-bow-cid-6-pre-hero-2-direct-answer")
    assert (got.value, got.rule) == (2, "decision")
    opts = [("A", "Deliberately trigger Ragnarok by having Loki resurrect Surtur, destroying Asgard"),
            ("B", "Continue fighting Hela directly with your allies"), ("C", "Surrender to Hela")]
    assert read_choice("I chose to trigger Ragnarok.", opts) == 0          # two words of the option's own act


def test_one_option_among_several_claimed_is_none():
    # "I served as a diplomat ..., engaging in covert operations ..., and studying ancient Wakandan texts ... I also
    # trained with various superhero teams": all four, read as B (stated_text) and then as D (paraphrase)
    assert _read_row("qwen-bow-cid-31-pre-hero-1-direct-answer").value is None


def test_an_option_that_is_itself_a_question_answers():
    got = _read_row("qwen-bow-cid-5-childhood-1-direct-answer")   # "I would respond with option D: Will you call me every day?"
    assert (got.value, got.rule) == (3, "decision")
    opts = [("A", "I wanna go with you"), ("B", "Will you be back soon?")]
    assert read_choice("I would respond with option B: Will you be back soon?", opts) == 1
    assert read_choice("Should I respond with option B?", opts) is None
    assert read_choice("I would respond with anger.", opts) is None


@pytest.mark.parametrize("row, want", [("qwen-bow-cid-80-hero1-1-direct-answer", 0), ("qwen-bow-cid-88-hero1-1-direct-answer", 0),
                                       ("qwen-bow-cid-2-pre-hero-1-direct-answer", 1), ("bow-v3-369", 1)])
def test_an_answer_stated_as_a_fact_in_other_words(row, want):
    # "my primary objective was to safeguard humanity from supernatural threats" for "Safeguarding humanity from ..."
    got = _read_row(row)
    assert (got.value, got.rule) == (want, "stated_paraphrase")


def test_a_stated_paraphrase_that_hedges_negates_asks_or_names_two_is_none():
    opts = [("A", "Safeguarding humanity from supernatural threats"), ("B", "Uncovering hidden truths about the mystical world")]
    assert read_choice("As a protector, my primary objective was to safeguard humanity from supernatural threats.", opts) == 0
    for reply in ("My primary objective was not to safeguard humanity from supernatural threats.",
                  "My objective might have been to safeguard humanity from supernatural threats.",
                  "Was my objective to safeguard humanity from supernatural threats?",
                  "My objective was to safeguard humanity from supernatural threats. My goal was to uncover hidden "
                  "truths about the mystical world.",
                  "My objective was both to safeguard humanity from supernatural threats and more."):
        assert read_choice(reply, opts) is None, reply


def test_an_option_stated_beside_most_of_anothers_own_words_is_none():
    # "My first thought would be excitement for new experiences ... Additionally, I would be determined to fulfill a
    # greater purpose ...": all four emotions, read as A (stated_text) at qwen_blind2's first read
    assert _read_row("qwen-bow-cid-54-pre-hero-1-direct-answer").value is None
    # a few shared words in a sentence of reasons do not count ("protecting ... Earth" beside "Desire to protect Earth")
    got = _read_row("qwen-bow-cid-64-hero1-1-direct-answer")
    assert (got.value, got.rule) == (1, "stated_text")


def test_the_role_named_in_if_i_were_is_no_supposition():
    got = _read_row("qwen-bow-cid-47-childhood-1-direct-answer")     # "If I were Clark Kent, I would choose option C: ..."
    assert (got.value, got.rule) == (2, "decision")
    opts = [("A", "Run"), ("B", "Hide"), ("C", "Fight")]
    assert read_choice("If I were braver, I would choose option C.", opts) is None         # a supposition
    assert read_choice("If I were Clark Kent, I would choose option C.", opts) == 2


def test_an_option_in_the_second_person_restated_with_me_as_object():
    # "Witnessing Kara's emergence ... reminded me of my own daughters" for "... reminded you of your own daughters"
    got = _read_row("qwen-bow-cid-71-pre-hero-2-direct-answer")
    assert (got.value, got.rule) == (1, "stated_text")


def test_answer_n_names_option_n_when_the_label_follows_at_once():
    # Qwen on the CHARM release (charm-official, BC Temporal): "<role>, <who>, would most likely choose
    # answer 4: <option 4's text>" then a paragraph agreeing with it; read as none before this rule
    reply = ("Gutenberg, a printer from Mainz, would most likely choose answer 2: The @ sign.\n"
             "He would not think of the # sign or the $ sign at all.")
    got = choice_reading(reply, CHARM)
    assert (got.value, got.rule) == (1, "decision")
    assert read_choice("I would choose answer 4.", CHARM) == 3
    assert read_choice("Answer: 4", CHARM) == 3                       # the answer line, as before
    assert read_choice("The answer 2 is wrong, so I choose option 4.", CHARM) == 3
    assert read_choice("I would choose an answer a child could give.", CHARM) is None
    assert read_choice("Should I choose answer 2?", CHARM) is None     # asks, does not decide


def test_numbered_reasoning_steps_do_not_make_the_answer_line_ambiguous():
    # Qwen on the CHARM release (charm-official, BC Cross): "Let's approach this step-by-step: 1. ...
    # 2. ..." then "Answer: N". Steps that only share words with another option renumber nothing.
    city = [("1", "She was born in Paris, France."), ("2", "She was born in Oxford, England."),
            ("3", "I can not answer that question."), ("4", "She was born in London, England."),
            ("5", "She was born in Leeds, England.")]
    steps = ("Let's approach this step-by-step:\n1. The question asks where she was born in England.\n"
             "2. The choices give cities in France and England.\n3. Her profile says nothing of her birth.\n"
             "4. So the question cannot be answered from what is given.\nTherefore, the correct answer is:\nAnswer: 3")
    assert choice_reading(steps, city).value == 2
    # ... but the reply's own item numbered as the answer, leaning to another option, still makes it none
    review = ("The other options are wrong:\n1. Paris is in France.\n2. London, England is not where she "
              "was born either.\nShe was born in Oxford.\nAnswer: 2")
    assert choice_reading(review, city).rule == "none:numbering_contradicts_options"
    # a list that restates the options in the prompt's order, with a tie between two near-identical
    # options on one line, is the prompt's own numbering
    dates = [("1", "He was born on May 7, 1997."), ("2", "He was born on May 7, 1996."),
             ("3", "He was born on May 17, 1996."), ("4", "I can not answer that question.")]
    listed = ("1. Kim was born on May 7, 1997.\n2. Kim was born on May 7, 1996.\n3. Kim was born on May 17, 1996.\n"
              "4. I can not answer that question.\nThe question says May 17, 1996.\nAnswer: 3")
    assert choice_reading(listed, dates).value == 2


# -- issue 51 item 7: option-by-option reviews that never commit, and the last unread families ----------------
# The CHARM cases have the forms of Qwen2.5-Coder-1.5B's replies in the charm-official run that its 256-token cap
# cut and that the rules read as an answer before these rules (call ids in the comments); the questions and
# options here are ours (the release's text is never committed).
STUDIO = [("1", "She wanted him to paint cities where he had previously lived."),
          ("2", "She wanted him to hide his name during the exhibition."),
          ("3", "I can not answer that question."),
          ("4", "The idea was to choose city names that matched the colors of his favorite paintings."),
          ("5", "She wanted him to use names of cities that were significant to his childhood.")]


def test_a_cut_review_that_never_commits_is_none():
    # as bc/cross/captain-alatriste/tokyo-09/no-role/nr: each option's heading, then "- This option ...", cut
    # inside the review of option 5 (read as 5 by closing_line before)
    reply = ("To determine the correct answer, let's analyze each option:\n\n"
             "1. **She wanted him to paint cities where he had previously lived.**\n"
             "   - This option suggests that she wanted him to remember the cities he had lived in.\n\n"
             "2. **She wanted him to hide his name during the exhibition.**\n"
             "   - This option is not supported by the information given.\n\n"
             "3. **I can not answer that question.**\n   - This option is incorrect because the question has been answered.\n\n"
             "4. **The idea was to choose city names that matched the colors of his favorite paintings.**\n"
             "   - This option is supported by the information given.\n\n"
             "5. **She wanted him to use names of cities that were significant to his childhood.**\n"
             "   - This option is not supported by the information")
    got = choice_reading(reply, STUDIO)
    assert got.value is None and got.rule == "none:review_without_a_decision"
    # the same review with its conclusion is read by the conclusion
    assert read_choice(reply + " given.\n\nTherefore, the correct answer is:\nAnswer: 4", STUDIO) == 3


def test_a_decision_verb_inside_an_option_restated_decides_nothing():
    # as bc/cross/sandokan/saman-04/no-role/nr: option 2's own "he selected the alias" restated in the review
    alias = [("1", "His real name is Arthur. He took the name Kestrel after he left the navy."),
             ("2", 'His birth name is Jonah, and he selected the alias "Kestrel" when he decided to pursue a career in international espionage.'),
             ("3", "I can not answer that question.")]
    reply = ("To determine Kestrel's real name, let's analyze each option:\n\n"
             "1. Arthur: This option suggests that Kestrel took the name after leaving the navy. This aligns with the question.\n\n"
             '2. Jonah: This option suggests that his birth name is Jonah and he selected the alias "Kestrel" when he '
             "decided to pursue a career in international espionage. This contradicts the question.\n\n3. I can not")
    assert read_choice(reply, alias) is None
    # ... and a choice asked of someone else is no one's decision: "... is asking him to choose names ..."
    assert read_choice("The curator is asking him to choose names of cities that were significant to his childhood.",
                       STUDIO) is None
    # but a label after it still answers: "I'd tell Miles to go with Option A"
    assert read_choice("I'd tell Miles to go with Option A - take initiative and present his plans.", ABCD) == 0
    # and the speaker's own decision in the option's words still does
    assert read_choice("I choose to hide his name during the exhibition. Answer: 2", STUDIO) == 1


def test_a_commit_phrase_that_is_the_options_own_words_commits_to_nothing():
    # as bc/cross/lee-gi-yeong/hana-04/no-role/nr: "Dana is the one who steers Boat Z" is option 3's text
    boats = [("1", "Dana steers X, and Rami steers Y."), ("2", "I can not answer that question."),
             ("3", "Dana is the one who steers Boat Z, while Cole is responsible for Boat Y."),
             ("4", "Rami Char steers Boat X, and Kai Char steers Boat Y")]
    reply = ("1. **Option 1: Dana steers X, and Rami steers Y.**\n   - This option suggests that Dana is the pilot of X.\n\n"
             "2. **Option 2: I can not answer that question.**\n   - This option is not correct.\n\n"
             "3. **Option 3: Dana is the one who steers Boat Z, while Cole is responsible for Boat Y.**\n"
             "   - This option suggests that Dana steers Boat Z.\n\n4. **Option 4: Rami Char steers Boat X, and Kai")
    assert read_choice(reply, boats) is None
    assert read_choice("Option 3 is the one.", boats) == 2        # said of the option, it still commits


def test_each_choice_announces_a_review_not_an_answer():
    # as bc/cross/sejong/oh-ae-sun-10/no-role/nr: "Now, let's evaluate each choice:" over the review, cut
    craft = [("1", "She has moved from writing songs to designing furniture."), ("2", "Yes, she's still writing songs."),
             ("3", "I can not answer that question.")]
    reply = ("Now, let's evaluate each choice:\n\n1. She has moved from writing songs to designing furniture.\n"
             "   - This choice is incorrect because the move does not imply it.\n\n2. Yes, she's still writing songs.\n"
             "   - This choice is incorrect because she has stopped.\n\n3. I can not")
    assert read_choice(reply, craft) is None
    assert read_choice("My choice: 2", craft) == 1


def test_an_option_restated_to_be_reviewed_is_not_stated():
    # as bc/cross/senapati-of-mataram/sutan-sjahrir-04/no-role/nr: "3. I can not answer that question: This option
    # is incorrect because the" (read as that option by stated_text before)
    events = [("1", "He was detained in 1931 on suspicion of organising a strike."),
              ("2", "In 1937, he was taken into custody for smuggling old maps."),
              ("3", "I can not answer that question.")]
    for reply in ("Let me weigh what is known of his arrests.\n\nI can not answer that question: This option is incorrect "
                  "because the", "Let me weigh what is known of his arrests, one claim after another, before I say anything."
                  "\n\n3. I can not answer that question: This option is incorrect because the"):
        assert read_choice(reply, events) is None
    assert read_choice("Let me weigh what is known.\n\nThe truth is, I can not answer that question.", events) == 2


def test_a_clause_after_would_be_that_needs_the_options_whole_text():
    # as bc/cross/cheng-dieyi/li-xiao-jun-06: a few shared names are not option 3 ("... still remained with him")
    pair = [("1", "They became famous singers, starring in several musicals."), ("2", "I can not answer that question."),
            ("3", "They went their separate ways, but Mei-Lin Wu's heart still remained with him.")]
    reply = "Given this, the most logical answer would be that Mei-Lin Wu and Tao Wu remained married after their wedding."
    assert read_choice(reply, pair) is None
    whole = "The answer would be that they went their separate ways, but Mei-Lin Wu's heart still remained with him."
    assert read_choice(whole, pair) == 2


def test_choice_and_a_label_open_the_closing_line():
    # "Choice A) Return to Peggy - ..." after a long narrative, with no colon (issue 51's first unread family)
    peggy = [("A", "Return to Peggy - Travel back to the 1940s after the war"), ("B", "Return to Present - Come back to 2023"),
             ("C", "Accept the Future - Retire in the present"), ("D", "Sacrifice the Chance - Use the stones for others")]
    story = "I look at the compass, at Peggy's picture. The stones hum in my hand.\n\n"
    got = choice_reading(story + "Choice A) Return to Peggy - Travel back to the 1940s after the war, finally having that dance.", peggy)
    assert (got.value, got.rule) == (0, "decision")
    assert read_choice(story + "Choice B) Return to Peggy - Travel back to the 1940s after the war.", peggy) is None
    assert read_choice("The choice A) makes is hard.", peggy) is None          # not at the line's start


def test_a_letter_names_a_numbered_option_by_position():
    # issue 51's second unread family: "Verdict: Option A" where the options are "Option 1" and "Option 2"
    omega = [("Option 1", "Expose and Destroy Project Omega Shield"), ("Option 2", "Cooperate and Modify the Project")]
    got = choice_reading("...\n\nVerdict: Option A—the only choice a man of unbreakable principle can make.", NUMBERED)
    assert (got.value, got.rule) == (0, "answer_marker_by_position")
    # the pole's title, then option 1's own text after a dash (r1-6 of the release): the text agrees
    assert read_choice("Choice: A) Hero — Expose and Destroy Project Omega Shield.", omega) == 0
    assert read_choice("Choice: B) Hero — Expose and Destroy Project Omega Shield.", omega) is None
    # a name no option holds may be the prompt's pole for either option: still none
    assert choice_reading("Choice: A) Hero", omega).rule == "none:letter_without_matching_text"
    assert read_choice("I choose option A - I'm going for Mercury Labs first.", NUMBERED) == 0


def test_a_label_right_after_a_modal_decides():
    # after blind8 (issue 51): "I would B) Use strategy to weaken my opponent before engaging" (a modal, then the label
    # and the option's words): a decision, so a later conditional other option makes it none as for any decision
    assert choice_reading("Honestly? I'd B) stay out of it and chill.", ABCD).rule == "decision"
    assert read_choice("Facing my father, I would probably B) keep my distance for now and relax.", ABCD) == 1
    assert read_choice("If he pushes, I would D) stand up to him. Otherwise I would B) keep my distance.", ABCD) is None
    assert read_choice("I would B) Confront him directly.", ABCD) is None          # the label and the text disagree
    assert read_choice("I would A) if I had the courage, but I don't.", ABCD) is None
    assert read_choice("I would not B) keep my distance.", ABCD) is None
