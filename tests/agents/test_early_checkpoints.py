"""Nothing breaks on an early checkpoint (issue 72, 3): a model that answers with nothing, or with
one token over and over, is sampled and estimated through ``enigma estimate`` as a user scores
checkpoints, with ENIGMA as params.yaml has it (the cached sentence vectors and every feature
block). Its replies are recorded as said, the estimate goes on, and the output says how much of
the sample was degenerate."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.cli import app
from tests.pipeline.conftest import build_store

REPO = Path(__file__).resolve().parents[2]


def stuck_checkpoint(tiny_lm_dir: Path, out: Path, *tokens: str) -> Path:
    """The tiny GPT-2 with its output fixed on one token: greedy decoding says it every step
    (the end token: an empty reply). With several tokens, each is equally likely at every step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, tie_word_embeddings=False)
    ids = [tok.convert_tokens_to_ids(token) for token in tokens]
    assert all(t is not None and t != tok.unk_token_id for t in ids), tokens
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.fill_(1.0)
        model.lm_head.weight.zero_()
        for t in ids:  # a logit of the hidden size (~64) above every other token's 0
            model.lm_head.weight[t].fill_(1.0)
    tok.save_pretrained(out)
    model.save_pretrained(out)
    return out


def _estimate(tmp_path: Path, checkpoints: dict[str, Path], name: str, **dice) -> tuple[int, str, dict]:
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["sample"]["agents"]["hf"].update(do_sample=False, max_new_tokens=8)
    params["estimators"]["enigma"]["dice"].update(interval_resamples=20, **dice)
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(params))
    targets = [a for n, ckpt in checkpoints.items() for a in ("-t", f"{n}=hf:{ckpt}")]
    r = CliRunner().invoke(app, ["estimate", "-e", str(tmp_path / "store"), *targets, "-o", str(tmp_path / name),
                                 "--params", str(tmp_path / f"{name}.yaml"), "--cache-dir", str(tmp_path / "cache"), "-q"])
    out = json.loads((tmp_path / name / "estimates.json").read_text()) if (tmp_path / name / "estimates.json").is_file() else {}
    return r.exit_code, r.output, out


@pytest.mark.slow  # the real sentence encoder and four ENIGMA runs (about a minute on 2 cores)
def test_empty_and_repeating_checkpoints_are_estimated_and_flagged(tiny_lm_dir, tmp_path):
    """One-hot features and ENIGMA as params.yaml has it (the sentence vectors and every feature
    block read the empty and repeated texts). Whether the solver converges on replies that no
    logged agent ever gave is the estimator's own business: where it does not, the estimate is
    flagged (exit 3, ``converged: false``), as for any agent; nothing fails on the way."""
    checkpoints = {"empty": stuck_checkpoint(tiny_lm_dir, tmp_path / "ckpt-empty", "<|end|>"),
                   "loop": stuck_checkpoint(tiny_lm_dir, tmp_path / "ckpt-loop", "\u0120a")}
    build_store(per_agent=12).write(tmp_path / "store")
    seen = {}
    for how, dice in {"onehot": {"encoder": "onehot"}, "default": {}}.items():
        code, output, out = _estimate(tmp_path, checkpoints, how, **dice)
        assert code in (0, 3) and "Traceback" not in output, output
        bad = out["degenerate"]
        assert bad["empty"]["replies"] == bad["loop"]["replies"] == 120  # every logged agent turn's reply, none failed
        assert bad["empty"]["empty"] >= 100 and bad["empty"]["at_token_limit"] == 0
        assert bad["loop"] == {"replies": 120, "empty": 0, "repeated": 120, "share": 1.0, "at_token_limit": 120}
        for name in checkpoints:
            e = out["targets"][name]["reward"]["estimate"]
            assert e is not None and out["converged"][name] in (True, False), out["targets"][name]
            assert f"note: {name}: {100 * bad[name]['share']:.1f}% of its 120 sampled replies are degenerate" in output
        assert "120 of its 120 sampled replies were cut at the length limit" in output
        seen[how] = bad
    assert seen["onehot"] == seen["default"]  # the same replies (the sample cache), counted the same


def test_replies_cut_at_the_length_limit_are_recorded(tiny_lm_dir, tmp_path):
    """`enigma sample hf:<dir>` records, per reply, whether the model ended it or it was cut at
    max_new_tokens: a model that ends at once is never cut, one that repeats a word always is, and
    one that draws the word or the end at each step is cut exactly where it said the word three
    times, whichever batch the reply was in. A python agent's table has no such column (its
    targets are as before)."""
    from typer.testing import CliRunner as Runner

    from tests.agents import toy_agents as T

    store = T.write_tiny_store(tmp_path / "store", n_dialogues=8, turns_per_dialogue=4)
    (tmp_path / "params.yaml").write_text(
        "sample:\n  n_samples: 2\n  cache_dir: " + json.dumps(str(tmp_path / "cache"))
        + "\n  agents:\n    hf: {max_new_tokens: 3, batch_size: 5}\n")

    def sample(spec: str, name: str):
        r = Runner().invoke(app, ["sample", str(store), spec, "--out", str(tmp_path / f"{name}.parquet"),
                                  "--params", str(tmp_path / "params.yaml"), "-q"])
        assert r.exit_code == 0, r.output
        return pq.read_table(tmp_path / f"{name}.parquet")

    ends = sample(f"hf:{stuck_checkpoint(tiny_lm_dir, tmp_path / 'ends', '<|end|>')}", "ends")
    loops = sample(f"hf:{stuck_checkpoint(tiny_lm_dir, tmp_path / 'loops', chr(0x120) + 'a')}", "loops")
    assert ends.num_rows == loops.num_rows == 32
    assert set(ends.column("at_token_limit").to_pylist()) == {False} and set(ends.column("text").to_pylist()) == {""}
    assert set(loops.column("at_token_limit").to_pylist()) == {True}
    assert set(loops.column("text").to_pylist()) == {"a a a"}
    either = sample(f"hf:{stuck_checkpoint(tiny_lm_dir, tmp_path / 'either', '<|end|>', chr(0x120) + 'a')}", "either")
    cut, texts = either.column("at_token_limit").to_pylist(), either.column("text").to_pylist()
    assert 0 < sum(cut) < len(cut) and len(set(texts)) > 1
    assert all(c == (t == "a a a") for c, t in zip(cut, texts)), list(zip(cut, texts))
    assert "at_token_limit" not in sample("python:tests.agents.toy_agents:echo", "echo").column_names
