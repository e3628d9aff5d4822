"""Small real agents for the tests (importable as ``python:tests.agents.toy_agents:<factory>``)
and a builder for tiny experience stores."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from enigma.agents.errors import AgentCallError
from enigma.agents.examples import EchoAgent  # answers from the last turn and the seed
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore


class CountingAgent(EchoAgent):
    """Counts its calls in-process and, when ENIGMA_TEST_CALL_LOG is set, in a file (one line
    per call) so that calls made by a subprocess can be counted too."""

    calls = 0

    def respond(self, history, n=1, seed=None):
        CountingAgent.calls += 1
        log = os.environ.get("ENIGMA_TEST_CALL_LOG")
        if log:
            with open(log, "a") as f:
                f.write((history[-1].text if history else "<start>") + "\n")
        return super().respond(history, n, seed)


class Killed(BaseException):
    """Stands for the process being stopped: not an Exception, so the sampler does not
    record it as a failed state but stops."""


class CrashAfter(CountingAgent):
    def __init__(self, k: int):
        self.k = k
        self.mine = 0

    def respond(self, history, n=1, seed=None):
        if self.mine >= self.k:
            raise Killed(f"stopped after {self.k} calls")
        self.mine += 1
        return super().respond(history, n, seed)


class FaultyAgent(EchoAgent):
    """Fails on states whose last text contains FAIL, answers white space on EMPTY, and gives one
    reply too few on SHORT."""

    def respond(self, history, n=1, seed=None):
        last = history[-1].text if history else ""
        if "FAIL" in last:
            raise AgentCallError("server answered garbage")
        if "EMPTY" in last:
            return ["   "] * n
        if "SHORT" in last:
            return super().respond(history, n, seed)[: n - 1]
        return super().respond(history, n, seed)


HALF_EMOJI = "here you go \ud83d"  # an emoji cut in half: not Unicode text, no Parquet file holds it


class HalfEmojiAgent(EchoAgent):
    """Answers half an emoji where the last turn asks for an emoji, and echoes otherwise."""

    def respond(self, history, n=1, seed=None):
        if history and "emoji" in history[-1].text:
            return [HALF_EMOJI] * n
        return super().respond(history, n, seed)


def half_emoji():
    return HalfEmojiAgent()


class AlwaysFails:
    def respond(self, history, n=1, seed=None):
        raise ConnectionError("connection refused")


def echo():
    return EchoAgent()


def counting():
    return CountingAgent()


def faulty():
    return FaultyAgent()


def not_an_agent():
    return 42


def tiny_store(n_dialogues: int = 4, agents=("a1", "a2"), turns_per_dialogue: int = 6, texts=None) -> ExperienceStore:
    """Dialogues alternating user/agent (even dialogues opened by the agent)."""
    d_rows, t_rows = [], []
    k = 0
    for i in range(n_dialogues):
        did = f"d{i}"
        agent = agents[i % len(agents)]
        first = "agent" if i % 2 == 0 else "user"
        other = "user" if first == "agent" else "agent"
        for t in range(turns_per_dialogue):
            role = first if t % 2 == 0 else other
            text = texts[k] if texts and k < len(texts) else f"{role} says {k} in {did}"
            k += 1
            t_rows.append({"dialog_id": did, "turn_index": t, "role": role, "text": text})
        d_rows.append(
            {"dialog_id": did, "agent_id": agent, "source": "test", "n_turns": turns_per_dialogue,
             "rating_q": (i % 4) / 3, "raw_q": float(i % 4), "meta": None}
        )
    dialogues = pa.Table.from_pylist(d_rows, schema=S.dialogues_schema(["q"]))
    turns = pa.Table.from_pylist(t_rows, schema=S.TURNS_SCHEMA)
    return ExperienceStore(dialogues, turns)


def write_tiny_store(path: Path, **kw) -> Path:
    return tiny_store(**kw).write(path)


class SlowCountingAgent(CountingAgent):
    """Takes a little while per call, so a test can stop a run midway."""

    def respond(self, history, n=1, seed=None):
        import time

        time.sleep(float(os.environ.get("ENIGMA_TEST_DELAY", "0.05")))
        return super().respond(history, n, seed)


def slow_counting():
    return SlowCountingAgent()


def tiny_store_needs_args(k):
    return EchoAgent()


def always_fails():
    return AlwaysFails()


class PreparingAgent(EchoAgent):
    """Records the batch of states handed to ``prepare`` before the per-state calls."""

    def __init__(self):
        self.prepared: list = []
        self.calls = 0

    def prepare(self, histories):
        self.prepared.append([tuple(h) for h in histories])

    def respond(self, history, n=1, seed=None):
        self.calls += 1
        return super().respond(history, n, seed)


class DeterministicCounting(CountingAgent):
    """Declares itself deterministic (its reply depends on the history alone), so the sampler
    asks it once per distinct state."""

    deterministic = True

    def respond(self, history, n=1, seed=None):
        return [r.split(" [")[0] for r in super().respond(history, n, seed)]


def deterministic_counting():
    return DeterministicCounting()


# The text of the agent's exception, which ``enigma serve`` must keep to its own log.
AGENT_SECRET = "connection string postgres://admin:hunter2@db.internal/prod"


class MisbehavingAgent(EchoAgent):
    """What a served agent can do wrong, chosen by the last text: HANG sleeps
    ENIGMA_TEST_HANG_S seconds (default 30), RAISE raises an exception carrying AGENT_SECRET,
    NONSTR answers numbers, SHORT one reply too few, NOTLIST a bare string, SURROGATE half an
    emoji (a lone surrogate, which no JSON answer can carry)."""

    def respond(self, history, n=1, seed=None):
        import time

        last = history[-1].text if history else ""
        if "HANG" in last:
            time.sleep(float(os.environ.get("ENIGMA_TEST_HANG_S", "30")))
        if "RAISE" in last:
            raise RuntimeError(AGENT_SECRET)
        if "NONSTR" in last:
            return list(range(n))
        if "SHORT" in last:
            return super().respond(history, n, seed)[: n - 1]
        if "NOTLIST" in last:
            return "just one string"
        if "SURROGATE" in last:
            return [HALF_EMOJI] * n
        return super().respond(history, n, seed)


def misbehaving():
    return MisbehavingAgent()
