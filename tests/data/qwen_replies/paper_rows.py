"""Write tests/data/qwen_replies/*_paper.jsonl and tests/data/replies/qwen.jsonl from copies of
issue 13's paper-protocol run folders (run once; the labels and notes below were written by hand
after reading each reply).

    python tests/data/qwen_replies/paper_rows.py RUNS_DIR

RUNS_DIR holds the run folders charm, multiverse, knowledge-errors-smollm2 and capability.
"""
import json, sys
from pathlib import Path
SNAP = Path(sys.argv[1])
OUT = Path(__file__).parent
QWEN = "bundled:qwen2.5-coder-1.5b"
REV = "git 4131d38 (bench/results.py), 2026-12-01"
SRC = {
 "multiverse": f"`rolebound run multiverse --model {QWEN} --judge self --strategy direct,cot,cross-direct,cross-cot --limit 6 --set cot_max_tokens=256 --set segment_max_tokens=384 --set judge_max_tokens=64 --out runs/results/multiverse` (protocol paper, temperature 0.6, seed 0; {REV})",
 "knowledge-errors-smollm2": f"`rolebound run knowledge-errors --model bundled --judge {QWEN} --strategy vanilla,cot,few-shot,self-reflection,rag,rag-few-shot,s2rd,s2rd-no-recollection,s2rd-no-doubt --limit 6 --set answer_max_tokens=128 --set step_max_tokens=96 --set judge_max_tokens=96 --out runs/results/knowledge-errors-smollm2` (protocol paper, greedy; the judge is {QWEN}, a weak judge; {REV})",
 "charm": f"`rolebound run charm --model {QWEN} --strategy independent,sequential,no-role --limit 40 --out runs/results/charm` (protocol paper, generate, greedy, 256 tokens; {REV})",
}

def load(run):
    recs = {}
    for line in open(SNAP / run / "records.jsonl"):
        r = json.loads(line); recs[r["call_id"]] = r
    return recs

def row(r, label, note, source, **extra):
    p = r["prompt"][-1]["content"] if isinstance(r["prompt"], list) else r["prompt"]
    out = {"id": r["call_id"], "stage": r["stage"], "strategy": r["strategy"], "prompt_tail": p[-extra.pop("tail", 4000):],
           "response": r["response"], "parsed": r["parsed"], "label": label, "misread": r["parsed"] != label,
           "finish_reason": r["finish_reason"], "completion_tokens": r["completion_tokens"],
           "rule_that_day": (r["meta"].get("extraction") or {}).get("rule"), "note": note}
    out.update(extra)
    if r["meta"].get("extract"):
        out["extract"] = r["meta"]["extract"]     # the spec the run stored (what `rolebound report` reads with)
    out.update({"source": source, "validated": False})
    return out

# -- multiverse: every answer ----------------------------------------------------------------------
MV = {  # call id -> (label, note); the rest keep the run's reading, checked by reading each reply
 "spider-man-raimi-childhood-1/direct/answer": ("A", "states option A's text as the answer ('... was Mary Jane Watson.'); no other option named"),
 "spider-man-mcu-childhood-1/cross-cot/as.spider-man-raimi": ("D", "argues there is no best friend, then 'the correct answer is: \\boxed{D}': the final committed answer is D"),
 "spider-man-mcu-childhood-1/cross-direct/as.spider-man-raimi": ("invalid", "refusal ('As a fictional character, I don't have ... a best friend'), then names three options as friends"),
 "spider-man-webb-childhood-1/cot/answer": ("B", "states option B's text as the answer ('because they were arrested.')"),
 "spider-man-raimi-childhood-1/cross-cot/as.spider-man-webb": ("invalid", "reviews every option as 'correct', cut at the 256-token cap before a decision"),
 "spider-man-raimi-childhood-1/cross-direct/as.spider-man-webb": ("A", "states option A's text as the answer ('... is Mary Jane Watson.')"),
 "spider-man-mcu-childhood-1/cross-cot/as.spider-man-webb": ("invalid", "refusal: 'I do not have friends in high school'"),
 "spider-man-mcu-childhood-1/cross-direct/as.spider-man-webb": ("invalid", "refusal ('I don't have a personal best friend'), then a review of all four options, no pick"),
 "spider-man-raimi-childhood-1/cross-direct/as.spider-man-mcu": ("A", "states option A's text as the answer ('I can conclude that the girl next door ... is Mary Jane Watson.')"),
 "spider-man-mcu-childhood-1/direct/answer": ("invalid", "refusal: 'I have no friends in high school'"),
 "batman-burton-save-one-vs-greater-good-1/direct/answer": ("B", "names the scenario's Choice B text ('take the balloons away with the Batwing first'), not the pole's title"),
 "batman-reeves-save-one-vs-greater-good-1/cot/answer": ("invalid", "picks 'the second option: Help the people below first', argues for Selina and concludes 'by choosing to help Selina first': contradicts itself"),
 "batman-burton-save-one-vs-greater-good-1/cross-cot/as.batman-reeves": ("A", "opens with 'I will choose to go after Vicki Vale first' (the scenario's Choice A); the step-by-step after it is cut at the cap before its conclusion, nothing in it takes B"),
 "batman-reeves-save-one-vs-greater-good-1/cross-direct/as.batman-nolan": ("invalid", "'I will choose between saving the One You Love and saving the Greater Good', then saves Selina and then the people below: both"),
 "batman-burton-save-one-vs-greater-good-1/cross-cot/as.batman-nolan": ("invalid", "'I will choose between Option B: ...' then reviews both options, cut at the cap; the run read the 'Option A:' heading of the analysis as an answer line (misread)"),
 "batman-nolan-save-one-vs-greater-good-1/direct/answer": ("A", "'I'll choose option A' and ends 'I will choose to save Rachel'; the run read the supposition 'if I choose option B, I could be risking ...' as the last decision (misread)"),
 "batman-burton-save-one-vs-greater-good-1/cross-direct/as.batman-reeves": ("invalid", "'I will choose option A: Save the One You Love', then 'Therefore, I will first take the balloons away with the Batwing' (Choice B): says A, does B"),
 "batman-nolan-save-one-vs-greater-good-1/cot/answer": ("A", "'I will choose Option A: Go to Rachel'; the closing remark that the greater good would be to save Harvey is a concession, not a second pick"),
 "spider-man-mcu-childhood-1/cot/answer": ("D", "reviews the options (D 'is not Peter Parker's best friend'), then 'the best answer is D) Ned Leeds': the final committed answer is D"),
}
rows = []
recs = load("multiverse")
for cid, r in recs.items():
    if r["role"] != "model" or "extract" not in r["meta"]:
        continue
    label, note = MV.get(cid, (r["parsed"], "read as the run read it"))
    rows.append(row(r, label, note, SRC["multiverse"], letters=r["meta"]["letters"], task=r["meta"]["task"],
                    conflict=r["meta"].get("conflict")))
(OUT / "multiverse_paper.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
print("multiverse", len(rows), sum(x["misread"] for x in rows), sum(x["label"] == "invalid" for x in rows))

# -- knowledge-errors: every judge reply of the Qwen judge -----------------------------------------
rows = []
for cid, r in load("knowledge-errors-smollm2").items():
    if r["stage"] != "judge":
        continue
    if r["parsed"] == "invalid":
        label, note = "invalid", "cut before the judgment line (judge_max_tokens=96): the explanation runs past the cap"
    else:
        label, note = r["parsed"], "explanation, blank line, `judgment: yes|no` line"
    rows.append(row(r, label, note, SRC["knowledge-errors-smollm2"], tail=900))
(OUT / "knowledge_errors_judge.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
print("ke", len(rows), sum(x["label"] == "invalid" for x in rows))

# -- charm: the invalid answers, the misread and a sample of hard valid ones -----------------------
CH = {
 "kv/william-shakespeare/emma-watson-02/independent/kv": (1, "no 'Answer: N'; states option 1's text ('Emma Watson played Hermione Granger'), no other option named"),
 "bc/cross/senapati-of-mataram/sutan-sjahrir-01/sequential/seq.bc": (1, "no 'Answer: N'; 'was born in Padang Panjang, West Sumatra. This is the correct answer' (option 2 'Padang, West Sumatra' is not in the reply)"),
 "bc/temporal/william-shakespeare/smartphone/sequential/seq.bc": (3, "states option 3's text as the best course, renumbers the rejected options 1-4 in its own list, ends 'Answer: 3': the bare 3 agrees with the stated text (under the reply's own numbering 3 is an option it rejects)"),
 "bc/cross/senapati-of-mataram/sutan-sjahrir-02/no-role/nr": ("invalid", "reviews each option, cut at the 256-token cap"),
 "bc/cross/william-shakespeare/emma-watson-01/no-role/nr": ("invalid", "says London, renumbers the options without the abstention, ends 'Answer: 4' (its own 4 is London, the prompt's 4 is Oxford): renumbered, ambiguous"),
 "bc/temporal/senapati-of-mataram/smartphone/sequential/seq.bc": ("invalid", "lists the options, then 'Option 1: ...', 'Option 2: ...' comments on each, cut at the cap; the run read the 'Option 2' comment line as the answer (misread)"),
 "bc/cross/isabella-i-of-castile/salvador-dali-01/no-role/nr": (1, "'All of the options listed are correct ... I'll choose the first option, Cadaqués. Answer: 1'"),
 "bc/cross/sejong/faker-02/no-role/nr": (5, "reviews each option, then 'Therefore, the correct answer is: Answer: 5'"),
 "bc/temporal/sejong/smartphone/sequential/seq.bc": (4, "numbered steps that follow the options' order, then 'Answer: 4'"),
 "bc/cross/william-shakespeare/emma-watson-01/sequential/seq.bc": (5, "'I would most likely provide the answer \"5\" (London, England)', then 'Answer: 5'"),
 "bc/temporal/isabella-i-of-castile/smartphone/sequential/seq.bc": (5, "the option line '5. Plug it into a charger ...' on its own, no 'Answer:'"),
}
rows = []
for cid, r in load("charm").items():
    if cid in CH:
        label, note = CH[cid]
        rows.append(row(r, label, note, SRC["charm"], tail=1500, n_options=len(r["meta"]["extract"]["options"])))
(OUT / "charm_paper.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
print("charm", len(rows))

# -- the labelled corpus: the hard choice replies of these runs -------------------------------------
import hashlib
CORPUS = OUT.parent / "replies" / "qwen.jsonl"
out = []
def corpus_row(run, r, label, note, suite, kind):
    opts = r["meta"]["extract"]["options"]
    if label == "invalid":
        idx = None
    else:
        idx = next(i for i, (L, _) in enumerate(opts) if str(L) == str(label))
    rid = "qwen-" + r["call_id"].replace("/", "-")
    return {"id": rid, "suite": suite, "kind": kind, "source": "qwen_run", "model": QWEN,
            "provenance": {"run": SRC[run], "call_id": r["call_id"], "finish_reason": r["finish_reason"]},
            "options": opts, "reply": r["response"], "label": idx, "note": note,
            "labelled_by": "extract2 helper session, rolebound issues 12/13 (read by hand)",
            "split": "heldout" if int(hashlib.sha1(rid.encode()).hexdigest(), 16) % 3 == 0 else "dev"}
recs = load("multiverse")
for cid, (label, note) in MV.items():
    r = recs[cid]
    out.append(corpus_row("multiverse", r, label, note, "multiverse", r["meta"]["task"]))
recs = load("charm")
for cid, (label, note) in CH.items():
    r = recs[cid]
    out.append(corpus_row("charm", r, label, note, "charm", r["stage"].split(".")[-1].replace("nr", "bc")))
CORPUS.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out))
print("corpus", len(out), sum(x["label"] is None for x in out))

# -- capability: every Injection reply, every boxed chat reply, the unboxed invalid ones ------------
CAP = SNAP / "capability"
if (CAP / "report.md").exists():
    import re as _re
    m = json.loads((CAP / "manifest.json").read_text())
    src = (f"`rolebound run capability --model {QWEN} --strategy identity,description,cot,guideline,explicit-idk,"
           f"syllabus,injection,injection-syllabus,no-role --set roles=kindergarten,middle,college --set per_level=1 "
           f"--max-tokens 384 --out runs/results/capability` (protocol paper, temperature 1.0, top_p 0.95, seed 0; "
           f"git {m['git_revision']}, bench/results.py, 2026-12-01)")
    recs = {}
    for line in open(CAP / "records.jsonl"):
        r = json.loads(line); recs[r["call_id"]] = r
    rows, unboxed = [], 0
    for cid, r in recs.items():
        t = r["response"] or ""
        boxes = _re.findall(r"\\boxed\{([^{}]*)\}", t)
        inj = r["strategy"].startswith("injection")
        if not inj and not boxes:
            if r["parsed"] != "invalid" or unboxed >= 8:
                continue
            unboxed += 1
        p = r["prompt"] if isinstance(r["prompt"], str) else r["prompt"][-1]["content"]
        label = r["parsed"]
        if boxes and boxes[-1].strip().upper() in ("IDK", "I DON'T KNOW"):
            note = "\\boxed{IDK}: invalid by Appendix D (counted as idk)"
        elif boxes:
            note = f"last box \\boxed{{{boxes[-1]}}}"
        elif inj:
            note = "the prefill's sentence completed without a box: invalid by Appendix D"
        else:
            note = "no \\boxed{} (a plain letter or option text): invalid by Appendix D, which reads only the box"
        rows.append({"id": cid, "stage": r["stage"], "strategy": r["strategy"], "kind": r["kind"],
                     "prompt_tail": p[-700:], "response": t, "parsed": r["parsed"], "label": label,
                     "misread": r["parsed"] != label, "gold": r["gold"], "finish_reason": r["finish_reason"],
                     "note": note, "source": src, "validated": False})
    (OUT / "capability_paper.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
    print("capability", len(rows), sum(x["strategy"].startswith("inj") for x in rows), sum(x["label"] == "invalid" for x in rows))
