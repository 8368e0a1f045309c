"""Boundaries over a conversation: a suite's probe asked after N earlier exchanges in one chat.

options.py  the `--set` options every dialogue strategy shares (depths, warmup, user_model, ...)
run.py      plans (who talks about what), the warm-up turns (`turn@k` records), the probes by depth
budget.py   the before-any-call checks: a user model for `simulated`, the context window
metrics.py  pure: probe records -> by-depth rates, the paired change from depth 0, drift slope
report.py   the depth tables and the drift figure (report and card)
"""

from __future__ import annotations

STRATEGY = "dialogue"
DESCRIPTION = "the probe asked after N earlier exchanges in one chat (--set depths=0,4,8 warmup=scripted)"
