"""docs/architecture.md's layer diagram (the fenced block under `## Layers`) is the package graph
tests/test_layout.py checks: every package once, in the row of its height (the longest chain of
imports from it down to a package that imports none of ours, which is 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_layout import find_cycle, package_graph

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
HEADING = "## Layers"


def package_heights(graph: dict[str, set[str]]) -> dict[str, int]:
    cycle = find_cycle(graph)
    assert cycle is None, f"no layers with an import cycle: {' -> '.join(cycle)}"
    heights: dict[str, int] = {}

    def height(p: str) -> int:
        if p not in heights:
            heights[p] = 1 + max((height(q) for q in graph[p]), default=-1)
        return heights[p]

    for p in graph:
        height(p)
    return heights


def layer_block(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the first fenced block after the `## Layers` heading."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == HEADING), None)
    assert start is not None, f"docs/architecture.md has no {HEADING!r} heading"
    block: list[tuple[int, str]] = []
    inside = False
    for i, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("```"):
            if inside:
                return block
            inside = True
        elif inside:
            block.append((i, line))
        elif line.startswith("#"):
            break
    raise AssertionError(f"no fenced block under {HEADING!r} in docs/architecture.md")


def package_named(token: str) -> str:
    """`card/` -> rolebound.card, `suites/charm/` -> rolebound.suites.charm, `__init__` -> rolebound."""
    return "rolebound" if token == "__init__" else "rolebound." + token.strip("/").replace("/", ".")


def layering_problems(block: list[tuple[int, str]], heights: dict[str, int]) -> list[str]:
    """A row is `HEIGHT  name  name ...  # note`; a row may take several lines."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    last = None
    for n, line in block:
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if not tokens[0].isdigit():
            problems.append(f"line {n}: a row starts with its height, not {tokens[0]!r}")
            continue
        row = int(tokens[0])
        if last is not None and row > last:
            problems.append(f"line {n}: row {row} below row {last} (rows go down)")
        last = row
        for token in tokens[1:]:
            pkg = package_named(token)
            if pkg not in heights:
                problems.append(f"line {n}: {token!r} is no package of src/rolebound")
            elif pkg in seen:
                problems.append(f"line {n}: {pkg} listed twice (also line {seen[pkg]})")
            elif heights[pkg] != row:
                problems.append(f"line {n}: {pkg} is in row {row}; the code puts it in row {heights[pkg]}")
            seen.setdefault(pkg, n)
    problems += [f"{p} is missing (row {h})" for p, h in sorted(heights.items(), key=lambda x: (-x[1], x[0]))
                 if p not in seen]
    return problems


@pytest.mark.slow
def test_the_layer_diagram_is_the_package_graph():
    block = layer_block(DOC.read_text(encoding="utf-8"))
    problems = layering_problems(block, package_heights(package_graph()))
    assert not problems, "docs/architecture.md, " + HEADING + ":\n" + "\n".join(problems)


def test_the_layer_check_names_what_is_wrong():
    heights = package_heights({"rolebound": set(), "rolebound.io": {"rolebound"}, "rolebound.card": {"rolebound.io"},
                               "rolebound.runner": {"rolebound.io"}})
    text = "## Layers\n\n```\n2  card/   # the card\n 1  io  card/  store\n0  __init__\n```\n"
    assert layering_problems(layer_block(text), heights) == [
        "line 5: rolebound.card listed twice (also line 4)",
        "line 5: 'store' is no package of src/rolebound",
        "rolebound.runner is missing (row 2)",
    ]
    text = "## Layers\n```\n0  __init__\n1  io\n```\n"
    assert layering_problems(layer_block(text), heights)[:2] == [
        "line 4: row 1 below row 0 (rows go down)",
        "rolebound.card is missing (row 2)",
    ]
    text = "## Layers\n```\ncard/\n2  io\n```\n"
    assert layering_problems(layer_block(text), heights)[:2] == [
        "line 3: a row starts with its height, not 'card/'",
        "line 4: rolebound.io is in row 2; the code puts it in row 1",
    ]
    with pytest.raises(AssertionError, match="no '## Layers' heading"):
        layer_block("# Title\n```\n0  io\n```\n")
