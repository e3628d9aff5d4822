"""Nothing breaks on an early checkpoint (issue 72, 3): a model that answers with nothing, or with
one token over and over, is sampled and estimated through ``enigma estimate`` as a user scores
checkpoints, with ENIGMA as params.yaml has it (the cached sentence vectors and every feature
block). Its replies are recorded as said, the estimate goes on, and the output says how much of
the sample was degenerate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from enigma.cli import app
from tests.pipeline.conftest import build_store

REPO = Path(__file__).resolve().parents[2]


def stuck_checkpoint(tiny_lm_dir: Path, out: Path, token: str) -> Path:
    """The tiny GPT-2 with its output fixed on one token: greedy decoding says it every step
    (the end token: an empty reply)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, tie_word_embeddings=False)
    t = tok.convert_tokens_to_ids(token)
    assert t is not None and t != tok.unk_token_id, token
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.fill_(1.0)
        model.lm_head.weight.zero_()
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
        assert bad["empty"]["empty"] >= 100 and bad["loop"] == {"replies": 120, "empty": 0, "repeated": 120, "share": 1.0}
        for name in checkpoints:
            e = out["targets"][name]["reward"]["estimate"]
            assert e is not None and out["converged"][name] in (True, False), out["targets"][name]
            assert f"note: {name}: {100 * bad[name]['share']:.1f}% of its 120 sampled replies are degenerate" in output
        seen[how] = bad
    assert seen["onehot"] == seen["default"]  # the same replies (the sample cache), counted the same
