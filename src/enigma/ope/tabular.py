"""A small tabular dialogue MDP whose policy values are known exactly, for checking the DICE
estimator (tests and ``studies/ope_tabular.py``).

A dialogue: the user opens with one of ``n_user`` utterance types, or (with probability
``p_agent_first``) the agent speaks first, which the store shows as a dialogue starting with
the agent. The agent answers with one of ``n_agent`` reply types from its policy, which may
depend on the turn number and the last user utterance. After each agent turn the dialogue
ends with a probability that depends on the reply (always after ``max_turns`` agent turns);
otherwise the user answers, with a distribution that depends on the reply. Two ratings at the
end: ``match`` (share of agent turns whose reply type matches the preceding user type; an
agent-first opening matches reply 0) and ``short`` (1 for one agent turn, 0 for max_turns).

``exact_value`` enumerates every dialogue; ``empirical_ratio`` gives the saddle point of DICE
on a finite log (the product over the history of pooled target-sample frequencies over
observed logged-action frequencies), which a tabular run must reproduce.

``reference_problem()`` fixes one such problem (three behaviour policies in the logs, four
stochastic targets); its targets are agents a user names by spec, e.g.
``python:enigma.ope.tabular:soft``, and ``write_jsonl`` writes its logs in the generic ingest
format, so the whole user's path (ingest, sampling, estimate) can be checked against exact
values.
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from enigma.dialogue import History, Turn
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

RATINGS = ("match", "short")


def user_text(u: int) -> str:
    return f"u{u}"


def agent_text(a: int) -> str:
    return f"a{a}"


@dataclass
class TabularPolicy:
    """``probs[k][u]``: reply distribution at agent turn ``k`` after user type ``u``; the row
    ``u = n_user`` is used when the agent speaks first (only at k = 0)."""

    name: str
    probs: np.ndarray  # [max_turns, n_user + 1, n_agent]

    def dist(self, k: int, u: int) -> np.ndarray:
        return self.probs[k, u]

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        """The Agent protocol: ``n`` replies sampled at the state given by ``history``."""
        k, u = _state_of(history, self.probs.shape[1] - 1)
        rng = np.random.default_rng(seed)
        p = self.dist(k, u)
        return [agent_text(int(a)) for a in rng.choice(len(p), size=n, p=p)]


def _state_of(history: History, n_user: int) -> tuple[int, int]:
    """(agent turns so far, last user type); an opening without a user utterance (empty
    history, or an empty user text as the estimator pads it) is type ``n_user``."""
    k = sum(1 for t in history if t.role == "agent")
    if not history or history[-1].role != "user" or not history[-1].text:
        return k, n_user
    return k, int(history[-1].text[1:])


@dataclass
class TabularDialogueMDP:
    n_user: int = 2
    n_agent: int = 2
    max_turns: int = 3
    p_agent_first: float = 0.25
    seed: int = 0
    first_user: np.ndarray = field(init=False)
    next_user: np.ndarray = field(init=False)  # [n_agent, n_user]
    end_prob: np.ndarray = field(init=False)  # [n_agent]

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.first_user = rng.dirichlet(np.ones(self.n_user) * 2)
        self.next_user = rng.dirichlet(np.ones(self.n_user) * 2, size=self.n_agent)
        self.end_prob = rng.uniform(0.2, 0.6, size=self.n_agent)

    # ---- policies -----------------------------------------------------------------------
    def random_policy(self, name: str, seed: int, concentration: float = 1.0) -> TabularPolicy:
        rng = np.random.default_rng(seed)
        probs = rng.dirichlet(np.ones(self.n_agent) * concentration, size=(self.max_turns, self.n_user + 1))
        return TabularPolicy(name, probs)

    def deterministic_policy(self, name: str, choose) -> TabularPolicy:
        """``choose(k, u) -> a``."""
        probs = np.zeros((self.max_turns, self.n_user + 1, self.n_agent))
        for k in range(self.max_turns):
            for u in range(self.n_user + 1):
                probs[k, u, choose(k, u)] = 1.0
        return TabularPolicy(name, probs)

    # ---- ratings ------------------------------------------------------------------------
    def ratings(self, users: list[int], actions: list[int]) -> dict[str, float]:
        n = len(actions)
        match = np.mean([(a == u) or (u == self.n_user and a == 0) for u, a in zip(users, actions)])
        short = 1.0 - (n - 1) / max(self.max_turns - 1, 1)
        return {"match": float(match), "short": float(short)}

    # ---- exact value by enumeration -----------------------------------------------------
    def exact_value(self, policy: TabularPolicy) -> dict[str, float]:
        total = {r: 0.0 for r in RATINGS}
        first = [(self.n_user, self.p_agent_first)] + [
            (u, (1 - self.p_agent_first) * p) for u, p in enumerate(self.first_user)
        ]

        def walk(users: list[int], actions: list[int], prob: float) -> None:
            k = len(actions)
            u = users[-1]
            for a, pa_ in enumerate(policy.dist(k, u)):
                if pa_ == 0:
                    continue
                p = prob * pa_
                end = 1.0 if k + 1 == self.max_turns else self.end_prob[a]
                for r, v in self.ratings(users, actions + [a]).items():
                    total[r] += p * end * v
                if end < 1.0:
                    for u2, pu in enumerate(self.next_user[a]):
                        walk(users + [u2], actions + [a], p * (1 - end) * pu)

        for u, p in first:
            walk([u], [], p)
        return total

    # ---- sampling logs ------------------------------------------------------------------
    def sample_dialogue(self, policy: TabularPolicy, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        if rng.random() < self.p_agent_first:
            users = [self.n_user]
        else:
            users = [int(rng.choice(self.n_user, p=self.first_user))]
        actions: list[int] = []
        while True:
            a = int(rng.choice(self.n_agent, p=policy.dist(len(actions), users[-1])))
            actions.append(a)
            if len(actions) == self.max_turns or rng.random() < self.end_prob[a]:
                return users, actions
            users.append(int(rng.choice(self.n_user, p=self.next_user[a])))

    def logs(self, behaviours: list[TabularPolicy], n_dialogues: int, seed: int) -> ExperienceStore:
        """``n_dialogues`` dialogues, each from a behaviour policy drawn uniformly."""
        rng = np.random.default_rng(seed)
        dialogues, turns = defaultdict(list), defaultdict(list)
        for i in range(n_dialogues):
            pol = behaviours[int(rng.integers(len(behaviours)))]
            users, actions = self.sample_dialogue(pol, rng)
            did = f"d{i:05d}"
            texts: list[tuple[str, str]] = []
            for u, a in zip(users, actions):
                if u != self.n_user:
                    texts.append(("user", user_text(u)))
                texts.append(("agent", agent_text(a)))
            for j, (role, text) in enumerate(texts):
                turns["dialog_id"].append(did)
                turns["turn_index"].append(j)
                turns["role"].append(role)
                turns["text"].append(text)
            dialogues["dialog_id"].append(did)
            dialogues["agent_id"].append(pol.name)
            dialogues["source"].append("tabular")
            dialogues["n_turns"].append(len(texts))
            for r, v in self.ratings(users, actions).items():
                dialogues[S.RATING_PREFIX + r].append(v)
                dialogues[S.RAW_PREFIX + r].append(v)
            dialogues["meta"].append(None)
        d_schema = S.dialogues_schema(list(RATINGS))
        return ExperienceStore(pa.table(dict(dialogues), schema=d_schema), pa.table(dict(turns), schema=S.TURNS_SCHEMA))


def target_actions(store: ExperienceStore, policy: TabularPolicy, n_samples: int, seed: int) -> pa.Table:
    """Replies of ``policy`` at every logged agent turn, in the sampling table's layout."""
    rows: dict[str, list] = defaultdict(list)
    for j, (did, turns) in enumerate(store.histories().items()):
        for t, turn in enumerate(turns):
            if turn.role != "agent":
                continue
            for s, text in enumerate(policy.respond(turns[:t], n=n_samples, seed=seed * 1_000_003 + j * 101 + t)):
                rows["dialog_id"].append(did)
                rows["turn_index"].append(t)
                rows["sample_index"].append(s)
                rows["text"].append(text)
                rows["error"].append(None)
    return pa.table(
        dict(rows),
        schema=pa.schema([("dialog_id", pa.string()), ("turn_index", pa.int32()), ("sample_index", pa.int32()),
                          ("text", pa.string()), ("error", pa.string())]),
    )


def _history_key(turns: list[Turn]) -> tuple:
    return tuple((t.role, t.text) for t in turns)


def empirical_ratio(store: ExperienceStore, targets: pa.Table) -> dict[tuple[str, int], float]:
    """The DICE saddle point on these logs: at the k-th agent turn of a dialogue,
    prod_{i<=k} pi_hat(a_i | h_i) / mu_hat(a_i | h_i), with mu_hat the logged reply
    frequencies at history h_i and pi_hat the target samples' frequencies pooled over all
    visits of h_i."""
    hist = store.histories()
    logged: dict[tuple, Counter] = defaultdict(Counter)
    sampled: dict[tuple, Counter] = defaultdict(Counter)
    by_turn: dict[tuple[str, int], list[str]] = defaultdict(list)
    for did, t, text in zip(*(targets.column(c).to_pylist() for c in ("dialog_id", "turn_index", "text"))):
        by_turn[(did, t)].append(text)
    for did, turns in hist.items():
        for t, turn in enumerate(turns):
            if turn.role == "agent":
                h = _history_key(turns[:t])
                logged[h][turn.text] += 1
                sampled[h].update(by_turn[(did, t)])
    out: dict[tuple[str, int], float] = {}
    for did, turns in hist.items():
        ratio, k = 1.0, 0
        for t, turn in enumerate(turns):
            if turn.role != "agent":
                continue
            h = _history_key(turns[:t])
            mu = logged[h][turn.text] / sum(logged[h].values())
            pi = sampled[h][turn.text] / sum(sampled[h].values())
            ratio *= pi / mu
            out[(did, k)] = ratio
            k += 1
    return out


def certainty_equivalence_value(store: ExperienceStore, targets: pa.Table) -> dict[str, float]:
    """The post-normalised estimate at the saddle point: sum w r / sum w with w the
    empirical ratio at each dialogue's last agent turn."""
    ratio = empirical_ratio(store, targets)
    last = {}
    for (did, k), w in ratio.items():
        last[did] = w
    ids = store.dialogues.column("dialog_id").to_pylist()
    w = np.array([last[d] for d in ids])
    return {r: float(np.sum(w * np.array(store.ratings(r))) / np.sum(w)) for r in RATINGS}



# ---- the reference problem: exact values a user's run through the CLI must reproduce ----------
@dataclass(frozen=True)
class ReferenceProblem:
    mdp: TabularDialogueMDP
    behaviours: tuple[TabularPolicy, ...]
    targets: dict[str, TabularPolicy]

    def logs(self, n_dialogues: int = 4000, seed: int = 0) -> ExperienceStore:
        return self.mdp.logs(list(self.behaviours), n_dialogues, seed=seed)


@functools.lru_cache(maxsize=1)
def reference_problem() -> ReferenceProblem:
    """Three reply types, up to two agent turns, a quarter of the dialogues opened by the agent
    (one shared empty-history state); three behaviour policies in the logs; four stochastic
    targets, ``steady`` answering 0.4 / 0.4 / 0.2 at every state."""
    mdp = TabularDialogueMDP(n_user=2, n_agent=3, max_turns=2, p_agent_first=0.25, seed=0)
    behaviours = (
        mdp.random_policy("uniform", 0, concentration=1e6),
        mdp.random_policy("b1", 1),
        mdp.random_policy("b2", 2),
    )
    matcher = mdp.deterministic_policy("matcher", lambda k, u: 0 if u == mdp.n_user else u)
    steady = np.broadcast_to(np.array([0.4, 0.4, 0.2]), matcher.probs.shape).copy()
    targets = {
        "soft": mdp.random_policy("soft", 7, concentration=2),
        "soft_matcher": TabularPolicy("soft_matcher", 0.7 * matcher.probs + 0.3 * behaviours[0].probs),
        "rough": mdp.random_policy("rough", 11),
        "steady": TabularPolicy("steady", steady),
    }
    return ReferenceProblem(mdp, behaviours, targets)


# Factories for agent specs (``python:enigma.ope.tabular:<name>``): the reference targets.
def soft() -> TabularPolicy:
    return reference_problem().targets["soft"]


def soft_matcher() -> TabularPolicy:
    return reference_problem().targets["soft_matcher"]


def rough() -> TabularPolicy:
    return reference_problem().targets["rough"]


def steady() -> TabularPolicy:
    return reference_problem().targets["steady"]


# ... and the behaviour policies of the logs (agents uniform, b1, b2 of the store), so each can be
# estimated from the others' logs as a benchmark's held-out agent is.
def uniform() -> TabularPolicy:
    return reference_problem().behaviours[0]


def b1() -> TabularPolicy:
    return reference_problem().behaviours[1]


def b2() -> TabularPolicy:
    return reference_problem().behaviours[2]


def write_jsonl(store: ExperienceStore, path: str | Path) -> Path:
    """The store's dialogues in the generic JSONL ingest format (ratings already on [0, 1]:
    ingest them with ``--scale <rating>=0:1``)."""
    path = Path(path)
    histories = store.histories()
    names = store.rating_names
    ratings = {n: store.ratings(n) for n in names}
    ids = store.dialogues.column("dialog_id").to_pylist()
    agents = store.dialogues.column("agent_id").to_pylist()
    with path.open("w") as f:
        for i, (did, agent) in enumerate(zip(ids, agents)):
            record = {
                "dialog_id": did,
                "agent_id": agent,
                "turns": [{"role": t.role, "text": t.text} for t in histories[did]],
                "ratings": {n: ratings[n][i] for n in names},
            }
            f.write(json.dumps(record) + "\n")
    return path
