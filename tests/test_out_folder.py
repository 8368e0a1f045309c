"""Files that are not the run's own (issue 43, family 2): a run writes only into a new or empty
folder, or one holding the same run; it never writes through a symbolic link; `data import`
never writes onto its own source or onto something that is not a regular file. Each refusal is
exit 2 in one line, and the user's files stay byte for byte the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import needs_script, refused, rolebound, write_mcq

pytestmark = needs_script


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every entry under `folder` (links as their target's name), to compare byte for byte."""
    out = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        out[key] = (b"link:" + os.readlink(p).encode()) if p.is_symlink() else p.read_bytes() if p.is_file() else b"dir"
    return out


def run_args(data: Path, out, *extra) -> list:
    return ["run", "mcq", "--model", "fake:random", "--data", data, "--limit", "3", "--out", out, "--quiet", *extra]


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 3)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--overwrite"]])
def test_a_folder_that_is_not_a_run_is_left_alone(tmp_path, data, extra):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.html").write_text("<p>my own report</p>")
    (mine / "metrics.json").write_text('{"mine": 1}')
    before = snapshot(mine)
    err = refused(rolebound(*run_args(data, mine, *extra)), "not a run folder", "report.html", "--out")
    assert str(mine) in err
    assert snapshot(mine) == before          # not even a .lock was made there


@pytest.mark.slow
def test_overwrite_clears_a_run_only(tmp_path, data):
    """A manifest.json that is not a run's is no licence for --overwrite to delete files."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text('{"name": "my package"}')
    (mine / "metrics.json").write_text('{"mine": 1}')
    before = snapshot(mine)
    refused(rolebound(*run_args(data, mine, "--overwrite")), "manifest")
    assert snapshot(mine) == before


@pytest.mark.slow
@pytest.mark.parametrize("out, says", [("/", "root folder"), ("", "empty"), ("q.jsonl", "not a folder")])
def test_root_empty_or_a_file_as_out_is_refused(tmp_path, data, out, says):
    before_root, before = sorted(os.listdir("/")), snapshot(tmp_path)
    refused(rolebound(*run_args(data, out), cwd=tmp_path), says)
    assert sorted(os.listdir("/")) == before_root
    assert snapshot(tmp_path) == before       # --out '' wrote nothing into the current folder


@pytest.mark.slow
def test_an_empty_folder_is_taken_and_the_same_run_resumed(tmp_path, data):
    out = tmp_path / "empty"
    out.mkdir()
    for _ in range(2):
        res = rolebound(*run_args(data, out))
        assert res.returncode == 0, res.stderr
    assert (out / "report.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["records.jsonl", ".lock"])
def test_a_link_in_the_run_folder_is_never_written_through(tmp_path, data, name):
    out = tmp_path / "r"
    res = rolebound(*run_args(data, out))
    assert res.returncode == 0, res.stderr
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"first line\nsomeone else's last line, without a newline")
    (out / name).unlink()
    (out / name).symlink_to(target)
    before = target.read_bytes()
    refused(rolebound(*run_args(data, out)), "symbolic link", name)
    assert target.read_bytes() == before      # not cut by the repair step, not truncated by the lock


@pytest.mark.slow
def test_data_import_refuses_its_source_a_link_and_a_device(tmp_path):
    src = tmp_path / "q.csv"
    src.write_text("question,A,B,answer\nWhat?,x,y,A\n")
    before = src.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(src)
    for out, says in [(src, "source being imported"), (tmp_path / "missing" / ".." / "q.csv", "source being imported"),
                      (link, "symbolic link"), (tmp_path, "not a regular file")]:
        refused(rolebound("data", "import", "mcq-csv", src, "--out", out), says)
        assert src.read_bytes() == before
    assert not (tmp_path / "missing").exists()
    if Path("/dev/null").exists():
        refused(rolebound("data", "import", "mcq-csv", src, "--out", "/dev/null"), "not a regular file")
        assert Path("/dev/null").is_char_device()
    res = rolebound("data", "import", "mcq-csv", src, "--out", tmp_path / "q.jsonl")
    assert res.returncode == 0, res.stderr


def test_claim_folder_takes_new_empty_and_own_folders_only(tmp_path):
    """The check itself, without a process: what a folder may hold to be written into."""
    from rolebound.errors import InputError
    from rolebound.store import claim_run_folder

    assert claim_run_folder(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / ".lock").touch()
    (tmp_path / "killed" / ".manifest.json.12.34.tmp").touch()     # a write cut by a kill
    claim_run_folder(tmp_path / "killed")
    (tmp_path / "killed" / "notes.txt").touch()
    with pytest.raises(InputError, match="notes.txt"):
        claim_run_folder(tmp_path / "killed")
    (tmp_path / "killed" / "manifest.json").touch()                # a run's folder: the manifest decides
    claim_run_folder(tmp_path / "killed")


@pytest.mark.slow
def test_a_card_or_a_sweep_leaves_a_folder_of_other_files_alone(tmp_path, data):
    import yaml

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my own page</p>")
    (mine / "card.md").write_text("my notes")
    before = snapshot(mine)
    refused(rolebound("card", "--model", "fake:random", "--out", mine), "not a card folder", "--out")
    cfg = tmp_path / "g.yaml"
    cfg.write_text(yaml.safe_dump({"suite": "mcq", "model": ["fake:random", "fake:constant"], "data": str(data),
                                   "limit": 2}))
    refused(rolebound("sweep", cfg, "--out", mine, "--quiet"), "not a sweep folder", "--out")
    assert snapshot(mine) == before


@pytest.mark.slow
def test_compare_never_writes_into_a_run_or_a_users_folder(tmp_path, data):
    runs = []
    for name in ("a", "b"):
        res = rolebound(*run_args(data, tmp_path / name))
        assert res.returncode == 0, res.stderr
        runs.append(tmp_path / name)
    before = snapshot(runs[0])
    refused(rolebound("compare", *runs, "--out", runs[0]), "not a comparison folder")
    assert snapshot(runs[0]) == before          # the run's own report.md/html untouched
    res = rolebound("compare", *runs, "--out", tmp_path / "cmp")
    assert res.returncode == 0, res.stderr
    again = rolebound("compare", *runs, "--out", tmp_path / "cmp")
    assert again.returncode == 0, again.stderr
