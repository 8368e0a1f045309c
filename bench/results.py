"""The runs behind docs/results.md: every suite end to end on bundled:qwen2.5-coder-1.5b in the
papers' protocol, and the page written from their run folders.

    python bench/results.py run [NAME ...]   # runs them one after another (resumable: a finished
                                             # run makes no calls); needs `make qwen`
    python bench/results.py write            # docs/results.md from the run folders, no model calls
                                             # (each report is rebuilt first: `rolebound report`
                                             # reads the stored replies again with today's rules)
    make results                             # both
    python bench/results.py carry-out|carry-in [NAME ...]   # a long run's replies to and from git
                                             # (bench/carried/), to resume it on another machine

Runs go to runs/results/<name>/ ($ROLEBOUND_RESULTS moves the folder: long runs live best outside
the work tree); the papers' data they import goes to runs/results/data/ from ../shared, first.
The runs on the papers' own data come first on the page; the runs on our starter sets follow, as
what they are: the pipeline on our own data. The figures on the page are copied from each run's report.md
(the report's own tables, with their CIs and invalid counts); nothing is typed in by hand except
the reading under each run and its verdict (GLANCE), written after looking at the run. The page
opens with one table of every run: its headline figures (cells of its own tables, named by GLANCE's
picks) and its verdict; each run's section opens with the same verdict, its detail below.
Readings and verdicts live in this file: `reading=` on each Spec, the verdicts in GLANCE.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path(os.environ.get("ROLEBOUND_RESULTS") or ROOT / "runs" / "results")
SHARED = Path(os.environ.get("ROLEBOUND_SHARED") or ROOT.parent / "shared") / "data" / "external"
PAGE = ROOT / "docs" / "results.md"
sys.path.insert(0, str(ROOT / "src"))
QWEN = "bundled:qwen2.5-coder-1.5b"
SMOL = "bundled"


@dataclass
class Spec:
    name: str
    suite: str
    args: list[str]
    sections: list[str]                   # report.md headings (prefixes) copied onto the page
    reading: str = ""                     # what the run shows about the tool, written after the run
    strategies: list[str] = field(default_factory=list)
    headline: tuple[str, ...] = ("95% CI",)   # summary labels (substrings) whose CIs the bar applies to
    data: tuple[str, str, str] | None = None  # papers' data: (import format, source under ../shared, file name)
    judge_check: list[str] | None = None  # `rolebound judge-check` of this run's judge on hand-labelled replies
    judge_reading: str = ""               # what the judge check shows, written after it ran
    jobs_note: str = ""                   # which item x strategy jobs make calls, where not all do
    not_carried: str = ""                 # why a fresh clone cannot rebuild this run, said under its verdict

    def command(self) -> list[str]:
        """As the page shows it (paths relative to the repository)."""
        data = ["--data", f"runs/results/data/{self.data[2]}"] if self.data else []
        return ["rolebound", "run", self.suite, *self.args, *data, "--out", f"runs/results/{self.name}"]

    def prepare(self) -> list[str] | None:
        """The import that writes this run's data, as the page shows it."""
        if not self.data:
            return None
        fmt, src, out = self.data
        return ["rolebound", "data", "import", fmt, f"../shared/data/external/{src}", "--out",
                f"runs/results/data/{out}"]

    def argv(self, argv: list[str]) -> list[str]:
        """A shown command with its paths where this machine keeps them."""
        return [str(RUNS / a[len("runs/results/"):]) if a.startswith("runs/results/") else
                str(SHARED / a[len("../shared/data/external/"):]) if a.startswith("../shared/data/external/") else a
                for a in argv]



# Issue 21 section 4: each headline figure's 95% CI within +-6 points (+-0.06 for capability's
# 0-1 scores), on the llamacpp engine (bench/engines.py measured it faster for Qwen). Only Qwen
# writes the judges' formats (SmolLM2 as a judge says "no" to everything), so judged suites are
# self-judged, and flagged so in their reports.
ENGINE = ["--engine", "llamacpp"]
# Issue 39: the papers' own benchmarks at size. One thread: these runs share the 2 cores with
# everything else for many hours (torch and llama.cpp at 2 threads collapse under other load).
LONG = [*ENGINE, "--threads", "1"]
PAPERS = [
    # charm-official ran from its start on 5 Dec on another machine, alone on it, at 2 threads; its
    # replies are carried (bench/carried/), and this folder is the run rebuilt from them on 6 Dec with
    # the BA Yes control's 60 calls (issue 51), the only calls made then
    Spec("charm-official", "charm",
         ["--model", QWEN, *ENGINE, "--threads", "2", "--strategy", "independent,no-role"],
         ["Headline figures", "Data", "BA Yes control", "BA-BC matrix (Table 1)", "Table 6", "Tables 3 and 10",
          "Table 16", "Verified override", "Accuracy by question type", "Answer extraction", "Position bias"],
         headline=("BA acc", "BC acc", "Compliance Gap", "no-role acc"),
         data=("charm-official", "charm-official", "charm-official.jsonl"),
         jobs_note="no-role asks only the 732 BC Cross questions, so 3,480 of the 5,496 item x strategy "
         "jobs make calls (2,748 independent + 732 no-role); the others end at once with no record",
         reading=(
         "All of Table 7 from the authors' release (commit f8129c9, imported by `data import charm-official`): 2,748 "
         "questions under independent (680 BA, 1,332 BC, 736 KV) and the 732 BC Cross questions again with no role, "
         "3,480 answers in the paper's protocol (Appendix H: greedy, 256 tokens; the Table 20 prompts), and ours "
         "beside them: the 143 override candidates' KV questions again in a control order and the BA Yes control's "
         "60 questions. **How these records were made.** The replies were made on 5 Dec on another machine "
         "(11:43-17:19 UTC, two invocations, 3,621 calls timed at 319 min; 17 min stopped between two sessions and "
         "about 15 min paused while the test suite ran are in the 335.9 min counted for it), and carried in "
         "bench/carried/; that machine's folder is gone. This folder is the run rebuilt from them on 6 Dec: 3,623 "
         "cache hits and 60 model calls, the BA Yes control alone, 0 failed, 85 s in all, of which the control took "
         "79 s: the model's load (0.9 s, at the first call the cache could not answer) and its 60 calls (llamacpp at "
         "2 threads on 2 cores shared with other sessions). bench/carried/ now holds all 3,132 distinct replies: "
         "a fresh clone rebuilt this run with no model installed and no llama-cpp-python, 3,683 cache hits and 0 "
         "calls, the same records. **Why some figures differ from the earlier page.** KV accuracy was 28.3 [25.3, "
         "31.5] (182 invalid) in the first records and is 29.9 here, because the response cache keeps one reply per "
         "identical prompt. KV's 736 questions are 184 distinct prompts, each asked for the 4 historical characters "
         "of its region; in the first records the four copies, decoded at the same time in llama.cpp's batches, "
         "differed in text in 79 of the 184 groups and read as different answers in 37 (the batch dependence of "
         'greedy text that docs/engines.md, "Continuous batching", measured); the cache holds one reply for the four, '
         "so here each group's four copies read alike. And today's answer reader (issue 51 item 7: an "
         "option-by-option review that never commits is no answer, cut or not) reads 46 of the stored replies, all "
         "cut by the cap, otherwise than the page's: 45 it read as an option now read as none (18 no-role, 16 BC, "
         "8 KV, 3 KV control), and one no-role reply is read as 1, not 4. Only one of the 46 was right before (a BC "
         "reply, now none), so BC is 4.7 (348 invalid) against 4.8 (332), and 2 of the 145 override candidates "
         "are gone (their BC replies now read as none): 143. **How the intervals moved** (issue 51: each interval "
         "now resamples the unit the benchmark's design repeats; the page's were item-level, the 736 KV questions "
         "taken as independent). The headline table above gives, for each figure, the cluster, their number, the "
         "design effect and the standard error both ways. BA 20.4: [17.5, 23.5] (+-3.0) item-level, [16.0, 25.4] "
         "(+-4.7) clustered by target within boundary, 50 clusters, design effect 2.62 (SE 2.50 against 1.55). BC "
         "4.7: was 4.8 [3.8, 6.1] (+-1.15), now [3.1, 6.8] (+-1.85), by fact, else target, 213 clusters, design "
         "effect 2.66. KV 29.9: [26.8, 33.3] (+-3.25) item-level (the report of these replies rebuilt before the "
         "clustering), [23.9, 36.4] (+-6.25) by fact "
         "(the 184 prompts), design effect 4.02 (SE 3.38 against 1.69): twice as wide, because each prompt is asked "
         "4 times. Compliance Gap 52.6: [49.8, 55.3] (+-2.75) to [48.9, 56.3] (+-3.7), 50 targets, design effect "
         "2.02. Recognition Failure 42.6: [40.1, 45.3] (+-2.6) to [38.7, 46.7] (+-4.0), design effect 2.44. "
         "Verified override 48.3: [40.0, 56.6] (+-8.3, 145 candidates) to [33.9, 62.6] (+-14.35, 143 candidates "
         "in 20 targets), design effect 3.41. No-role 14.8: [12.3, 17.6] (+-2.65) to [10.8, 18.9] (+-4.05), 20 "
         "role characters, design effect 2.66. Another run of this size would have to differ by 13.4 points in KV, "
         "9.9 in BA, 3.8 in BC, 7.7 in C-Gap or 30.7 in verified override to be found 80% of the time (paired, "
         "two-sided 0.05). **The BA Yes control** (ours, unvalidated: data/ba_control.yaml, three questions for "
         "each of the 20 historical roles about people and things of their own era and story, asked in the BA forms "
         "and the Table 19 prompt). Every BA question's answer is No, so a model that always says No would score "
         "100% BA. Qwen says No to 45.0% [31.7, 58.3] of the 60 in-boundary questions, 0 invalid; whether that is "
         "most of them the report cannot tell at this size (n = 60). Beside it, it says No to 20.4% of the BA "
         "questions, and to 10.8% [5.7, 16.5] of the 600 temporal ones, which ask the same 20 roles about things "
         "after their time. So this BA is no No-bias, the risk the control is for: the model says Yes to most of "
         'these questions, and its No does not follow the boundary; if anything it runs the other way (No to 45.0% '
         "of what the character knows against 10.8% of what it cannot know; the two intervals do not overlap). The "
         "wording differs between the two sets (the control asks \"Have you ever met Sancho Panza?\", which a "
         "character may answer No in character), so this says BA here does not measure awareness, not by how much. "
         "**What the numbers show.** Invalid answers: 916 of the 3,480 (26.3%): BA 0 of 680, BC 348 of 1,332, KV "
         "188 of 736, no-role 380 of 732. Most are the 256-token cap: the model reviews the options one by one and "
         "the cap cuts it before any answer line; of the 806 BC, KV and no-role replies the cap cut, 785 read as "
         "none, against 131 of the 1,994 that ended on their own. The paper counts an invalid answer as wrong, and so "
         "does this page: the BC, KV and no-role accuracies are what this model answers within the paper's budget, "
         "not what it knows. BA 20.4 is two different figures: 92.5 on the 80 cross-universe Yes/No items and 10.8 "
         "on the 600 temporal ones, where the model answers as itself (as Qin Shi Huang, \"Do you know what a "
         "computer keyboard is?\" gets \"Yes\"). So the temporal instances are mostly Recognition Failure (85.7%) "
         "and the cross-universe ones mostly Compliance Gap (87.7%: the boundary recognised, the question answered "
         "anyway); over all 1,332 instances C-Gap is 52.6 and R-Fail 42.6, above every R-Fail in the paper's Table "
         "2 (2.0-21.5), and BC 4.7 is below all six of its models (18.9-64.4). The temporal BA questions are ours "
         "(the release has none; release_concepts.yaml, unvalidated), so that 10.8 rests on our wording of each "
         "concept, after the paper's Table 8; everything cross-universe is the release's text as written. Verified "
         "override is 48.3 [33.9, 62.6] on 143 candidates, close to Qwen3-8B's 50.5 in Table 3, while KV accuracy "
         "is 29.9: the model often lacks the fact the override figure presumes. With no role, the 732 BC Cross "
         "questions are answered right 14.8% [10.8, 18.9] of the time (380 invalid, the longest replies), so on "
         "the 143 override candidates NR% is 33.6 and Both% 17.5, against Qwen3-8B's 64.4 and 29.7 in Table 16; "
         "NR% - KVQ% is -14.7 [-32.2, +3.8] clustered by target, though McNemar's exact p, which takes the 143 "
         "pairs as independent, is 0.014. Position: BC answers lean to option 5 (27% of answers, 21% of gold; "
         "chi-square p 0.00012) and KV answers to options 1 and 2 (p 4e-09), short of the warning rule. Against our "
         "starter set (Part 2, 1,100 questions): BA Temporal was 72.7 there and is 10.8 here. The two ask it "
         "differently (here one \"Do you know what X is?\" per concept, as in Table 8; there three templates per "
         "concept, \"Have you ever used ...\", \"Have you heard of ...\" among them) and of different characters; "
         "this run cannot say which moves the model, only that this model's temporal awareness is not a stable "
         "figure under rewording. BC is low on both (7.3 there, 4.7 here). One seed, a 1.5B coder model: this says "
         "the pipeline runs the authors' own benchmark at full size in their protocol, not how well any role-play "
         "model keeps its boundaries. The hand checks of the reader are the lead engineer's, an AI agent session, "
         "not a human annotator."),),
    Spec("multiverse-bow", "multiverse",
         ["--model", QWEN, *LONG, "--strategy", "direct", "--set", "tasks=canon", "--set", "analysis=false",
          "--limit", "600"],
         ["Headline figures", "The paper's figures", "Position bias", "Canon events", "F1 CIs", "Answer extraction"],
         headline=("accuracy",),
         data=("beyond-one-world", "Beyond_One_World", "beyond-one-world.json"),
         reading="600 Beyond One World canon questions (the balanced --limit over its heroes' versions and life "
         "phases), direct, at the paper's Appendix B decoding (temperature 0.6, 1,024 tokens), canon only: the "
         "dilemmas and the thinking/acting analysis need a judge and a segmenter, and the only other model here "
         "is the model itself. This is a rerun: the first run's folder and replies were lost with an earlier "
         "machine. It began at 03:49 UTC on 6 Dec, was stopped at the end of that session with 192 records, "
         "carried in git (fb92d85), resumed at 05:35 on the same kind of machine and finished at 07:56: 600 calls "
         "for 600 records (192 resumed from the carried replies), 223.5 min of wall time over the two invocations "
         "at 1 thread, beside a second rerun and test runs and with pauses while the tests were timed (an upper "
         "bound). bench/carried/ holds its 598 distinct replies, and this page's figures are the run rebuilt from "
         "them in a fresh clone (600 cache hits, 0 calls, no llama-cpp-python). Two pairs of records share a "
         "prompt, and the cache keeps one reply per prompt, so the rebuild gives each pair one reply: one answer "
         "the run read (265 invalid there) is none here (266). At temperature 0.6 the replies are new ones: of "
         "the lost run's 160 replies kept in tests/data/replies/qwen_bow.jsonl, 4 have the same text here. Canon "
         "accuracy is 22.7% [19.0, 26.2] (F1 29.4 [24.9, 33.5]), with 266 of 600 answers invalid (44.3%) and "
         "counted wrong, as the paper counts them: of the 334 it read, 41% are right. The lost run gave 25.8 "
         "[22.3, 29.5] with 234 invalid (39.0%); with other samples of the same model the two intervals overlap. "
         "The interval now resamples the benchmark's units (a version's conflict, else its hero: 30 clusters), "
         "design effect 1.20 (SE 1.87 against 1.71 with questions independent), and its half-width stays +-3.6 "
         "as before, the clustering's widening offset by the lower figure. The paper's models score 61.5-70.4 "
         "(Table 3); a 1.5B coder model is far below them, and this run cannot say more than that (one sample "
         "at temperature 0.6, a subset, no dilemmas). What the 44% holds: 237 of the 266 invalid replies name "
         "no decision, and 2 were cut by the token cap. The reader's hand checks on this model's BoW replies "
         "(qwen_blind3 and the earlier splits, docs/extraction.md) were drawn from the lost run's replies: 40 "
         "labelled before the rules read them, 16 committing to no option (2 of those read as the option they "
         "first named before undoing it), 23 of the other 24 read and none wrongly. They speak for replies of this kind, not these ones; the reader's newest blind split "
         "(blind9, 60 Beyond One World replies of other models) reads at recall 0.98 with 0 wrong. Answers lean "
         "to position D (16% of answers, 9% of gold) and away from B (29% against 36%): chi-square p 0.0052, "
         "which takes the answers as independent, short of the report's warning rule (over half the answers at "
         "one position). The labeller of the reader checks is the lead engineer, an AI agent session, not a "
         "human annotator."),
    Spec("knowledge-errors-roleke", "knowledge-errors",
         ["--model", QWEN, *LONG, "--judge", "self", "--strategy", "vanilla", "--limit", "270"],
         ["Headline figures", "Table 3 layout", "Judge outputs"],
         data=("roleke-bench", "rp_kw_errors/RoleKE-Bench.json", "roleke-bench.jsonl"),
         # 60 of the run's own replies (5 characters x 6 KKE + 6 UKE, drawn before any verdict),
         # labelled by hand blind to the judge: how far this self-judge can be trusted
         reading="270 RoleKE-Bench queries (30 per character, 9 characters, balanced over KKE/UKE and the four "
         "memory types), 540 records: 270 answers and 270 self-judge verdicts, 0 failed calls. This is a rerun: "
         "the first run's folder and replies were lost with an earlier machine. It began at 04:28 UTC on 6 Dec, "
         "was stopped at the end of that session with 256 answers and 17 verdicts made, carried in git (fb92d85), "
         "resumed at 05:35 on the same kind of machine and finished at 07:07; 540 calls for 540 records (273 "
         "resumed from the carried replies), 135.9 min of wall time over the two invocations at 1 thread, beside "
         "a second rerun and test runs and with pauses while the tests were timed (an upper bound). bench/carried/ "
         "holds all 540 replies: a fresh clone here rebuilt every figure below from them, the judge check's "
         "included, with 0 model calls and no llama-cpp-python installed. The answers are greedy and the same as the lost run's where that "
         "can be checked: the 60 hand-labelled replies below, drawn from the lost run, are byte for byte the "
         "rerun's answers. The self-judge's verdicts are not the lost run's: it read 257 of 270 (13 without a "
         "single judgment line, against 11) and said yes to 191 (against 199): KKE 83.0 [76.3, 89.6], UKE 58.5 "
         "[49.6, 66.7], average 70.7 [64.8, 76.3], against 85.9, 61.5 and 73.7 before. Most likely the "
         "llama.cpp engine's greedy text, which depends on the batch a request runs in (docs/engines.md), gave "
         "the judge's long replies other words in other batches; its answers, shorter, held. The intervals now "
         "resample the 135 memories (a KKE and a UKE query share each): the average's design effect is 1.13 "
         "(SE 2.95 against 2.77 with answers independent), KKE's and UKE's 1.00, as each memory holds one query "
         "of each. Half-widths against the lost run's item-level ones: KKE +-5.55 to +-6.65, UKE +-8.15 to "
         "+-8.55, average +-5.2 to +-5.75: KKE's and UKE's from the figures moving towards 50%, the average's "
         "about half from that and half from the clustering. These are not the model's accuracies: on the 60 labelled replies every one is a no, "
         "and this judge said yes to 38 of the 55 it read. What the run shows is that the paper's pipeline runs "
         "on the paper's own queries end to end; its figures need a judge other than the model itself.",
         # the run's own engine, so that the run's cache answers the check (the default engine is
         # whichever is installed, and a fresh clone may not have llama-cpp-python)
         judge_check=["rolebound", "judge-check", "knowledge-errors", "--judge", QWEN, "--judge-opt", "engine=llamacpp",
                      "--judge-opt", "threads=1", "--data",
                      "tests/data/judge_labels/knowledge_errors_roleke_qwen.jsonl", "--out",
                      "runs/results/judge-check-ke-roleke"],
         judge_reading="All 60 replies were labelled no: in these 60, Qwen never corrected a false premise in "
         "the paper's sense (KKE: name the error and give the true memory; UKE: confusion or curiosity, in "
         "character); it mostly accepted the premise or answered as an AI model. The self-judge read 55 of the "
         "60 (5 UKE verdicts without a judgment line) and said yes to 38 (25 of 30 KKE, 13 of 25 UKE), often "
         "right after an explanation saying the reply \"does not identify any errors\". Its accuracy against the "
         "labels is therefore its share of no verdicts, 0.31 [0.19, 0.43] over 48 memory clusters, and Cohen's "
         "kappa is 0 by construction (one label class). The lost run's judge, on the same 60 replies, read all "
         "60 and said yes to 40: 0.33 [0.20, 0.45] with replies independent. This judge's yes cannot be "
         "trusted: the run's KKE/UKE accuracies, judged by it, are upper bounds far above what these labels "
         "show. The labeller is the lead engineer, an AI agent session, not a human annotator; the replies "
         "were drawn (5 characters x 6 KKE + 6 UKE, seed 41) before any verdict existed. The check's 60 "
         "verdicts are the run's own self-judge calls, answered from the run's response cache."),
]
STARTER = [
    Spec("charm-1100", "charm",
         ["--model", QWEN, *ENGINE, "--strategy", "independent,no-role", "--limit", "1100"],
         ["BA-BC matrix (Table 1)", "Table 6", "Tables 3 and 10", "Table 16", "Verified override",
          "Accuracy by question type", "Answer extraction", "Position bias"],
         headline=("BA acc", "BC acc", "Compliance Gap", "no-role acc"),
         reading="1,100 questions (535 BA/BC instances, 268 cross-universe BC questions asked again with no role), "
         "every headline CI within the +-6 bar: BA 73.7 (+-4.8), BC 7.3 (+-2.2), Compliance Gap 72.7 (+-3.8), "
         "no-role accuracy over all cross BC 19.0 (+-4.9). 782 calls and 662 cache hits (the 620 questions of an "
         "earlier independent run on the same engine and protocol). The 123.7 min wall time includes about 25 min "
         "with the process paused (SIGSTOP) while the test suite and a bench ran idle, and the rest shared the "
         "2 cores with other work: about 100 min of calls, some 8 s a call, prefill- and CoT-bound (227k prompt "
         "tokens, 84k generated; the paper's prompt asks for a brief explanation before the answer). 115 of "
         "1,444 gold-labelled answers are invalid (8%), 60 of them no-role replies that explain without "
         "naming an option. What the numbers show: Qwen recognises most boundaries when asked (BA 73.7) yet "
         "answers the out-of-scope question anyway (BC 7.3), so almost three in four instances fall in the "
         "Compliance Gap, the failure CHARM's matrix separates from Recognition Failure (20.0). No position "
         "bias reaches the warning (chi-square p 0.22, 0.3 and 0.078 for BC, KV and no-role). What they "
         "cannot show: anything about role-play ability (a 1.5B coder model, one seed, greedy), or a "
         "comparison with the paper's models beyond order of magnitude: this is a balanced subset of 1,100 "
         "of the 2,816 starter questions, and the no-role accuracy (30.3% on Table 16's override "
         "candidates, 19.0% on all 268 cross BC questions, 60 of them invalid) is far below every model in the paper's Table 16, which says "
         "the model lacks much of the cross-universe knowledge the override figures assume."),
    Spec("capability", "capability",
         ["--model", QWEN, *ENGINE, "--strategy", "identity,injection,no-role", "--set", "per_level=20",
          "--max-tokens", "384"],
         ["Table 3", "Per role", "Answer extraction", "No-role baseline", "Figure 5 data", "Position bias"],
         reading="80 questions (20 per level, the bank's own order) for each of the six roles under identity and "
         "injection, and with no role: 1,040 calls, 965 made and 75 from the response cache of a whole-bank run "
         "stopped early, none failed. Wall 97.3 min, of which about 11 min paused (SIGSTOP) while the test suite "
         "and a bench ran idle, the rest beside other work; at about 14 calls a minute idle. Prefix reuse saved "
         "112,032 of 204,007 prompt tokens (each role's prompt is shared by its questions); 22,878 tokens "
         "generated at the paper's temperature 1.0 (max_tokens capped at 384, the one departure). CI half-widths: "
         "injection TA +-0.027, IA +-0.042, A +-0.051 (within the +-0.06 bar); identity TA +-0.063, IA +-0.073, "
         "A +-0.11 and no-role TA +-0.10 (80 answers) miss it. The whole 186-question bank (2,418 calls, about "
         "3 h idle) would bring identity TA to about +-0.04, but no-role to only +-0.07 at this accuracy: that "
         "figure needs some 260 questions, more than the bank has. What the numbers show: under a role the model "
         "boxes fewer answers (162 of 480 identity answers have no \\boxed{}, which Appendix D counts as wrong) and "
         "scores TA 0.460 against 0.575 with no role; above its role's ceiling it answers almost as well as within "
         "it (A 0.417 against IA 0.470), the capability leakage the paper measures. The prefilled Injection turn "
         "suppresses answering everywhere rather than above the ceiling: 139 of 480 answers box an abstention and "
         "275 box nothing, so IA falls as much as A (-0.387 and -0.346; the paper's Gemma and Qwen3.5 lose "
         "0.04-0.06 IA, OLMo-3 0.37). Answers lean to A (31% against 28% of gold, chi-square p 0.0085 over four "
         "positions), short of the report's warning rule. What they cannot show: role-play ability (a 1.5B coder "
         "model, one seed at temperature 1.0), the paper's leakage for reasoning models (replies cut at 384 "
         "tokens), or the RV/C/RC judge scores (not judged)."),
    Spec("knowledge-errors", "knowledge-errors",
         ["--model", QWEN, *ENGINE, "--judge", "self", "--strategy", "vanilla,cot,s2rd", "--limit", "16"],
         ["Table 3 layout", "Judge outputs", "S2RD self-recollection"],
         reading="16 items (8 KKE, 8 UKE; the balanced --limit drew no attitude item), vanilla, cot and s2rd, "
         "self-judged. 61.4 min over two invocations: I stopped the first after 58.6 min with s2rd half judged "
         "(its narrative step still running) and the same command resumed it in 2.9 min. 136 calls, 0 failed; "
         "in the first invocation prefix reuse saved 23,170 of 56,066 prompt tokens (41%). Time goes to s2rd: "
         "three model calls per item (recollection, doubt, narrative) plus the judge, each reading the profile; "
         "vanilla and cot with their judges were done in roughly the first 25 minutes. Every judge reply but "
         "one is read (`judgment:` lines; vanilla 1 invalid). The figures are not a finding: Qwen judging its "
         "own answers says \"yes\" (the error was caught) to 14 of 16 vanilla answers, far above the 24-44% "
         "the paper's DeepSeek-v2 judge gave frontier models for vanilla KKE, so this self-judge is lenient, as "
         "in the earlier rounds; with 8 answers per error type and method the CIs reach +-31 to +-37.5 points "
         "(+-0 where all 8 agree, which says nothing about the figure), and s2rd (68.75) is no better than cot "
         "(68.75) or vanilla (87.5) at this size. The +-6 bar needs about 270 judged answers per figure, more "
         "than the whole 120-item starter set gives (60 per error type and method, +-11 at best); at this "
         "run's rate the whole set with all three methods would take about 7.7 h on 2 cores. What it cannot "
         "show: any error-detection ability (self-judged, tiny), the Att. memory type, or s2rd's effect."),
    Spec("multiverse", "multiverse",
         ["--model", QWEN, *ENGINE, "--strategy", "direct,cot,cross-direct", "--set", "tasks=canon",
          "--set", "analysis=false", "--limit", "120"],
         ["The paper's figures", "Position bias", "Canon events", "CoT minus direct", "Cross-version (Tables",
          "Answer extraction"],
         headline=("accuracy",),
         reading="120 of the starter set's 180 canon items (balanced over the 12 versions and their phases), "
         "direct, cot and cross-direct (each item asked while playing the two other versions of its hero: 240 "
         "answers), in the paper's decoding (temperature 0.6, 1,024 tokens). Dilemmas and the thinking/acting "
         "analysis (segmenter, 0-5 judge, TAM) were left out to fit the time, so nothing here is self-judged and "
         "the report lists both as departures. 480 calls, 0 failed. The work ran in three invocations: this "
         "folder's 43.6 min took 221 replies from the response cache of two runs I stopped (34.0 min over 120 "
         "items, then 9.9 min over all 180 canon items, which I cut back to 120 when CoT's rate showed the whole "
         "canon would not fit); about 87 min in all, some of it beside a niced test run, so an upper bound. "
         "Generated text is the cost: 46,747 tokens, CoT 178 a reply against 69 for cross-direct and 74 for direct. **CI bar**: direct (+-5.4) and "
         "cross-direct (+-5.0, 240 answers) meet +-6; CoT (+-7.9) misses it, and at 27.5% accuracy +-6 needs "
         "about 210 items, more than the 180 canon items hold (the whole canon would give about +-6.5). What the "
         "numbers show is mostly answer format: 67 of 120 direct answers are invalid (56%), in-character prose "
         "that paraphrases an option without its letter (\"As Clark Kent, I was born on Krypton...\"), refusals "
         "(37 refusal-like replies over the three strategies) and replies about the films rather than in role; "
         "of the 53 direct answers read, 13 are right (24.5%, chance is 25%). CoT ends in an answer line more "
         "often (29 invalid), which is most of its +16.7 [+9.1, +25.0] paired gain over direct; of its 91 read "
         "answers 36% are right. Cross-direct reads 108 of 240 and 42% of those are right, so its negative drop "
         "(-7.9 [-15.0, -0.8]: cross-version above in-version) says that playing another version changes how "
         "the model words its answer, not that it knows the asked version better. Answers follow the gold "
         "positions (chi-square p 0.74). One answer was read wrongly for the tool's reason: a refusal that "
         "quotes option D's text (\"a spider in a jar\") was read as D; the rule is fixed (docs/extraction.md) "
         "and the figures here are re-read with it (cross-direct invalid 131 -> 132, accuracy unchanged). Frontier models in the paper score 62-70% "
         "direct; a 1.5B coder model says nothing about that comparison. What this run cannot show: dilemmas, "
         "the Judge think/act scores and TAM, and role-play ability."),
]
SPECS = PAPERS + STARTER
BY_NAME = {s.name: s for s in SPECS}


# -- the page at a glance: each run's headline figures (copied from its own tables) and verdict ------
@dataclass
class Pick:
    """One headline figure: the cell of `column` in the row whose first cells are `row`, in the
    table under the heading that starts with `table` in the run's section (verbatim, CI and all)."""
    label: str
    table: str
    row: tuple[str, ...]
    column: str


def _charm_picks() -> list[Pick]:
    return [Pick("BA", "Accuracy by question type", ("BA", "all"), "acc"),
            Pick("BC", "Accuracy by question type", ("BC", "all"), "acc"),
            Pick("C-Gap", "BA-BC matrix", ("all",), "Compliance Gap"),
            Pick("R-Fail", "BA-BC matrix", ("all",), "Recognition Failure"),
            Pick("verified override", "Tables 3 and 10", (), "Verified Override")]


@dataclass
class Glance:
    verdict: str                          # two or three lines, written after the run (figures as its tables give them)
    picks: list[Pick]
    read: str = "answers with a gold label"   # the facts row whose read/invalid count the table shows


GLANCE = {
    "charm-official": Glance(
        "The authors' whole CHARM release in the paper's protocol, rebuilt from carried replies (only the 60 "
        "BA Yes control calls are new). Qwen seldom abstains in character (BC 4.7; the paper's models: 18.9-64.4). "
        "Its No does not follow the boundary: No to 45.0% of what a character knows, to 10.8% of what it cannot "
        "(temporal BA). A quarter of the answers are invalid, mostly replies the 256-token cap cut.",
        _charm_picks() + [Pick("Yes control said No", "BA Yes control", (), "said No")]),
    "multiverse-bow": Glance(
        "600 Beyond One World canon questions run end to end (direct, canon only), every reply carried in git. "
        "Canon accuracy 22.7 against the paper's 61.5-70.4; 44.3% of the answers are invalid, mostly replies "
        "that name no decision (237 of the 266).",
        [Pick("canon accuracy (direct)", "Canon events", ("direct",), "Acc"),
         Pick("F1", "Canon events", ("direct",), "F1")]),
    "knowledge-errors-roleke": Glance(
        "270 RoleKE-Bench queries run end to end, self-judged, every reply carried in git. The figures are the "
        "self-judge's, not the model's: on 60 of these replies labelled by hand every one is a no, and this judge "
        "said yes to 38 of the 55 it read (accuracy 0.31, kappa 0.00). They need a judge other than the model itself.",
        [Pick("KKE", "Table 3 layout", ("vanilla",), "KKE Avg."),
         Pick("UKE", "Table 3 layout", ("vanilla",), "UKE Avg."),
         Pick("judge agreeing with hand labels", "verdict (nominal", ("all", "judge vs lead"), "accuracy")],
        read="judge verdicts (generated)"),
    "charm-1100": Glance(
        "Our 1,100-question starter subset, every headline CI within +-6. Qwen recognises most boundaries "
        "(BA 73.7) yet answers anyway (BC 7.3): almost three in four instances fall in the Compliance Gap, "
        "against 20.0 Recognition Failure.",
        _charm_picks()),
    "capability": Glance(
        "Under a role the model boxes fewer answers (TA 0.460 against 0.575 with no role) and answers above "
        "its role's ceiling almost as well as within it (A 0.417, IA 0.470): the leakage the paper measures. "
        "Injection suppresses answering everywhere, not only above the ceiling.",
        [Pick("identity TA", "Table 3", ("identity",), "TA"), Pick("IA", "Table 3", ("identity",), "IA"),
         Pick("A", "Table 3", ("identity",), "A"), Pick("injection TA", "Table 3", ("injection",), "TA"),
         Pick("no-role TA", "Table 3", ("no-role",), "TA")]),
    "knowledge-errors": Glance(
        "Not a finding: 16 items, self-judged. The self-judge says yes to 14 of 16 vanilla answers, the CIs "
        "reach +-31 to +-37.5 points, and s2rd is no better than cot or vanilla at this size.",
        [Pick("vanilla", "Table 3 layout", ("vanilla",), "Avg."), Pick("cot", "Table 3 layout", ("cot",), "Avg."),
         Pick("s2rd", "Table 3 layout", ("s2rd",), "Avg.")],
        read="judge verdicts (generated)"),
    "multiverse": Glance(
        "Mostly answer format: 67 of 120 direct answers are invalid (56%), in-character prose without an "
        "option's letter. CoT ends in an answer line more often, which is most of its gain over direct. The "
        "paper's frontier models score 62-70% direct.",
        [Pick("direct", "Canon events", ("direct",), "Acc"), Pick("cot", "Canon events", ("cot",), "Acc"),
         Pick("cross-direct", "Canon events", ("cross-direct",), "Acc")]),
}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def picked(section: str, pick: Pick) -> str:
    """The cell a Pick names in a run's section of the page ('-' where the run has no such cell)."""
    parts = re.split(r"(?m)^(?=#{3,4} )", section)
    for part in parts:
        if not re.match(r"#{3,4} " + re.escape(pick.table), part):
            continue
        rows = [_cells(x) for x in part.splitlines() if x.startswith("|")]
        if len(rows) < 3 or pick.column not in rows[0]:
            continue
        col = rows[0].index(pick.column)
        for r in rows[2:]:
            if tuple(r[:len(pick.row)]) == pick.row and col < len(r):
                return r[col]
    return "-"


def fact(section: str, key: str) -> str:
    """A row of a run's facts table (its first table), or '-'."""
    m = re.search(r"(?m)^\| " + re.escape(key) + r" \| (.*) \|$", section)
    return m.group(1) if m else "-"


def glance(sections_by_name: dict[str, str]) -> list[str]:
    """The table the page opens with: every run, its headline figures and its verdict."""
    rows = ["| run | headline figures (95% CI where the run gives one) | answers (judged: verdicts) read | verdict |",
            "|---|---|---|---|"]
    for spec in SPECS:
        g, sec = GLANCE.get(spec.name), sections_by_name.get(spec.name, "")
        if g is None or not sec:
            continue
        figs = "; ".join(f"{p.label} {picked(sec, p)}" for p in g.picks)
        read = fact(sec, g.read).split(":")[0]
        rows.append(f"| [**{spec.name}**](#{spec.name}) | {figs} | {read} | {g.verdict} |")
    return rows + [""]


VERDICT = "**Verdict.** "
NOT_CARRIED = "**Not rebuildable from a fresh clone yet:** "


FOLDED = ("Answer extraction: readings per rule",)   # long tables: behind a click, every row kept


def folded(section: str) -> str:
    """The FOLDED tables of a section inside <details> (GitHub renders the table within)."""
    out, lines, i = [], section.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].startswith("### ") and lines[i][4:].startswith(FOLDED) \
                and not "\n".join(lines[i + 1:i + 3]).strip().startswith("<details>"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("|"):
                out.append(lines[j])
                j += 1
            k = j
            while k < len(lines) and lines[k].startswith("|"):
                k += 1
            out += [f"<details><summary>{k - j - 2} rows</summary>", ""] + lines[j:k] + ["", "</details>"]
            i = k
            continue
        i += 1
    return "\n".join(out)


def with_verdict(section: str, name: str) -> str:
    """A run's section with its verdict first (after the heading and any note on where it came from);
    its reading stays below as the detail. A verdict already there is replaced."""
    g = GLANCE.get(name)
    lines = [x for x in section.split("\n") if not x.startswith((VERDICT, NOT_CARRIED))]
    if g is None:
        return "\n".join(lines)
    at, note = 1, []
    while at < len(lines) and (not lines[at].strip() or lines[at] == KEPT):
        note += [lines[at], ""] if lines[at] == KEPT else []
        at += 1
    spec = BY_NAME.get(name)
    lost = [NOT_CARRIED + spec.not_carried, ""] if spec is not None and spec.not_carried else []
    return "\n".join(lines[:1] + [""] + note + [VERDICT + g.verdict, ""] + lost + lines[at:])


# -- running --------------------------------------------------------------------------------------
def run_env(spec: Spec) -> dict[str, str]:
    """A run on the papers' data keeps its replies in a response cache of its own, beside its run
    folder, so that `carry-out` can put exactly its replies in git (see CARRIED)."""
    env = dict(os.environ)
    if spec.data:
        from rolebound.store import model_dir

        env["ROLEBOUND_MODEL_DIR"] = str(model_dir())        # the converted models stay where they are
        env["ROLEBOUND_CACHE_DIR"] = str(RUNS / f"{spec.name}.cache")
    return env


def run(names: list[str]) -> int:
    exe = Path(sys.executable).with_name("rolebound")
    rc = 0
    for spec in [BY_NAME[n] for n in names] if names else SPECS:
        prep = spec.prepare()
        if prep and not Path(spec.argv(prep)[-1]).exists():
            print("$", shlex.join(prep), flush=True)
            if subprocess.call([str(exe), *spec.argv(prep)[1:]], cwd=ROOT):
                rc = rc or 2
                continue
        print("$", shlex.join(spec.command()), flush=True)
        rc = subprocess.call([str(exe), *spec.argv(spec.command())[1:]], cwd=ROOT, env=run_env(spec)) or rc
        if spec.judge_check:
            print("$", shlex.join(spec.judge_check), flush=True)
            # in the run's own cache, so that `carry-out` carries the check's verdicts with the run
            rc = subprocess.call([str(exe), *spec.argv(spec.judge_check)[1:]], cwd=ROOT, env=run_env(spec)) or rc
    return rc


# -- carrying a long run's replies between machines -----------------------------------------------
# A run on the papers' data takes longer than a session's machine lives, and run folders are not in
# git: their records hold the benchmark's own text (CHARM's release has no license, so it is never
# committed). What is carried is the model's replies alone, keyed by the response cache's key (a
# hash of backend, request and decoding): `carry-out` writes them to bench/carried/NAME.jsonl,
# `carry-in` puts them back in the run's cache on the next machine, and the same command resumes
# the run, each carried reply a cache hit (its record says cached, with no latency). The sessions
# file says when each machine's run started and finished or last wrote a record, for the page.
CARRIED = ROOT / "bench" / "carried"


def carry_out(spec: Spec) -> str:
    import platform
    import sqlite3

    db = RUNS / f"{spec.name}.cache" / "responses.sqlite"
    if not db.exists():
        return f"{spec.name}: no cache of its own at {db}: nothing to carry"
    con = sqlite3.connect(str(db))
    try:
        rows = con.execute("SELECT key, value, created FROM responses ORDER BY created, key").fetchall()
    finally:
        con.close()
    CARRIED.mkdir(parents=True, exist_ok=True)
    out = CARRIED / f"{spec.name}.jsonl"
    old = {json.loads(x)["key"]: x for x in out.read_text(encoding="utf-8").splitlines()} if out.exists() else {}
    for key, value, created in rows:
        v = json.loads(value)
        if v.get("error") is None and key not in old:          # a failed call is asked again
            old[key] = json.dumps({"key": key, "created": created, "value": v}, ensure_ascii=False, sort_keys=True)
    out.write_text("".join(line + "\n" for line in old.values()), encoding="utf-8")
    man = RUNS / spec.name / "manifest.json"
    m = json.loads(man.read_text()) if man.exists() else {}
    log = CARRIED / f"{spec.name}.sessions.json"
    sessions = json.loads(log.read_text()) if log.exists() else []
    from rolebound.store import load_records

    # a report's re-reading appends records (the last per call_id wins) that keep their call's time
    seen = load_records(RUNS / spec.name, latest=False) if (RUNS / spec.name / "records.jsonl").exists() else []
    entry = {"started": m.get("started"), "finished": m.get("finished"), "counts": m.get("counts"),
             "records": len({r.call_id for r in seen}),
             "last_record": max((r.time for r in seen if r.time), default=None),
             "carried_replies": len(old), "machine": f"{platform.machine()} {_cpu_name()}",
             "written": f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"}
    sessions = [s for s in sessions if s.get("started") != entry["started"] or entry["started"] is None] + [entry]
    log.write_text(json.dumps(sessions, indent=1) + "\n")
    return f"{spec.name}: {len(old)} replies in {_shown(out)} ({len(rows)} in this machine's cache)"


def carry_in(spec: Spec) -> str:
    src = CARRIED / f"{spec.name}.jsonl"
    if not src.exists():
        return f"{spec.name}: nothing carried ({_shown(src)} is absent)"
    from rolebound.store import ResponseCache

    cache = ResponseCache(RUNS / f"{spec.name}.cache" / "responses.sqlite")
    added = 0
    try:
        for n, line in enumerate(src.read_text(encoding="utf-8").splitlines(), 1):
            try:
                row = json.loads(line)
                key, value = row["key"], row["value"]
                if not isinstance(key, str) or not isinstance(value, dict):
                    raise TypeError("key must be a string and value an object")
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{src}:{n}: not a carried reply ({exc})") from None
            if cache.get(key) is None:
                cache.put(key, value)
                added += 1
    finally:
        cache.close()
    return f"{spec.name}: {added} replies put in {cache.path} from {_shown(src)}"


def machines(spec: Spec) -> list[dict]:
    """Each machine the run was carried through (bench/carried/NAME.sessions.json), with the
    minutes from its first invocation's start to its finish or its last record (pauses included)."""
    log = CARRIED / f"{spec.name}.sessions.json"
    rows = json.loads(log.read_text()) if log.exists() else []
    for row in rows:
        end = row.get("finished") or row.get("last_record")
        row["minutes"] = ((datetime.fromisoformat(end) - datetime.fromisoformat(row["started"])).total_seconds() / 60
                          if end and row.get("started") else 0.0)
    return rows


def machines_note(rows: list[dict]) -> str:
    return "; ".join(f"{r['machine']}, {str(r['started'])[:16]} to "
                     f"{str(r.get('finished') or r.get('last_record'))[:16]} UTC ({r['minutes']:.0f} min, "
                     f"{r['records']} records{'' if r.get('finished') else ', unfinished'})" for r in rows)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((x.split(":", 1)[1].strip() for x in fh if x.startswith("model name")), "cpu unknown")
    except OSError:
        return "cpu unknown"


# -- the page -------------------------------------------------------------------------------------
def sections(md: str, wanted: list[str]) -> str:
    """The `## ` sections of a report.md whose heading starts with one of `wanted`, in order."""
    parts = re.split(r"(?m)^(?=## )", md)
    keep = [p for p in parts if p.startswith("## ") and any(p[3:].startswith(w) for w in wanted)
            and not p.startswith("## Per-sample") and "![" not in p]      # figures live beside the report
    return "\n".join("#" + p.rstrip() + "\n" for p in keep)    # one level down on the page


def wall_s(manifest: dict) -> float | None:
    """Seconds over every invocation where each timed itself; else the last one's items."""
    c = manifest.get("counts") or {}
    if c.get("wall_s") and c.get("timed_invocations", 0) == c.get("invocations", 1):
        return float(c["wall_s"])
    t = manifest.get("timing") or {}
    if "start" in t and "items_done" in t:
        return t["items_done"] - t["start"]
    return None


def wall_note(manifest: dict) -> str:
    c = manifest.get("counts") or {}
    n, timed = c.get("invocations", 1), c.get("timed_invocations", 0)
    if n <= 1 or (c.get("wall_s") and timed == n):
        return f" (over {n} invocations)" if n > 1 else ""
    return f" (the last of {n} invocations; the earlier ones were not timed)"


def starter_size(suite: str) -> int | None:
    """Items in the suite's whole built-in starter set, for the extrapolated time."""
    try:
        from rolebound.suites import get_suite

        s = get_suite(suite)
        opts = {"per_level": "all"} if suite == "capability" else {}
        settings = s.run_settings(list(s.default_strategies), opts, backend="bundled")
        return len(s.load(None, settings).items)
    except Exception:                      # noqa: BLE001 - an estimate only
        return None


def answers_read(rd: Path, role: str = "model") -> str:
    """Replies of `role` that are read against something (model answers with a gold label; every
    generated judge verdict), and how many of them no rule read (invalid)."""
    from collections import Counter

    from rolebound.store import load_records   # the last record of each call (re-reads append)

    total, bad = Counter(), Counter()
    for r in load_records(rd) if (rd / "records.jsonl").exists() else []:
        if r.role != role or r.error or r.kind == "score":
            continue
        stage = str(r.stage).split("@")[0]
        if (role == "model" and r.gold is None) or (role == "judge" and not stage.startswith("judge")):
            continue                       # segmenter replies: see the suite's own table
        total[stage] += 1
        bad[stage] += r.parsed in (None, "invalid", "INVALID")
    if not total:
        return "-"
    n, b = sum(total.values()), sum(bad.values())
    where = ", ".join(f"{s} {bad[s]}/{total[s]}" for s in total if bad[s])
    return f"{n - b}/{n} read, {b} invalid ({100 * b / n:.1f}%)" + (f": {where}" if where else "")


CI = re.compile(r"(-?[\d.]+) \\?\[(-?[\d.]+), (-?[\d.]+)\\?\]")


def ci_widths(rd: Path, suite: str, headline: tuple[str, ...] = ("",)) -> str:
    """Half-widths of the 95% CIs of the run's headline summary figures (the end-of-run table's)."""
    from rolebound.suites import get_suite

    path = rd / "metrics.json"
    if not path.exists():
        return "-"
    parts = []
    for label, value in get_suite(suite).summary(json.loads(path.read_text())):
        if not any(h in label for h in headline):
            continue
        m = CI.search(str(value))
        if m:
            lo, hi = float(m.group(2)), float(m.group(3))
            parts.append((label, (hi - lo) / 2))
    if not parts:
        return "-"
    widest = max(parts, key=lambda x: x[1])
    return f"widest +-{widest[1]:.3g} ({widest[0]}); " + ", ".join(f"{k} +-{w:.3g}" for k, w in parts)


def departures(suite: str, rd: Path) -> str:
    """The report's own comparison with the paper's protocol (decoding, options, subset, judge)."""
    from rolebound.api import load_manifest
    from rolebound.report.papers import protocol_comparison
    from rolebound.suites import get_suite

    _, out = protocol_comparison(get_suite(suite), load_manifest(rd))
    return "; ".join(out) or "none"


def unfinished(rd: Path, m: dict) -> str:
    """How far an unfinished run got: items with every call answered, over how many invocations."""
    from rolebound.store import load_records

    done: dict[tuple, bool] = {}
    for r in load_records(rd) if (rd / "records.jsonl").exists() else []:
        key = (r.item_id, r.strategy)
        done[key] = done.get(key, True) and not r.error
    c = m.get("counts") or {}
    n = c.get("jobs") or (m.get("n_items") or 0) * max(1, len(m.get("strategies") or []))
    if "jobs" not in c:                 # the first invocation is still going: no counts written yet
        return f"{sum(done.values())} of {n} jobs (item x strategy) answered so far, running since {m.get('started')}"
    return (f"{sum(done.values())} of {n} jobs (item x strategy) answered after {c.get('invocations', 1)} "
            f"invocation(s), {(c.get('wall_s') or 0) / 3600:.1f} h of wall time")


def describe(spec: Spec, rd: Path) -> str:
    if not (rd / "manifest.json").exists():
        return f"## {spec.name}\n\nNot run yet: `{shlex.join(spec.command())}`\n"
    m = json.loads((rd / "manifest.json").read_text())
    c = m.get("counts", {})
    proto = m.get("protocol", {})
    w = wall_s(m)
    carried = machines(spec)
    prep = spec.prepare()
    carry = [f"python bench/results.py carry-in {spec.name}   # only to resume from the replies carried in git; "
             "leave it out to ask the model again"] if carried else []
    lines = [f"## {spec.name}", "", "```", *([shlex.join(prep)] if prep else []), *carry,
             shlex.join(spec.command()), "```", ""]
    if not m.get("finished"):
        lines += [f"**Unfinished**: {unfinished(rd, m)}. The figures below are of the answers so far, "
                  "not of the run's sample; the same command resumes it."
                  + (f" ({spec.jobs_note}.)" if spec.jobs_note else ""), ""]
    facts = [
        ("model", m["model"]), ("judge", (m.get("judge") or "-") + (" (self-judged)" if proto.get("self_judged") else "")),
        ("protocol", proto.get("label", "-")),
        ("departures from the paper", departures(spec.suite, rd)),
        ("scoring", m.get("scoring") or "-"),
        ("items / model calls / cache hits / failed",
         f"{c.get('items')} / {c.get('model_calls')} / {c.get('cache_hits')} / {c.get('failed_calls')}"),
        ("answers with a gold label", answers_read(rd)),
        ("judge verdicts (generated)", answers_read(rd, "judge")),
        ("95% CI half-widths (headline figures)", ci_widths(rd, spec.suite, spec.headline)),
        ("tokens in / out", f"{c.get('prompt_tokens')} / {c.get('completion_tokens')}"),
        ("wall time", (f"{w / 60:.1f} min" if w is not None else "-") + wall_note(m) if not carried else
         f"{sum(r['minutes'] for r in carried):.1f} min over {len(carried)} machine(s), the replies carried from "
         f"one to the next (bench/carried/): {machines_note(carried)}"),
        ("threads", str((m.get("model_info") or {}).get("threads", "-"))),
        ("git revision, finished", f"{m.get('git_revision')}, {m.get('finished')}"),
    ]
    n_full = None if spec.data else starter_size(spec.suite)     # the papers' data: not our starter set's size
    if w is not None and n_full and m.get("n_items"):
        hits = c.get("cache_hits") or 0
        low = (f"; low: {hits} of {hits + (c.get('model_calls') or 0)} calls came from the response cache"
               if hits else "")
        facts.append(("whole starter set, same strategies and options (linear estimate)",
                      f"{n_full} items, about {w * n_full / m['n_items'] / 3600:.1f} h at this run's rate{low}"))
    lines += ["| | |", "|---|---|"] + [f"| {k} | {str(v).replace('|', '/')} |" for k, v in facts] + [""]
    report = rd / "report.md"
    if report.exists():
        lines.append(sections(report.read_text(encoding="utf-8"), spec.sections))
    if spec.judge_check:
        lines.append(judge_check_part(spec))
    if spec.reading:
        lines += ["**Reading** (written after the run, about the tool, not about role-play ability): "
                  + spec.reading, ""]
    else:
        lines += ["*No reading yet: one is written after the run has finished.*", ""]
    return "\n".join(lines)


def judge_check_part(spec: Spec) -> str:
    """`rolebound judge-check` of the run's judge on replies labelled by hand: its verdicts and
    agreement tables, copied from its report.md."""
    rd = Path(spec.argv(spec.judge_check)[-1])
    head = ["### How far this judge can be trusted", "", "```", shlex.join(spec.judge_check), "```", ""]
    if not (rd / "report.md").exists():
        return "\n".join(head + ["Not run yet.", ""])
    m = json.loads((rd / "manifest.json").read_text())
    md = (rd / "report.md").read_text(encoding="utf-8")
    parts = re.split(r"(?m)^(?=## )", md)
    keep = [p.replace("## ", "#### ", 1).rstrip() for p in parts
            if p.startswith("## Verdicts") or p.startswith("## verdict")]
    reading = [f"**Reading** (written after the check): {spec.judge_reading}", ""] if spec.judge_reading else []
    return "\n".join(head + [f"Judge `{m.get('judge')}`, finished {m.get('finished')}.", ""]
                     + [k + "\n" for k in keep] + reading)


TITLE = "# Results on the papers' data and on our starter sets"
LEAD = ("Every run at a glance: its headline figures, copied from its own tables below, and a verdict written "
        "after the run. Each run's section below opens with the same verdict; its tables and the full reading "
        "(what the run shows and cannot show) follow it.")
HEAD = """## How these runs were made

Every run below is `bundled:qwen2.5-coder-1.5b` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) on the
llamacpp engine (`make qwen llamacpp`; bench/engines.py measured it faster than the torch engine
for this model, docs/engines.md), in the papers' protocol: generated answers and the papers'
decoding, departing only as each run lists. Only Qwen among the bundled models writes the judges'
formats (SmolLM2 as a judge answers "no" to everything), so the judged suites are self-judged and
flagged so. A 1.5B coder model says nothing about role-play ability: these runs test the tool on
the papers' own benchmarks with a model that writes their answer formats.

The first part runs the papers' own public benchmarks at the sizes issue 39 asks: CHARM from its
authors' release (`rolebound data import charm-official`, all 2,748 questions of Table 7 under
independent, and the 732 BC Cross questions again with no role), Beyond One World's canon events
(600 balanced over the versions, direct) and RoleKE-Bench (270 queries balanced over KKE/UKE and
memory types, vanilla, self-judged). On 2 cores these take many hours each: a run still going
says how far it got, and its figures are of the answers so far. The second part keeps the runs
on our own starter sets, as what they are: the pipeline on our data.

Written by `python bench/results.py write` from the run folders under `runs/results/` (or
`$ROLEBOUND_RESULTS`); `python bench/results.py run` imports the papers' data from `../shared`
and runs every command shown (a run is resumed by the same command), `make results` does both.
A run on the papers' data that outlived one machine was carried to the next as its model's replies
alone (`python bench/results.py carry-out`, then `carry-in` on the next machine; bench/carried/,
which also lists each machine's share): its records there are cache hits. charm-official's replies
are all carried, so a fresh clone rebuilds its figures with no model call (no model or
llama-cpp-python installed: the engine loads only at a call the cache cannot answer). The
Beyond One World and RoleKE-Bench runs were lost with an earlier machine before their replies were
carried: their sections are copied from the page as it was, item-level intervals and all, and
say what a rerun costs.
Figures are copied from each run's report.md; wall times of runs that shared the 2 cores with
other work (tests, benches) are upper bounds.
"""


def rebuild(rd: Path) -> str:
    """`rolebound report RUN`: today's extraction rules on the stored replies; its summary line."""
    exe = Path(sys.executable).with_name("rolebound")
    out = subprocess.run([str(exe), "report", str(rd), "-q"], cwd=ROOT, capture_output=True, text=True)
    text = (out.stdout + out.stderr).strip()
    if out.returncode:
        return f"not rebuilt ({text.splitlines()[-1] if text else out.returncode}); its report is copied as it is"
    return text.splitlines()[0] if text else "report rebuilt"


def kept_from_page(page: str) -> tuple[dict[str, str], dict[str, str]]:
    """The page as last written: each run's `## name` section and its summary row, so that a run
    whose folder is not on this machine keeps what its own run wrote (run folders are not in git)."""
    parts = re.split(r"(?m)^(?=## )", page)
    secs = {p.split("\n", 1)[0][3:].strip(): p.rstrip() + "\n" for p in parts if p.startswith("## ")}
    rows = {m.group(1): m.group(0) for m in re.finditer(r"(?m)^\| \[([^\]]+)\]\(#[^)]*\) \|.*$", page)}
    return secs, rows


KEPT = ("*Copied from the page as it was last written: this run's folder is not on the machine that "
        "wrote this version of the page, so its report was not rebuilt.*")


def kept(section: str) -> str:
    section = plain_entities(section)
    if KEPT in section:
        return section
    head, _, rest = section.partition("\n")
    return f"{head}\n\n{KEPT}\n{rest}"


def plain_entities(text: str) -> str:
    """A section copied from a page written before reports used markdown's own escapes: its
    "&amp;" and "&lt;" as the characters (escaped where markdown would read them as markup)."""
    text = re.sub(r"&lt;(?=[A-Za-z/!?])", r"\\<", text).replace("&lt;", "<").replace("&gt;", ">")
    return re.sub(r"&amp;(?=#?[A-Za-z0-9]+;)", r"\\&", text).replace("&amp;", "&")


def summary(kept_rows: dict[str, str] | None = None, specs: list[Spec] | None = None,
            kept_total: str | None = None) -> list[str]:
    """One row per run: wall time, what was read, the starter-set estimate. `kept_total`: the
    "all" row as last written, kept when no run of these is on this machine (a sum of the rows'
    rounded minutes could differ from it in the last digit)."""
    rows = ["| run | wall time | answers read (gold-labelled) | judge verdicts read | widest 95% CI | "
            "whole starter set (estimate) |", "|---|---|---|---|---|---|"]
    total = 0.0
    for spec in SPECS if specs is None else specs:
        rd = RUNS / spec.name
        if not (rd / "manifest.json").exists():
            old = (kept_rows or {}).get(spec.name)
            rows.append(old or f"| {spec.name} | not run | | | | |")
            m = re.match(r"\| [^|]+ \| ([\d.]+) min", old or "")
            total += float(m.group(1)) * 60 if m else 0.0
            continue
        m = json.loads((rd / "manifest.json").read_text())
        carried = machines(spec)
        w = sum(r["minutes"] for r in carried) * 60 if carried else wall_s(m) or 0.0
        total += w
        n_full = None if spec.data else starter_size(spec.suite)
        est = f"about {w * n_full / m['n_items'] / 3600:.1f} h" if w and n_full and m.get("n_items") else "-"
        if spec.data and not m.get("finished"):
            est = "unfinished: " + unfinished(rd, m).split(" (item")[0]
        if est != "-" and (m.get("counts") or {}).get("cache_hits"):
            est += f" (low: {m['counts']['cache_hits']} cache hits)"
        widest = ci_widths(rd, spec.suite, spec.headline).split(";")[0]
        rows.append(f"| [{spec.name}](#{spec.name}) | {w / 60:.1f} min | {answers_read(rd)} | "
                    f"{answers_read(rd, 'judge')} | {widest} | {est} |")
    here = any((RUNS / s.name / "manifest.json").exists() for s in (SPECS if specs is None else specs))
    rows.append(kept_total if kept_total and not here else f"| all | {total / 60:.1f} min | | | | |")
    return rows + ["", "The estimates scale each run's wall time by the starter set's item count (same "
                   "strategies and options).", ""]


PART_PAPERS = "Part 1: the papers' own benchmarks"
PART_STARTER = "Part 2: our starter sets (the pipeline on our own data)"


def write(refresh: bool = True) -> Path:
    if refresh:
        for spec in SPECS:
            if (RUNS / spec.name / "records.jsonl").exists():
                print(f"{spec.name}: {rebuild(RUNS / spec.name)}")
    secs, rows = kept_from_page(PAGE.read_text(encoding="utf-8")) if PAGE.exists() else ({}, {})
    runs = {}
    for spec in SPECS:
        here = (RUNS / spec.name / "manifest.json").exists()
        if here or spec.name not in secs:
            runs[spec.name] = folded(with_verdict(describe(spec, RUNS / spec.name), spec.name))
        else:
            runs[spec.name] = folded(with_verdict(kept(secs[spec.name]), spec.name))
    body = [TITLE, "", LEAD, ""] + glance(runs) + [HEAD, f"*Page written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.*", ""]
    for title, part in ((PART_PAPERS, PAPERS), (PART_STARTER, STARTER)):
        specs = [s for s in part if s in SPECS]
        total = re.search(r"(?m)^\| all \|.*$", secs.get(title, ""))
        body += [f"## {title}", ""] + summary(rows, specs, total.group(0) if total else None)
        body += [runs[spec.name] for spec in specs]
    PAGE.write_text("\n".join(body).rstrip() + "\n", encoding="utf-8")
    return PAGE


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "write", "carry-out", "carry-in"])
    ap.add_argument("names", nargs="*", help=f"runs to do (default all): {', '.join(BY_NAME)}")
    ap.add_argument("--no-refresh", action="store_true", help="write: copy the reports as they are")
    a = ap.parse_args(argv)
    unknown = [n for n in a.names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown run '{unknown[0]}'; available: {', '.join(BY_NAME)}")
    if a.what == "run":
        return run(a.names)
    if a.what in ("carry-out", "carry-in"):
        do = carry_out if a.what == "carry-out" else carry_in
        for spec in [BY_NAME[n] for n in a.names] if a.names else PAPERS:
            print(do(spec))
        return 0
    print(write(refresh=not a.no_refresh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
