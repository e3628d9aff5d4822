"""Small real experience stores and a recording estimator for the evaluation tests
(import as ``tests.evaluation.eval_fixtures``)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

RATINGS = ["enjoy", "fluency"]


def make_store(n_agents: int = 6, per_agent: int = 4, seed: int = 0) -> ExperienceStore:
    """Agent k replies with k+1 words and is rated higher the higher k is (plus noise)."""
    rng = np.random.default_rng(seed)
    dialogues, turns = [], []
    for k in range(n_agents):
        agent = f"agent{k}"
        for j in range(per_agent):
            did = f"{agent}-d{j}"
            enjoy = float(np.clip(0.2 + 0.1 * k + rng.normal(0, 0.03), 0, 1))
            fluency = float(np.clip(0.9 - 0.05 * k + rng.normal(0, 0.03), 0, 1))
            dialogues.append(
                {
                    "dialog_id": did,
                    "agent_id": agent,
                    "source": "test",
                    "n_turns": 4,
                    "rating_enjoy": enjoy,
                    "rating_fluency": fluency,
                    "raw_enjoy": enjoy * 4,
                    "raw_fluency": fluency * 4,
                    "meta": json.dumps({"rater": f"r{j}", "evaluation_results": {"enjoy": enjoy * 4}}),
                }
            )
            for t in range(4):
                role = "user" if t % 2 == 0 else "agent"
                text = f"hello {j} {t}" if role == "user" else " ".join(["word"] * (k + 1))
                turns.append({"dialog_id": did, "turn_index": t, "role": role, "text": text})
    return ExperienceStore(
        pa.Table.from_pylist(dialogues, schema=S.dialogues_schema(RATINGS)),
        pa.Table.from_pylist(turns, schema=S.TURNS_SCHEMA),
    )


def target_actions_for(store: ExperienceStore, words_of: dict[str, int]):
    """A target-action source: agent k answers every logged agent turn of ``store`` (ALL
    dialogues, the held-out agent's own included, so the runner's filter is exercised) with
    words_of[agent] words."""

    def source(agent_id: str, experience: ExperienceStore) -> pa.Table:
        t = store.turns.filter(pa.compute.equal(store.turns.column("role"), "agent"))
        n = t.num_rows
        return pa.table(
            {
                "dialog_id": t.column("dialog_id"),
                "turn_index": t.column("turn_index"),
                "sample_index": pa.array([0] * n, pa.int32()),
                "text": pa.array([" ".join(["word"] * words_of[agent_id])] * n),
            }
        )

    return source


class RecordingMean:
    """A real estimator (each rating's experience mean, shifted by the mean reply length of the
    target actions when it has them) that records everything it was given."""

    def __init__(self, name: str = "recording", regimes=frozenset({Regime.REPLIES_AT_LOGGED_STATES})):
        self.name = name
        self.regimes = frozenset(regimes)
        self.calls: list[dict] = []

    def fingerprint(self) -> str:
        return "recording-mean"

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        self.calls.append(
            {
                "agent_id": target.agent_id,
                "experience_agents": set(experience.agents()),
                "experience_dialogs": set(experience.dialogues.column("dialog_id").to_pylist()),
                "target": target,
            }
        )
        out = {}
        for r in experience.rating_names:
            mean = float(np.mean(experience.ratings(r)))
            if target.target_actions is not None:
                words = np.mean([len(t.split()) for t in target.target_actions.column("text").to_pylist()])
                mean += 0.01 * float(words)
            out[r] = mean
        return EstimateResult(out)
