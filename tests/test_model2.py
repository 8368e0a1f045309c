"""The optional bundled Qwen2.5-Coder-1.5B through the local engine (real weights, CPU).

Skipped unless `rolebound models install qwen2.5-coder-1.5b` has been run on this machine.
Loading takes a few seconds and 3.8 GB of memory; run these with OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from rolebound.models import install as ins
from rolebound.records import Decoding, Message
from rolebound.suites.charm.prompts import parse_answer_number

NAME = "qwen2.5-coder-1.5b"
pytestmark = [pytest.mark.model, pytest.mark.model2]


@pytest.fixture(scope="module")
def qwen():
    if ins.installed_path(ins.PACKS[NAME]) is None:
        pytest.skip(f"{NAME} is not installed (rolebound models install {NAME})")
    from rolebound.models import create_backend

    b = create_backend(f"bundled:{NAME}", engine="torch")     # the bf16 folder is the torch engine's
    b.engine
    return b


def test_installed_folder_records_its_provenance(qwen):
    info = json.loads((qwen.model_path() / "rolebound.json").read_text())
    assert info["sha256"] == ins.PACKS[NAME].sha256 and info["dtype"] == "bfloat16"
    assert len(info["packages"]) == 22 and info["peak_rss_mb"] < 8000


def test_render_chat_uses_qwens_template(qwen):
    text = qwen.render_chat([Message(role="user", content="hi")])
    # without a system message Qwen's template inserts its default one
    assert text.startswith("<|im_start|>system\nYou are Qwen")
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_greedy_answer_follows_the_format_and_stops_at_end_of_turn(qwen):
    q = ("Which planet is known as the Red Planet?\n1. Venus\n2. Mars\n3. Jupiter\n4. Saturn\n"
         "Reply with one line of explanation, then a last line of the form `Answer: <number>`.")
    out = asyncio.run(qwen.generate([_req(q)], Decoding(max_tokens=96)))[0]
    assert out.error is None and out.finish_reason == "stop", out
    assert parse_answer_number(out.text, 4) == 2, out.text


def _req(text):
    from rolebound.models.base import GenRequest

    return GenRequest(messages=[Message(role="user", content=text)])
