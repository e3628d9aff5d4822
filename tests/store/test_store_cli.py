"""The ``enigma ingest`` and ``enigma data summary`` commands end to end on small inputs."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from store_fixtures import dialogue, write_jsonl
from typer.testing import CliRunner

from enigma.cli import app
from enigma.store import queries
from enigma.store.experience import ExperienceStore

runner = CliRunner()


@pytest.fixture
def params(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("ingest:\n  min_dialogues_per_agent: 2\n  max_text_chars: 1000\n  sources:\n"
                 "    jsonl:\n      ratings:\n        overall: {min: 1, max: 5}\n")
    return p


def _ingest(*args):
    return runner.invoke(app, ["ingest", *map(str, args), "--no-progress"])


def test_ingest_jsonl_writes_store_report_and_rejects(tmp_path, params, good_records):
    for r in good_records:
        r["ratings"] = {"overall": r["ratings"]["overall"]}
    recs = good_records + [dialogue("d9", ratings={"overall": 9})]
    f = write_jsonl(tmp_path / "in.jsonl", recs, {3: b"{broken"})
    out = tmp_path / "store"
    res = _ingest("jsonl", f, "--out", out, "--params", params)
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "5 dialogues, 2 agents, 20 turns, 2 rejects (from 7 records)" in res.output
    assert "malformed JSON" in res.output and "outside its scale" in res.output
    store = ExperienceStore.open(out)
    assert store.dialogues.num_rows == 5 and store.rejects.num_rows == 2
    assert sorted(r["record"] for r in store.rejects.to_pylist()) == [3, 7]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == "jsonl" and manifest["spec"]["ratings"]["overall"]["max"] == 5
    assert len(manifest["inputs"][0]["sha256"]) == 64
    assert json.loads((out / "validation.json").read_text())["success"] is True

    res = runner.invoke(app, ["data", "summary", str(out)])
    assert res.exit_code == 0, res.output
    assert "5 dialogues, 2 agents, 20 turns, 2 rejects" in res.output
    assert "bot-a" in res.output and "bot-b" in res.output
    assert "rejects by reason:" in res.output and "malformed JSON" in res.output


def test_lone_surrogate_and_runaway_nesting_are_rejects_not_a_failed_ingest(tmp_path, params, good_records):
    # json.dumps writes the lone surrogate as the escape "\ud83d": half of an emoji, cut off
    recs = [dialogue(r["dialog_id"], r["agent_id"], ratings={"overall": r["ratings"]["overall"]}) for r in good_records]
    recs[1]["turns"][1]["text"] = "nice \ud83d"
    deep = json.dumps(dialogue("deep", ratings={}))[:-1] + ', "meta": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    f = write_jsonl(tmp_path / "in.jsonl", recs, {4: deep.encode()})
    out = tmp_path / "store"
    res = _ingest("jsonl", f, "--out", out, "--params", params)
    assert res.exit_code == 0, res.output
    assert "4 dialogues, 2 agents, 16 turns, 2 rejects (from 6 records)" in res.output
    assert "[turns[1].text] not valid Unicode: lone surrogate \\ud83d" in res.output and "Traceback" not in res.output
    rejects = ExperienceStore.open(out).rejects.to_pylist()
    assert [(r["source_file"], r["record"], r["dialog_id"], r["field"]) for r in rejects] == [
        (str(f), 2, "d1", "turns[1].text"), (str(f), 4, None, None)]
    assert rejects[1]["reason"].startswith("JSON nested too deep to parse")
    summary = runner.invoke(app, ["data", "summary", str(out)])
    assert summary.exit_code == 0 and "2 rejects" in summary.output


def test_scale_option_declares_ratings(tmp_path, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    res = _ingest("jsonl", f, "--out", tmp_path / "s", "--scale", "overall=1:5", "--scale", "fun=0:1")
    assert res.exit_code == 0, res.output
    assert pq.read_table(tmp_path / "s" / "dialogues.parquet").column("rating_overall").to_pylist()[1] == 0.25


def _empty_file(directory):
    f = directory / "e.jsonl"
    f.write_bytes(b"")
    return f


@pytest.mark.parametrize("setup, words", [
    (lambda p: p / "missing.jsonl", "no such file or directory"),
    (_empty_file, "empty file (no records)"),
])
def test_fatal_inputs_exit_2_without_traceback(tmp_path, params, setup, words):
    path = setup(tmp_path)
    res = _ingest("jsonl", path, "--out", tmp_path / "store", "--params", params)
    assert res.exit_code == 2
    assert res.output.startswith("error: ") and words in res.output and "Traceback" not in res.output
    assert not (tmp_path / "store").exists()


def test_bad_options_exit_2(tmp_path, params, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    res = _ingest("jsonl", f, "--out", tmp_path / "s", "--scale", "overall=5")
    assert res.exit_code == 2 and "error: --scale 'overall=5'" in res.output
    res = _ingest("csv", f, "--out", tmp_path / "s", "--params", params)
    assert res.exit_code == 2 and "unknown format 'csv'" in res.output
    res = _ingest("jsonl", f, "--out", tmp_path / "s", "--params", tmp_path / "none.yaml")
    assert res.exit_code == 2 and "none.yaml: parameters file not found" in res.output


def test_refuses_to_overwrite_a_directory_that_is_not_a_store(tmp_path, params, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep me")
    res = _ingest("jsonl", f, "--out", tmp_path / "home", "--scale", "overall=1:5", "--scale", "fun=0:1")
    assert res.exit_code == 2 and "refusing to overwrite" in res.output
    assert (tmp_path / "home" / "precious.txt").read_text() == "keep me"


def test_critical_validation_failure_stops_and_keeps_old_store(tmp_path, good_records):
    # A dialogue longer than the validation limit can only come from a store built elsewhere:
    # re-ingesting it with a stricter params file must fail validation, not rewrite the store.
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    out = tmp_path / "store"
    assert _ingest("jsonl", f, "--out", out, "--scale", "overall=1:5", "--scale", "fun=0:1").exit_code == 0
    strict = tmp_path / "strict.yaml"
    strict.write_text("ingest:\n  max_text_chars: 5\n")
    before = (out / "dialogues.parquet").read_bytes()
    res = _ingest("parquet", out, "--out", out, "--params", strict)
    assert res.exit_code == 2
    assert "critical expectation(s) failed" in res.output and "turns.text" in res.output and "e.g. d0" in res.output
    assert (out / "dialogues.parquet").read_bytes() == before
    assert "FAILED" in (tmp_path / "store.validation.md").read_text()
    assert json.loads((tmp_path / "store.validation.json").read_text())["success"] is False


def test_data_summary_means_match_arrow(tmp_path, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    out = tmp_path / "store"
    assert _ingest("jsonl", f, "--out", out, "--scale", "overall=1:5", "--scale", "fun=0:1").exit_code == 0
    rows = {r["agent_id"]: r for r in queries.agent_summary(out).to_pylist()}
    d = ExperienceStore.open(out).dialogues.to_pylist()
    for agent in ("bot-a", "bot-b"):
        vals = [r["rating_overall"] for r in d if r["agent_id"] == agent]
        assert rows[agent]["n_dialogues"] == len(vals) == 3
        assert rows[agent]["mean_overall"] == pytest.approx(sum(vals) / len(vals))


def test_data_summary_of_a_non_store_exits_2(tmp_path):
    res = runner.invoke(app, ["data", "summary", str(tmp_path)])
    assert res.exit_code == 2 and "error:" in res.output and "dialogues.parquet" in res.output


# ---- the store's replacement: kills, concurrent ingests, mode (issue 60) -------------------
REPO = Path(__file__).resolve().parents[2]
ENIGMA = [sys.executable, "-c", "from enigma.cli import app; app()"]
SCALES = ("--scale", "overall=1:5", "--scale", "fun=0:1")


def _ingest_process(tmp_path, source, out, at_swap=None) -> subprocess.Popen:
    """``enigma ingest`` of this checkout in a process of its own; ``at_swap`` is the test-only
    hook of store/ingest.py (kill, or wait:<file>) right after the old store left its place."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}")
    env.pop("ENIGMA_TEST_INGEST_AT_SWAP", None)
    if at_swap:
        env["ENIGMA_TEST_INGEST_AT_SWAP"] = at_swap
    return subprocess.Popen(ENIGMA + ["ingest", "jsonl", str(source), "--out", str(out), *SCALES, "--no-progress"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _line_with(stream, words: str) -> str:
    """The first line of ``stream`` holding ``words``; '' if it ends first."""
    for line in stream:
        if words in line:
            return line
    return ""


def _dialogue_ids(out) -> list[str]:
    return sorted(ExperienceStore.open(out).dialogues.column("dialog_id").to_pylist())


def test_a_kill_while_the_store_is_replaced_leaves_a_complete_store(tmp_path, good_records):
    out = tmp_path / "store"
    assert _ingest("jsonl", write_jsonl(tmp_path / "old.jsonl", good_records), "--out", out, *SCALES).exit_code == 0
    new = write_jsonl(tmp_path / "new.jsonl", good_records[:4])
    killed = _ingest_process(tmp_path, new, out, at_swap="kill")
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    # every table opens and agrees with its manifest: the old store or the new, never none
    store = ExperienceStore.open(out)
    assert _dialogue_ids(out) in (["d0", "d1", "d2", "d3", "d4", "d5"], ["d0", "d1", "d2", "d3"])
    assert json.loads((out / "manifest.json").read_text())["n_dialogues"] == store.dialogues.num_rows
    # the next ingest clears what the killed one left beside the store
    assert _ingest("jsonl", new, "--out", out, *SCALES).exit_code == 0
    assert _dialogue_ids(out) == ["d0", "d1", "d2", "d3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl", "old.jsonl", "store"]


def test_an_old_store_left_aside_by_a_kill_is_put_back_by_the_next_ingest(tmp_path, good_records):
    # Where paths cannot be exchanged in one step the old store waits at .store.old while the new
    # one moves in; a kill there leaves it aside, and the next ingest, even one that fails, puts it back.
    out = tmp_path / "store"
    assert _ingest("jsonl", write_jsonl(tmp_path / "old.jsonl", good_records), "--out", out, *SCALES).exit_code == 0
    out.rename(tmp_path / ".store.old")
    res = _ingest("jsonl", tmp_path / "missing.jsonl", "--out", out, *SCALES)
    assert res.exit_code == 2 and "missing.jsonl: no such file" in res.output
    assert _dialogue_ids(out) == ["d0", "d1", "d2", "d3", "d4", "d5"]
    assert not (tmp_path / ".store.old").exists()


@pytest.mark.slow  # two real ingest processes, one waiting on the other; CI runs it
def test_two_ingests_into_one_store_take_turns(tmp_path, good_records):
    out = tmp_path / "store"
    assert _ingest("jsonl", write_jsonl(tmp_path / "old.jsonl", good_records), "--out", out, *SCALES).exit_code == 0
    release = tmp_path / "release"
    first = _ingest_process(tmp_path, write_jsonl(tmp_path / "a.jsonl", good_records[:2]), out, f"wait:{release}")
    second = None
    try:
        assert _line_with(first.stderr, "test: paused at the swap"), first.communicate()
        second = _ingest_process(tmp_path, write_jsonl(tmp_path / "b.jsonl", good_records[:4]), out)
        waiting = _line_with(second.stderr, "waiting:")
        release.touch()
        assert f"another ingest is writing {out}" in waiting
        first_out, first_err = first.communicate(timeout=120)
        second_out, second_err = second.communicate(timeout=120)
    finally:
        release.touch()
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second_err
    assert "wrote" in first_out and "wrote" in second_out
    assert _dialogue_ids(out) == ["d0", "d1", "d2", "d3"]  # the second one's, written last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "old.jsonl", "release", "store"]


def test_the_store_folder_gets_the_users_umask(tmp_path, good_records):
    old = os.umask(0o027)
    try:
        res = _ingest("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), "--out", tmp_path / "store", *SCALES)
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o750


def test_broken_jsonl_links_in_an_input_folder_are_reject_rows(tmp_path, good_records):
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "good.jsonl", good_records)
    (folder / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    out = tmp_path / "store"
    res = _ingest("jsonl", folder, "--out", out, *SCALES)
    assert res.exit_code == 0, res.output
    assert "6 dialogues, 2 agents, 24 turns, 2 rejects" in res.output
    rejects = ExperienceStore.open(out).rejects.to_pylist()
    assert [(r["source_file"], r["record"], r["field"]) for r in rejects] == [
        (str(folder / "dangling.jsonl"), None, None), (str(folder / "loop.jsonl"), None, None)]
    assert "leads to no file: No such file or directory" in rejects[0]["reason"] and "nowhere.jsonl" in rejects[0]["reason"]
    assert "leads to no file: Too many levels of symbolic links" in rejects[1]["reason"]
    # a folder of nothing but broken links: the error names them, not "no files"
    (folder / "good.jsonl").unlink()
    res = _ingest("jsonl", folder, "--out", tmp_path / "other", *SCALES)
    assert res.exit_code == 2 and "no dialogue could be loaded (2 record(s) rejected)" in res.output
    assert "dangling.jsonl:- [-] symbolic link" in res.output


def test_the_warning_for_agents_with_few_dialogues_says_they_have_fewer(tmp_path, good_records):
    params = tmp_path / "params.yaml"
    params.write_text("ingest:\n  min_dialogues_per_agent: 20\n")
    res = _ingest("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), "--out", tmp_path / "store",
                  "--params", params, *SCALES)
    assert res.exit_code == 0, res.output
    assert "warning: agents.n_dialogues: agent has fewer than 20 dialogues (ingest.min_dialogues_per_agent)" in res.output
    assert ">= 20" not in res.output
