"""Playing any ``Agent`` against the simulated customer and scoring the result.

The customer speaks first; the agent and the customer then alternate until the agent's turn
carries a final action tag (``language.read_action``), the agent says goodbye without one,
the customer leaves, or the agent has had ``max_agent_turns`` turns. A dialogue without an
action scores as the action ``none`` (no name, no flight, no status).

Works with any object that has ``respond(history, n, seed)``: the simulator's sellers, an
LLM behind the HTTP client, a transcript stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass

from enigma.contracts import Agent
from enigma.dialogue import Turn
from enigma.sim.config import MAX_AGENT_TURNS
from enigma.sim.customer import Customer
from enigma.sim.goals import Goal, Outcome, expected_outcome, sample_goal
from enigma.sim.language import CLOSING_THANKS, read_action, read_agent
from enigma.sim.rng import mix, rng
from enigma.sim.scoring import AIRDIALOGUE_WEIGHTS, NO_ACTION, Action, score


@dataclass(frozen=True)
class Rollout:
    goal: Goal
    seed: int
    turns: tuple[Turn, ...]
    action: Action
    expected: Outcome
    scores: dict[str, float]

    @property
    def n_agent_turns(self) -> int:
        return sum(t.role == "agent" for t in self.turns)


def goal_for(seed: int) -> Goal:
    """The customer goal of the dialogue with this seed."""
    return sample_goal(rng(seed, "goal"))


class Dialogue:
    """One dialogue in play, as ``rollout`` plays it: ``ask()`` gives the history and seed of the
    agent's next call (None once the dialogue is over) and ``hear(reply)`` takes its reply. A driver
    may play many at once (``rollouts``): each dialogue is the same as played alone."""

    def __init__(self, seed: int, goal: Goal | None = None, max_agent_turns: int = MAX_AGENT_TURNS,
                 customer_noise: float = 0.15, closing_exchanges: int = 0) -> None:  # fmt: skip
        self.seed = seed
        self.goal = goal if goal is not None else goal_for(seed)
        self.customer = Customer(self.goal, rng(seed, "customer"), noise=customer_noise)
        self.turns = [Turn("user", self.customer.opening())]
        self.action = NO_ACTION
        self.max_agent_turns, self.closing_exchanges = max_agent_turns, closing_exchanges
        self.k = 0  # agent turns of the dialogue proper
        self.closing: int | None = None  # closing exchanges answered (None: the dialogue proper goes on)
        self._words = None
        if max_agent_turns <= 0:
            self._end()

    def _end(self) -> None:
        # after the agent ends the dialogue, the closing exchanges (drawn apart from the customer's
        # stream, so the dialogue up to its end is the same with or without them)
        self.closing = 0
        if not (self.closing_exchanges and self.turns[-1].role == "agent"):
            self.closing = self.closing_exchanges
        else:
            self._words = rng(self.seed, "closing")

    def ask(self) -> tuple[list[Turn], int] | None:
        if self.closing is None:
            return self.turns, mix(self.seed, "agent", self.k)
        if self.closing >= self.closing_exchanges:
            return None
        self.turns.append(Turn("user", self._words.choice(CLOSING_THANKS)))
        return self.turns, mix(self.seed, "closing", self.closing)

    def hear(self, replies: object) -> None:
        if not isinstance(replies, (list, tuple)) or len(replies) != 1 or not isinstance(replies[0], str):
            raise ValueError(f"returned {replies!r} for n=1 (expected one string)")
        reply = replies[0]
        self.turns.append(Turn("agent", reply))
        if self.closing is not None:
            self.closing += 1
            return
        self.k += 1
        found = read_action(reply)
        if found is not None:
            self.action = found
            return self._end()
        if read_agent(reply).goodbye:
            return self._end()
        self.turns.append(Turn("user", self.customer.react(reply)))
        if self.customer.done or self.k >= self.max_agent_turns:
            self._end()

    def result(self, reward_weights: dict[str, float] = AIRDIALOGUE_WEIGHTS) -> Rollout:
        expected = expected_outcome(self.goal)
        return Rollout(self.goal, self.seed, tuple(self.turns), self.action, expected,
                       score(self.goal, self.action, expected, reward_weights))


def rollout(agent: Agent, seed: int, goal: Goal | None = None, max_agent_turns: int = MAX_AGENT_TURNS,
            customer_noise: float = 0.15, reward_weights: dict[str, float] = AIRDIALOGUE_WEIGHTS,
            closing_exchanges: int = 0) -> Rollout:  # fmt: skip
    """One dialogue of ``agent`` with a customer. ``seed`` fixes the goal (unless given), the
    customer's wording and the seeds passed to the agent, so the same seed replays exactly.
    ``reward_weights``: the preset's mix of name, flight and status (``seller_presets.REWARD_WEIGHTS``).
    ``closing_exchanges``: after the agent ends the dialogue (an action or a goodbye) the customer
    thanks it that many times and the agent answers each (the agent's own words): turns that decide
    nothing, so the rating comes that many exchanges after the turn that decided it, as in long
    chats rated at their end. They count towards no turn limit and leave the scores as they were."""
    d = Dialogue(seed, goal, max_agent_turns, customer_noise, closing_exchanges)
    while (call := d.ask()) is not None:
        history, agent_seed = call
        try:
            d.hear(agent.respond(history, n=1, seed=agent_seed))
        except ValueError as exc:
            raise ValueError(f"agent {agent!r} {exc}") from None
    return d.result(reward_weights)


def rollouts(agent: Agent, seeds: list[int], max_agent_turns: int = MAX_AGENT_TURNS, customer_noise: float = 0.15,
             reward_weights: dict[str, float] = AIRDIALOGUE_WEIGHTS, closing_exchanges: int = 0) -> list[Rollout]:
    """``rollout(agent, seed)`` for every seed, played side by side: an agent with ``respond_batch``
    (an ``hf:`` checkpoint) answers every dialogue's turn in one call, batched as it batches. Each
    reply is drawn from its own seed, so every dialogue is the one ``rollout`` plays."""
    plays = [Dialogue(s, None, max_agent_turns, customer_noise, closing_exchanges) for s in seeds]
    batch = getattr(agent, "respond_batch", None)
    while True:
        calls = [(d, c) for d in plays if (c := d.ask()) is not None]
        if not calls:
            break
        if batch is not None:
            replies = batch([list(h) for _, (h, _) in calls], 1, [s for _, (_, s) in calls])
        else:
            replies = [agent.respond(h, n=1, seed=s) for _, (h, s) in calls]
        for (d, _), r in zip(calls, replies):
            try:
                d.hear(r)
            except ValueError as exc:
                raise ValueError(f"agent {agent!r} {exc}") from None
    return [d.result(reward_weights) for d in plays]
