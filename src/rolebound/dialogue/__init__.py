"""Boundaries over a conversation: a suite's probe asked after N earlier exchanges in one chat.

The strategy's name (DIALOGUE) and the `--set` options every suite that offers it shares
(DialogueOptions) are in suites/base.py, so a run without the strategy loads nothing of this
package. Here:
run.py      plans (who talks about what), the warm-up turns (`turn@k` records), the probes by depth
budget.py   the before-any-call checks: a user model for `simulated`, the context window
metrics.py  pure: probe records -> by-depth rates, the paired change from depth 0, drift slope
report.py   the depth tables and the drift figure (report and card), which a suite's report adds
            when its metrics hold dialogue figures
"""

from __future__ import annotations


def depths(opts) -> list[int]:
    return [int(x) for x in str(opts.depths).split(",")]


def warmups(opts) -> list[str]:
    return str(opts.warmup).split(",")
