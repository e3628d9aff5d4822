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
    goal = goal if goal is not None else goal_for(seed)
    customer = Customer(goal, rng(seed, "customer"), noise=customer_noise)
    turns = [Turn("user", customer.opening())]
    action = NO_ACTION
    for k in range(max_agent_turns):
        replies = agent.respond(turns, n=1, seed=mix(seed, "agent", k))
        if len(replies) != 1 or not isinstance(replies[0], str):
            raise ValueError(f"agent {agent!r} returned {replies!r} for n=1 (expected one string)")
        reply = replies[0]
        turns.append(Turn("agent", reply))
        found = read_action(reply)
        if found is not None:
            action = found
            break
        if read_agent(reply).goodbye:
            break
        turns.append(Turn("user", customer.react(reply)))
        if customer.done:
            break
    if closing_exchanges and turns[-1].role == "agent":
        # drawn apart from the customer's stream, so the dialogue up to its end is the same with or without them
        words = rng(seed, "closing")
        for k in range(closing_exchanges):
            turns.append(Turn("user", words.choice(CLOSING_THANKS)))
            replies = agent.respond(turns, n=1, seed=mix(seed, "closing", k))
            if len(replies) != 1 or not isinstance(replies[0], str):
                raise ValueError(f"agent {agent!r} returned {replies!r} for n=1 (expected one string)")
            turns.append(Turn("agent", replies[0]))
    expected = expected_outcome(goal)
    return Rollout(goal, seed, tuple(turns), action, expected, score(goal, action, expected, reward_weights))
