"""Hostile input (issue 43, families 4 and 5): templates render in a bounded sandbox, and every
bomb or odd input is one line and exit 2, quickly, with the user's files left as they were."""

from __future__ import annotations

import csv
import json
import os

import pytest
from jinja2 import StrictUndefined, TemplateError

from rolebound.errors import InputError
from rolebound.io import json_loads, read_yaml
from rolebound.sandbox import compile_template
from rolebound.suites.charm.data import CharmData
from rolebound.suites.mcq.prompts import DEFAULT_TEMPLATE

from helpers import needs_script, rolebound, write_mcq

QUICK = 60      # seconds: a hang or a runaway fails the test instead of stalling the suite

# Each of these once ran code, recursed into a 1,034-line traceback, filled memory or spun for ever
TEMPLATE_BOMBS = {
    "shell": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "dunder": "{{ ''.__class__.__mro__ }}",
    "mutation": "{% set l = [] %}{{ l.append(1) }}",
    "recursion": "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "multiply": '{{ "x" * 10**9 }}',
    "list multiply": '{{ (["x" * 1000000] * 100)|join }}',
    "power": "{{ 7 ** 1000000 }}",
    "center": '{{ "x"|center(10**9) }}',
    "ljust": '{{ "x".ljust(10**9) }}',
    "str.format width": '{{ "{:>999999999}".format("x") }}',
    "% width": '{{ "%999999999s" % "x" }}',
    "format filter": '{{ "%999999999s"|format("x") }}',
    "join": '{{ range(100000)|join("x" * 100000) }}',
    "replace": '{% set s = "x" * 1000000 %}{{ s|replace("", s) }}',
    "concat": '{% set a = "x" * 3000000 %}{% set b = a ~ a %}{{ b|length }}',
    "expandtabs": '{{ ("\t" * 1000000).expandtabs(1000) }}',
    "indent": '{{ ("\n" * 1000000)|indent(1000) }}',
    "batch": '{{ [1]|batch(10**8, "x")|list }}',
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "branching macro": "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "output": '{% for i in range(100000) %}{{ "x" * 1000 }}{% endfor %}',
    "shared lists": '{% set a = ["x" * 1000000] * 2 %}{% set b = [a, a] %}{% set c = [b, b] %}{{ [c, c] }}',
    "deep source": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    "lipsum": "{{ lipsum(10**6) }}",
    "include": '{% include "/etc/passwd" %}',
}


SLOW_BOMBS = {"branching macro"}      # 100,000 macro calls before the bound stops it


@pytest.mark.parametrize("source", [pytest.param(v, id=k, marks=[pytest.mark.slow] if k in SLOW_BOMBS else [])
                                    for k, v in TEMPLATE_BOMBS.items()])
def test_a_hostile_template_is_a_template_error(source):
    with pytest.raises(TemplateError):
        compile_template(source, undefined=StrictUndefined).render(question="Q?", options=["a", "b"])


def test_an_ordinary_template_renders_as_before():
    text = compile_template(DEFAULT_TEMPLATE, undefined=StrictUndefined, keep_trailing_newline=True).render(
        name="Ada", source="Analytical Engine", question="Q?", options=["x", "y"], letters="ABC")
    assert text == ("You are Ada from Analytical Engine. Answer the question as this character.\n"
                    "Question: Q?\nA. x\nB. y\nAnswer:")
    src = ("{{ '{:,}'.format(1234567890) }} {{ '%05d'|format(42) }} {{ 'a,b'|replace(',', ';') }} "
           "{{ options|join(', ') }} {{ (q ~ '!')|upper }} {% for o in options if o %}{{ loop.index }}{% endfor %}")
    assert compile_template(src).render(options=["x", "y"], q="q") == "1,234,567,890 00042 a;b x, y Q! 12"


def test_json_too_deep_or_half_a_surrogate_is_a_decode_error():
    for text in ("[" * 100_000 + "]" * 100_000, '"\\ud800"', '{"q": "a\\udc00"}'):
        with pytest.raises(json.JSONDecodeError):
            json_loads(text)
    assert json_loads('"\\ud83d\\ude00 \\\\ud800"') == "\U0001F600 \\ud800"     # a pair; an escaped backslash


def _alias_bomb() -> str:
    lines, prev = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'], "a"
    for c in "bcdefghi":
        lines.append(f"{c}: &{c} [" + ", ".join([f"*{prev}"] * 9) + "]")
        prev = c
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_and_alias_loop_are_refused(tmp_path):
    bomb, loop, fine = tmp_path / "bomb.yaml", tmp_path / "loop.yaml", tmp_path / "fine.yaml"
    bomb.write_text(_alias_bomb())
    loop.write_text("a: &a [*a]\n")
    fine.write_text("base: &b {t: 0}\nrun: *b\nruns: [*b, *b]\n")
    with pytest.raises(InputError, match="alias bomb"):
        read_yaml(bomb)
    with pytest.raises(InputError, match="alias holds"):
        read_yaml(loop)
    assert read_yaml(fine)["runs"] == [{"t": 0}, {"t": 0}]


@pytest.mark.parametrize("template", ["Who is {target}? {0}", "Who is {target}? {x}", "{target} {target:>999999999}",
                                      "Who is {target}? {"])
def test_a_cross_template_names_only_target(template):
    with pytest.raises(ValueError, match="cross_ba_template"):
        CharmData.model_validate({"cross_ba_templates": [template]})
    assert CharmData.model_validate({"cross_ba_templates": ["Do you know {target}? {{braces}}"]})


# -- through the installed script --------------------------------------------------------------

def one_line(res, code: int = 2) -> str:
    assert res.returncode == code, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.fixture
def mcq_data(tmp_path):
    return write_mcq(tmp_path / "q.jsonl", 3)


def run_mcq(tmp_path, *args):
    return rolebound("run", "mcq", "--model", "fake:random", "--out", tmp_path / "run", "--quiet", *args,
                     cwd=tmp_path, timeout=QUICK)


@needs_script
@pytest.mark.slow
@pytest.mark.parametrize("name", ["shell", "recursion", "multiply"])
def test_a_hostile_set_template_is_one_line(tmp_path, mcq_data, name):
    source = TEMPLATE_BOMBS[name].replace("'id'", "'touch PWNED'")
    line = one_line(run_mcq(tmp_path, "--data", mcq_data, "--set", f"template={source}"))
    assert "template cannot render item 'q0'" in line
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "run" / "records.jsonl").exists()


@needs_script
@pytest.mark.slow
def test_a_template_file_that_is_a_fifo_or_a_device_is_refused(tmp_path, mcq_data):
    fifo = tmp_path / "prompt.j2"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        assert "not a regular file" in one_line(run_mcq(tmp_path, "--data", mcq_data, "--set", f"template_file={path}"))


@needs_script
@pytest.mark.slow
def test_bad_data_files_are_one_line(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "a", "question": "q", "options": ' + "[" * 100_000 + "]" * 100_000 + ', "answer": "A"}\n')
    half = tmp_path / "half.jsonl"
    half.write_text('{"id": "a", "question": "q", "options": ["x", "y"], "answer": "A"}\n{"id": "b", "question": "Q\\ud800?", "options": ["x", "y"], '
                    '"answer": "A"}\n')
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert "deep.jsonl:1: invalid JSON: nested too deep" in one_line(run_mcq(tmp_path, "--data", deep))
    assert "half.jsonl:2: invalid JSON: \\ud800 is half a surrogate pair" in one_line(run_mcq(tmp_path, "--data", half))
    for path in (fifo, "/dev/zero"):
        assert "not a regular file" in one_line(run_mcq(tmp_path, "--data", path))
    assert not (tmp_path / "run").exists()


@needs_script
@pytest.mark.slow
def test_an_alias_bomb_or_a_fifo_as_config_or_charm_data_is_one_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb() + "suite: mcq\n")
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    assert "alias bomb" in one_line(rolebound("run", "--config", bomb, timeout=QUICK))
    assert "not a regular file" in one_line(rolebound("run", "--config", fifo, timeout=QUICK))
    assert "alias bomb" in one_line(rolebound("run", "charm", "--model", "fake:random", "--data", bomb,
                                              "--out", tmp_path / "run", timeout=QUICK))


@needs_script
@pytest.mark.slow
def test_a_huge_or_deep_csv_cell_is_one_line(tmp_path):
    big, deep = tmp_path / "big.csv", tmp_path / "deep.csv"
    with big.open("w", newline="") as fh:
        csv.writer(fh).writerows([["question", "options", "answer"], ["Q?", '["a", "b"]', "A"],
                                  ["Q2?", "x" * 200_000, "A"]])
    with deep.open("w", newline="") as fh:
        csv.writer(fh).writerows([["question", "options", "answer"], ["Q?", "[" * 60_000 + "]" * 60_000, "A"]])
    line = one_line(rolebound("data", "import", "mcq-csv", big, "--out", tmp_path / "o.jsonl", timeout=QUICK))
    assert "big.csv:3: unreadable CSV: a cell over 131,072 characters" in line
    line = one_line(rolebound("data", "import", "mcq-csv", deep, "--out", tmp_path / "o.jsonl", timeout=QUICK))
    assert "deep.csv:2, field 'options'" in line and "nested too deep" in line
    assert not (tmp_path / "o.jsonl").exists()


@needs_script
@pytest.mark.slow
def test_a_corrupt_response_cache_names_the_file_and_is_left_alone(tmp_path, mcq_data):
    garbage = tmp_path / "c1" / "responses.sqlite"
    garbage.parent.mkdir()
    garbage.write_bytes(b"SQLite format 3\0" + b"garbage " * 500)
    (tmp_path / "c2" / "responses.sqlite").mkdir(parents=True)
    for cache in (garbage, tmp_path / "c2" / "responses.sqlite"):
        res = rolebound("run", "mcq", "--model", "fake:random", "--data", mcq_data, "--out", tmp_path / f"run-{cache.parent.name}",
                        "--quiet", env={**os.environ, "ROLEBOUND_CACHE_DIR": str(cache.parent)}, timeout=QUICK)
        line = one_line(res)
        assert str(cache) in line and "--no-cache" in line and "move it away" in line and "delete" not in line
    assert garbage.read_bytes() == b"SQLite format 3\0" + b"garbage " * 500


@needs_script
@pytest.mark.slow
def test_set_values_are_not_silently_bent(tmp_path, mcq_data):
    line = one_line(run_mcq(tmp_path, "--data", mcq_data, "--set", "max_tokens=true"))
    assert "option 'max_tokens' of suite mcq expects a whole number, not True" in line
    line = one_line(run_mcq(tmp_path, "--data", mcq_data, "--set", "group=nope"))
    assert "no item has a field 'nope'" in line and "question" in line
    assert "alias bomb" in one_line(run_mcq(tmp_path, "--data", mcq_data, "--set",
                                            "template=" + _alias_bomb().replace("\n", ", ").join("{}")))
    # true/false for a number, from a config file or a backend option: refused, not read as 1
    line = one_line(run_mcq(tmp_path, "--data", mcq_data, "--backend-opt", "concurrency=true"))
    assert "concurrency" in line and "not true/false" in line
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"suite: mcq\nmodel: fake:random\ndata: {mcq_data}\nout: {tmp_path / 'r2'}\n"
                   "limit: true\ndecoding: {max_tokens: true}\n", encoding="utf-8")
    line = one_line(rolebound("run", "--config", cfg, "--quiet", cwd=tmp_path, timeout=QUICK))
    assert "not true/false" in line and ("limit" in line or "max_tokens" in line)


def test_a_models_chat_template_renders_in_the_sandbox():
    from rolebound.models.chat_template import Template

    msgs = [{"role": "user", "content": "hi"}]
    chatml = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    assert Template(source=chatml).render(msgs, add_generation_prompt=False) == "<|user|>hi\n"
    for name in ("shell", "recursion", "multiply"):
        with pytest.raises(TemplateError):
            Template(source=TEMPLATE_BOMBS[name]).render(msgs)
