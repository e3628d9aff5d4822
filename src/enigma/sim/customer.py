"""The simulated customer: plays the human side of an airline dialogue from a goal.

It opens with its intent (sometimes volunteering its name, route or dates), answers what the
agent asks, checks every flight the agent proposes against its goal (route, exact dates and
each constraint) and says which part is wrong, confirms or refuses a cancellation, and gives
up after too many bad proposals. It reads only the agent's text (``language.read_agent``);
a proposed flight is looked up by its number, as a customer would read a fare on screen.

Utterances are drawn from several phrasings per act with the customer's own random stream,
plus small noise (fillers, lower case, missing final punctuation) that keeps the content.
"""

from __future__ import annotations

import random

from enigma.sim import world as W
from enigma.sim.goals import Goal, meets_preferences
from enigma.sim.language import fmt_date, read_agent

PATIENCE = 4  # bad proposals (or unreadable turns) before the customer leaves

_OPEN = {
    "book": (
        "Hi, I'd like to book a flight.",
        "Hello, I need a ticket for an upcoming trip.",
        "Hey there, I'm looking for a flight.",
        "Good morning. Could you help me book a trip?",
        "Hi! I want to plan a trip and need a flight.",
    ),
    "change": (
        "Hi, I need to change my reservation.",
        "Hello, I'd like to modify my existing booking.",
        "Hey, can you help me change my flight?",
        "Good afternoon. I have to reschedule my trip.",
        "Hi, I need to move my flight to different dates.",
    ),
    "cancel": (
        "Hi, I want to cancel my trip.",
        "Hello, please cancel my reservation.",
        "I won't be able to travel after all, I need to cancel my booking.",
        "Hey, I'd like to cancel a flight I booked.",
    ),
}
_NAME = ("My name is {n}.", "It's {n}.", "{n}.", "Sure, this is {n}.", "The name is {n}.", "I'm {n}.")
_ROUTE = (
    "I'm flying from {o} to {d}.",
    "From {o} to {d}.",
    "{o} to {d}, please.",
    "I'll be leaving from {o} and heading to {d}.",
    "I need to get from {o} to {d}.",
    "Departing {o}, going to {d}.",
)
_DATES = (
    "I'd like to leave on {a} and come back on {b}.",
    "Leaving {a}, returning {b}.",
    "Departing on {a}, back on {b}.",
    "I want to fly out on {a} and return on {b}.",
    "Out on {a} and back {b}.",
)
_ACCEPT = (
    "Yes, that works for me.",
    "Perfect, go ahead.",
    "Sounds good, please do.",
    "That's fine, let's do it.",
    "Great, I'll take it.",
    "Yeah, that one is good.",
)
_CONFIRM_CANCEL = ("Yes, please.", "Yes, go ahead.", "Yeah, that's the one.", "Sure, please do.")
_NOT_CANCEL = {
    "book": "No, please don't do that, I need a new flight.",
    "change": "No, don't do that, I need to change my flight.",
}
_NO_PREFS = ("No particular preferences.", "Anything works for me.", "I'm flexible, nothing special.", "Doesn't matter to me.")
_WRONG_INTENT = {
    "cancel": ("I don't need a flight, I just want to cancel my reservation.", "Sorry, no, I want to cancel my booking."),
    "change": ("No, I need to change my existing flight.",),
    "book": ("No, I need a new flight. I want to book a ticket.",),
}
_HUH = ("Sorry, I'm not sure what you mean.", "Okay.", "Alright.", "Hmm, okay.")
_GIVE_UP = ("Never mind, I'll look elsewhere. Bye.", "This isn't working, forget it. Goodbye.")


def _pref_phrases(goal: Goal, r: random.Random) -> list[str]:
    out = []
    if goal.dep_window:
        out.append(r.choice(("I'd like to leave in the {w}", "a {w} departure", "departing in the {w}")).format(w=goal.dep_window))
    if goal.ret_window:
        out.append(r.choice(("coming back in the {w}", "a {w} return", "returning in the {w}")).format(w=goal.ret_window))
    if goal.cabin:
        out.append(r.choice(("{c} class", "I want to fly {c}", "{c}, please")).format(c=goal.cabin))
    if goal.max_price is not None:
        out.append(r.choice(("my budget is ${p}", "nothing over ${p}", "I can spend at most ${p}")).format(p=goal.max_price))
    if goal.max_connections == 0:
        out.append(r.choice(("nonstop only", "I need a direct flight", "no connections")))
    elif goal.max_connections == 1:
        out.append(r.choice(("at most one stop", "no more than one connection")))
    if goal.normal_airline_only:
        out.append(r.choice(("no budget airlines", "I'd rather not fly a low-cost carrier")))
    return out


class Customer:
    """One customer with one goal. ``opening()`` then ``react(agent_text)`` per agent turn;
    ``done`` turns true when the customer has left."""

    def __init__(self, goal: Goal, r: random.Random, noise: float = 0.15) -> None:
        self.goal = goal
        self.r = r
        self.noise = noise
        self.strikes = 0
        self.done = False

    # ---- phrasing helpers -------------------------------------------------------------------
    def _city(self, code: str) -> str:
        return W.AIRPORTS[code]

    def _route(self) -> str:
        g = self.goal
        return self.r.choice(_ROUTE).format(o=self._city(g.origin), d=self._city(g.destination))

    def _dates(self) -> str:
        g = self.goal
        form = self.r.randrange(4)
        a, b = fmt_date(g.month, g.dep_day, form), fmt_date(g.month, g.ret_day, form)
        return self.r.choice(_DATES).format(a=a, b=b)

    def _name(self) -> str:
        return self.r.choice(_NAME).format(n=self.goal.name)

    def _prefs(self) -> str:
        phrases = _pref_phrases(self.goal, self.r)
        # People forget to mention things; the agent finds out when a proposal misses them.
        phrases = [p for p in phrases if self.r.random() > 0.12]
        if not phrases:
            return self.r.choice(_NO_PREFS)
        text = ", ".join(phrases[:-1]) + (" and " if len(phrases) > 1 else "") + phrases[-1]
        return text[0].upper() + text[1:] + "."

    def _noisy(self, text: str) -> str:
        r = self.r
        if r.random() < self.noise:
            text = r.choice(("Um, ", "Well, ", "Oh, ", "So ")) + text[0].lower() + text[1:]
        if r.random() < self.noise:
            text = text.lower()
        if r.random() < self.noise and text[-1] in ".!":
            text = text[:-1]
        return text

    # ---- acts --------------------------------------------------------------------------------
    def opening(self) -> str:
        g, r = self.goal, self.r
        parts = [r.choice(_OPEN[g.intent])]
        if r.random() < 0.3:
            parts.append(self._name())
        if g.intent != "cancel":
            if r.random() < 0.35:
                parts.append(self._route())
            if r.random() < 0.2:
                parts.append(self._dates())
        return self._noisy(" ".join(parts))

    def react(self, agent_text: str) -> str:
        facts = read_agent(agent_text)
        g, r = self.goal, self.r
        if facts.proposal is not None:
            return self._noisy(self._judge(facts.proposal))
        if "confirm_cancel" in facts.asks:
            if g.intent == "cancel":
                return self._noisy(r.choice(_CONFIRM_CANCEL))
            return self._noisy(_NOT_CANCEL[g.intent])
        parts = []
        if "intent" in facts.asks:
            parts.append(r.choice(_OPEN[g.intent]))
        if "name" in facts.asks:
            parts.append(self._name())
        trip = facts.asks & {"route", "dates", "prefs"}
        if trip and g.intent == "cancel":
            parts.append(r.choice(_WRONG_INTENT["cancel"]))
        else:
            if "route" in facts.asks:
                parts.append(self._route())
            if "dates" in facts.asks:
                parts.append(self._dates())
            if "prefs" in facts.asks:
                parts.append(self._prefs())
        if not parts:
            self.strikes += 1
            if self.strikes >= PATIENCE:
                self.done = True
                return r.choice(_GIVE_UP)
            return self._noisy(r.choice(_HUH))
        return self._noisy(" ".join(parts))

    def _judge(self, number: int) -> str:
        g, r = self.goal, self.r
        f = W.flight_by_number(number)
        complaint = None
        if g.intent == "cancel":
            complaint = r.choice(_WRONG_INTENT["cancel"])
        elif f is None:
            complaint = "Sorry, I can't find that flight number. Could you check it?"
        elif (f.origin, f.destination) != (g.origin, g.destination):
            wrong = f.origin if f.origin != g.origin else f.destination
            complaint = (
                f"No, I'm flying from {self._city(g.origin)} to {self._city(g.destination)}, "
                f"not {self._city(wrong)}."
            )
        elif (f.dep_month, f.dep_day, f.ret_day) != (g.month, g.dep_day, g.ret_day):
            form = r.randrange(4)
            complaint = (
                f"No, those aren't my dates. I'm leaving on {fmt_date(g.month, g.dep_day, form)} "
                f"and coming back on {fmt_date(g.month, g.ret_day, form)}."
            )
        else:
            complaint = self._preference_complaint(f)
        if complaint is None:
            return r.choice(_ACCEPT)
        self.strikes += 1
        if self.strikes >= PATIENCE:
            self.done = True
            return r.choice(_GIVE_UP)
        return complaint

    def _preference_complaint(self, f: W.Flight) -> str | None:
        g, r = self.goal, self.r
        prefs = g.constraints
        if meets_preferences(prefs, f):
            return None
        opener = r.choice(("No, ", "Hmm no, ", "Sorry, but "))
        if g.dep_window and W.time_window_of(f.dep_hour) != g.dep_window:
            return opener + f"I need to leave in the {g.dep_window}."
        if g.ret_window and W.time_window_of(f.ret_hour) != g.ret_window:
            return opener + f"I'd like to come back in the {g.ret_window}."
        if g.cabin and f.cabin != g.cabin:
            return opener + f"I want {g.cabin} class."
        if g.max_price is not None and f.price > g.max_price:
            return opener + f"that's too expensive, my budget is ${g.max_price}."
        if g.max_connections is not None and f.connections > g.max_connections:
            return opener + ("I need a nonstop flight." if g.max_connections == 0 else "I can do at most one stop.")
        return opener + "I'd rather not fly a low-cost carrier."

