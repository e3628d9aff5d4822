"""Small deterministic agents for the pipeline tests, loaded by spec
(``python:tests.pipeline.pipeline_agents:<name>``). Each answers with a fixed number of words,
so an estimator that reads reply length can tell them apart."""

from __future__ import annotations


class WordsAgent:
    def __init__(self, n_words: int):
        self.n_words = n_words

    def respond(self, history, n=1, seed=None):
        last = history[-1].text.split()[0] if history else "hello"
        reply = " ".join([last] + ["ok"] * (self.n_words - 1))
        return [reply] * n


def words(k: int) -> WordsAgent:
    return WordsAgent(k)


# One factory per agent of the test store (agent ids a1..a5 speak 1..5 words per reply) and
# two newcomers for the nightly registry.
def a1():
    return WordsAgent(1)


def a2():
    return WordsAgent(2)


def a3():
    return WordsAgent(3)


def a4():
    return WordsAgent(4)


def a5():
    return WordsAgent(5)


def newcomer_short():
    return WordsAgent(2)


def newcomer_long():
    return WordsAgent(5)


class FailsOnA2:
    """An estimator that cannot score agent a2 (as a diverged DICE run cannot), to test that
    one failure is reported rather than stopping the stage."""

    name = "fails-on-a2"

    def __init__(self):
        from enigma.contracts import Regime

        self.regimes = frozenset({Regime.NONE})

    def fingerprint(self):
        return "fails-on-a2"

    def estimate(self, experience, target):
        from enigma.contracts import EstimateResult

        if target.agent_id == "a2":
            raise RuntimeError("diverged at step 400")
        return EstimateResult({r: 0.1 * len(experience.agents()) for r in experience.rating_names})
