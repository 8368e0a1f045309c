"""`make fix-demo`: measure, fix, measure again, on characters the fix never saw (docs/fix.md).

1. charm on the bundled model, the whole starter set (its 20 historical roles, four per region:
   a --limit subset spreads over the 20 roles but asks each only a few questions);
2. preference pairs from its records, half of each region's roles (and of its KV targets) held out
   (`data pairs`);
3. DPO with a LoRA adapter on the train split (`rolebound tune`, --max-steps 40: 320 pairs);
4. base and tuned on the held-out characters only (`--set characters=...`; the base run is cache
   hits of step 1), and capability's within-ceiling questions as an over-refusal guard that the
   tune never trained on;
5. paired differences, tuned - base, matched by call, with a 95% cluster bootstrap over the
   characters (the unit the split holds out) and McNemar's exact p-value.

Every step is a rolebound command and resumes: run it again after a stop. The figures go to
OUT/fix.json and OUT/fix.md (docs/fix.md quotes them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROLEBOUND = str(Path(sys.executable).with_name("rolebound"))
N_BOOT = 2000


def sh(*args: str) -> float:
    t0 = time.perf_counter()
    print("$ rolebound " + " ".join(args), flush=True)
    subprocess.run([ROLEBOUND, *args], check=True)
    return time.perf_counter() - t0


def load(run: Path) -> dict[str, dict]:
    out = {}
    for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            out[r["call_id"]] = r          # the last record of a call wins
    return {k: r for k, r in out.items() if r.get("role") == "model" and r.get("error") is None}


def paired(base: dict, tuned: dict, keep, outcome, cluster) -> dict:
    """tuned - base of a right/wrong outcome over the calls both hold, matched by call_id."""
    from scipy.stats import binomtest

    ids = sorted(k for k in base if k in tuned and keep(base[k]))
    if not ids:
        return {"n": 0}
    a = np.array([float(outcome(base[k])) for k in ids])
    b = np.array([float(outcome(tuned[k])) for k in ids])
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(ids):
        groups.setdefault(cluster(base[k]), []).append(i)
    idx = [np.array(v) for _, v in sorted(groups.items())]
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(N_BOOT):
        pick = np.concatenate([idx[j] for j in rng.integers(0, len(idx), len(idx))])
        diffs.append(100.0 * (b[pick].mean() - a[pick].mean()))
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    up, down = int(((b == 1) & (a == 0)).sum()), int(((b == 0) & (a == 1)).sum())
    p = binomtest(up, up + down, 0.5).pvalue if up + down else 1.0
    return {"n": len(ids), "clusters": len(idx), "base": 100.0 * a.mean(), "tuned": 100.0 * b.mean(),
            "diff": 100.0 * (b.mean() - a.mean()), "lo": float(lo), "hi": float(hi),
            "better": up, "worse": down, "mcnemar_p": float(p)}


def cgap(records: dict) -> dict:
    """Per BC call of the independent strategy: whether its instance is a Compliance Gap (BA right, BC wrong)."""
    out = {}
    for k, r in records.items():
        if r["stage"] == "bc" and r["strategy"] == "independent":
            ba = next((x for x in records.values() if x["item_id"] == r["meta"].get("ba_id") and x["stage"] == "ba"),
                      None)
            if ba is not None:
                out[k] = {**r, "cgap": bool(ba["correct"]) and not r["correct"]}
    return out


def verdict(d: dict) -> str:
    if not d.get("n"):
        return "no data"
    if d["clusters"] < 10:
        return f"cannot tell: {d['clusters']} characters (below 10, the interval cannot be trusted)"
    if d["lo"] > 0:
        return "up (the interval excludes no change)"
    if d["hi"] < 0:
        return "down (the interval excludes no change)"
    return f"cannot tell at this size (n = {d['n']})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/fix-demo")
    ap.add_argument("--limit", type=int, default=None, help="charm's --limit (default: the whole starter set)")
    ap.add_argument("--heldout", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", default="40", help="tune steps of 8 pairs (-1: one epoch)")
    ap.add_argument("--capability-limit", type=int, default=12)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    wall = {}
    limit = ["--limit", str(a.limit)] if a.limit else []
    wall["base run"] = sh("run", "charm", *limit, "--out", str(out / "base"))
    wall["pairs"] = sh("data", "pairs", str(out / "base"), "--out", str(out / "pairs"),
                       "--heldout", str(a.heldout), "--seed", str(a.seed))
    wall["tune"] = sh("tune", str(out / "pairs"), "--model", "bundled", "--out", str(out / "adapter"),
                      "--max-steps", a.max_steps, "--seed", str(a.seed))
    held = json.loads((out / "pairs" / "pairs.json").read_text())["characters"]["test"]
    chars = ",".join(held)
    adapter = f"adapter={out / 'adapter'}"
    wall["base, held out"] = sh("run", "charm", *limit, "--set", f"characters={chars}",
                                "--out", str(out / "base-heldout"))
    wall["tuned, held out"] = sh("run", "charm", *limit, "--set", f"characters={chars}",
                                 "--backend-opt", adapter, "--out", str(out / "tuned-heldout"))
    cap = ["run", "capability", "--strategy", "identity", "--limit", str(a.capability_limit)]
    wall["capability base"] = sh(*cap, "--out", str(out / "capability-base"))
    wall["capability tuned"] = sh(*cap, "--backend-opt", adapter, "--out", str(out / "capability-tuned"))

    base, tuned = load(out / "base-heldout"), load(out / "tuned-heldout")
    by_char = lambda r: r["meta"].get("role") or ""     # noqa: E731 - the held-out unit
    rows = {
        "BC accuracy (target)": paired(base, tuned, lambda r: r["stage"] == "bc", lambda r: r["correct"], by_char),
        "Compliance Gap (target; lower is better)": paired(cgap(base), cgap(tuned), lambda r: True,
                                                           lambda r: r["cgap"], by_char),
        "BA accuracy": paired(base, tuned, lambda r: r["stage"] == "ba", lambda r: r["correct"], by_char),
        "KV accuracy (guard)": paired(base, tuned, lambda r: r["stage"] == "kv", lambda r: r["correct"], by_char),
    }
    yes = [k for k, r in base.items() if r["stage"].startswith("ba") and r.get("gold") == "Yes"]
    if yes:
        rows["BA Yes control (guard)"] = paired(base, tuned, lambda r: r.get("gold") == "Yes",
                                                lambda r: r["correct"], by_char)
    cb, ct = load(out / "capability-base"), load(out / "capability-tuned")
    rows["capability within-ceiling accuracy (guard)"] = paired(
        cb, ct, lambda r: bool(r["meta"].get("in_role")), lambda r: r["correct"], lambda r: r["meta"].get("role") or "")
    invalid = {name: round(100.0 * sum(r["parsed"] == "invalid" for r in recs.values()) / max(1, len(recs)), 1)
               for name, recs in (("capability base", cb), ("capability tuned", ct))}
    tune_meta = json.loads((out / "adapter" / "tune.json").read_text())
    result = {"heldout_characters": held, "rows": rows, "wall_s": {k: round(v, 1) for k, v in wall.items()},
              "tune": {k: tune_meta.get(k) for k in ("steps", "train_pairs", "wall_s", "threads", "first_log",
                                                     "last_log", "settings", "resumed")},
              "capability_invalid_pct": invalid}
    (out / "fix.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"Held out ({len(held)} characters): {', '.join(held)}.", "",
             "| figure | n | characters | base | tuned | tuned - base [95% CI] | better / worse | McNemar p | reading |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, d in rows.items():
        if not d.get("n"):
            lines.append(f"| {name} | 0 | - | - | - | - | - | - | no data |")
            continue
        lines.append(f"| {name} | {d['n']} | {d['clusters']} | {d['base']:.1f} | {d['tuned']:.1f} | "
                     f"{d['diff']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}] | {d['better']} / {d['worse']} | "
                     f"{d['mcnemar_p']:.3g} | {verdict(d)} |")
    (out / "fix.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\n{out / 'fix.json'}\n{out / 'fix.md'}")


if __name__ == "__main__":
    main()
