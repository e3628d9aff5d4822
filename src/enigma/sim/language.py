"""Reading the dialogue text: what a customer utterance says, what an agent utterance asks or
proposes, and the agent's final action.

Both sides of the simulator act on text alone. Sellers read customer turns (slots,
preferences, yes/no) and earlier agent turns (what was already asked or proposed, by them or
by whichever agent produced the logged dialogue); the customer reads agent turns. The readers
are cached by text because a seller rereads the whole history at every turn.

The final action is the one structured piece, as in AirDialogue where the agent emits its
action apart from its words: a tag at the end of the agent's last turn,
``[action: <status> | flight: <number or none> | name: <name>]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from enigma.sim import world as W
from enigma.sim.scoring import ACTION_STATUSES, Action

_CACHE = 1 << 16

# ---------------------------------------------------------------------------------------------
# Formatting shared by both sides


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def fmt_date(month: int, day: int, form: int = 0) -> str:
    m = W.MONTHS[month - 1]
    return (f"{m} {day}", f"{m} {ordinal(day)}", f"the {ordinal(day)} of {m}", f"{month}/{day}")[form % 4]


def fmt_hour(hour: int, form: int = 0) -> str:
    if form % 2:
        return f"{hour:02d}:00"
    h12 = hour % 12 or 12
    return f"{h12} {'am' if hour < 12 else 'pm'}"


def fmt_action(status: str, flight: int | None, name: str) -> str:
    return f"[action: {status} | flight: {flight if flight is not None else 'none'} | name: {name}]"


# ---------------------------------------------------------------------------------------------
# The agent's final action

_ACTION_RE = re.compile(r"\[action:\s*([a-z_]+)\s*\|\s*flight:\s*(\d+|none)\s*\|\s*name:\s*([^\]]*)\]", re.I)


@lru_cache(maxsize=_CACHE)
def read_action(text: str) -> Action | None:
    """The action tag in an agent turn, or None if it has none. A tag with an unknown status
    counts as an action that does nothing (status ``none``): the agent did end the dialogue."""
    m = _ACTION_RE.search(text)
    if m is None:
        return None
    status = m.group(1).lower()
    flight = None if m.group(2).lower() == "none" else int(m.group(2))
    if status not in ACTION_STATUSES:
        return Action("none", flight, m.group(3).strip())
    return Action(status, flight, m.group(3).strip())


# ---------------------------------------------------------------------------------------------
# Customer utterances

_FILLERS = re.compile(r"^(?:(?:um|uh|well|oh|hmm|so|ok|okay),?\s+)+", re.I)
_ACCEPT = re.compile(
    r"^(?:yes|yeah|yep|sure|perfect|great|sounds good|that works|that's fine|fine|go ahead|"
    r"let's do it|please do|absolutely|excellent)\b"
)
_REJECT = re.compile(r"^(?:no\b|nope|not quite|that won't work|that doesn't work|hmm no|sorry,? (?:no|but))")
_INTENT_PATTERNS = (
    ("cancel", re.compile(r"\bcancel")),
    ("change", re.compile(r"\b(?:change|modify|move) my\b|\breschedule\b|\bchange (?:a|the|an existing)\b")),
    ("book", re.compile(r"\bbook(?:ing)? (?:a|me a|two|some)\b|\bbuy a ticket|\bnew ticket\b|\bneed a (?:flight|ticket)\b|"
                        r"\blooking for a flight\b|\bplan a trip\b|\breserve a (?:seat|flight)\b|\bneed a new flight\b")),
)  # fmt: skip
_CITY_RE = re.compile(r"\b(" + "|".join(sorted((re.escape(c) for c in W.CITY_TO_CODE), key=len, reverse=True)) + r")\b")
_ORIGIN_CUE = re.compile(r"(?:from|out of|leaving|departing|depart|origin is|starting in|fly out of)\s+$")
_DEST_CUE = re.compile(r"(?:to|into|heading|going|arriving in|arrive in|destination is|bound for|visiting)\s+$")
_NOT_CUE = re.compile(r"\bnot\s+$")
_MONTH_ALT = "|".join(sorted(W.MONTH_INDEX, key=len, reverse=True))
_DATE_RES = (
    re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b"),  # March 14(th)
    re.compile(rf"\b(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+of\s+({_MONTH_ALT})\b"),  # (the) 14th of March
    re.compile(r"(?<![\d$])\b(\d{1,2})/(\d{1,2})\b"),  # 3/14
    re.compile(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+of)"),  # the 19th
)
_RET_CUE = re.compile(r"(?:return|returning|back|until|till|through|home on|coming home)\b[^.;!?]*$")
_DEP_CUE = re.compile(r"(?:leave|leaving|depart|departing|out on|outbound|fly out|go on|going on)\b[^.;!?]*$")
_WINDOW_RE = re.compile(r"\b(morning|afternoon|evening)\b")
_RETURN_WORDS = re.compile(r"\b(?:return|returning|back|coming home|way home)\b")
_PRICE_RE = re.compile(r"\$\s?(\d[\d,]*)|\b(\d[\d,]*)\s*(?:dollars|bucks|usd)\b")
_NONSTOP_RE = re.compile(r"\bnon-?stop\b|\bdirect flight|\bno (?:stops|connections|layovers)\b")
_ONE_STOP_RE = re.compile(r"\b(?:at most|no more than|max(?:imum)?(?: of)?|up to)\s+(?:one|1)\s+(?:stop|connection|layover)|"
                          r"\b(?:one|1) (?:stop|connection|layover) (?:at most|max)")  # fmt: skip
_NORMAL_AIRLINE_RE = re.compile(r"\b(?:no|not|avoid|rather not fly|never fly) (?:a |any )?(?:budget|low-cost|low cost|cheap) "
                                r"(?:airline|carrier)s?|\bfull-service\b|\bmajor airline")  # fmt: skip
_GREETING_RE = re.compile(r"\bgood (?:morning|afternoon|evening)\b")
_NO_PREFS_RE = re.compile(r"\bno (?:particular |special |real )?(?:preferences?|requirements|constraints)\b|"
                          r"\banything (?:works|is fine)\b|\bdoesn't matter\b|\bi'm flexible\b|\bnothing special\b")  # fmt: skip


@dataclass(frozen=True)
class CustomerFacts:
    """What one customer utterance states. Dates are (month or None, day)."""

    intent: str | None = None
    name: str | None = None
    origin: str | None = None
    destination: str | None = None
    dep: tuple[int | None, int] | None = None
    ret: tuple[int | None, int] | None = None
    prefs: tuple[tuple[str, object], ...] = ()
    no_prefs: bool = False
    accept: bool = False
    reject: bool = False


def _find_name(words: list[str]) -> str | None:
    for a, b in zip(words, words[1:]):
        if a in W.FIRST_NAME_SET and b in W.LAST_NAME_SET:
            return f"{a.capitalize()} {b.capitalize()}"
    return None


def _cities(t: str) -> tuple[str | None, str | None]:
    origin = dest = None
    unlabelled = []
    for m in _CITY_RE.finditer(t):
        before = t[max(0, m.start() - 20) : m.start()]
        code = W.CITY_TO_CODE[m.group(1)]
        if _NOT_CUE.search(before):
            continue
        if _ORIGIN_CUE.search(before):
            origin = code
        elif _DEST_CUE.search(before):
            dest = code
        else:
            unlabelled.append(code)
    # "Boston to Denver": the unlabelled city before a destination is the origin.
    for code in unlabelled:
        if origin is None and code != dest:
            origin = code
        elif dest is None and code != origin:
            dest = code
    return origin, dest


def _dates(t: str) -> tuple[tuple[int | None, int] | None, tuple[int | None, int] | None]:
    found: list[tuple[int, int | None, int]] = []  # (position, month, day)
    taken: list[tuple[int, int]] = []
    for k, rx in enumerate(_DATE_RES):
        for m in rx.finditer(t):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            if k == 0:
                month, day = W.MONTH_INDEX[m.group(1)], int(m.group(2))
            elif k == 1:
                month, day = W.MONTH_INDEX[m.group(2)], int(m.group(1))
            elif k == 2:
                month, day = int(m.group(1)), int(m.group(2))
            else:
                month, day = None, int(m.group(1))
            if not (1 <= day <= 31) or (month is not None and not 1 <= month <= 12):
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), month, day))
    found.sort()
    dep = ret = None
    loose = []
    for pos, month, day in found:
        before = t[max(0, pos - 30) : pos]
        clause = re.split(r"[.;!?]|\band\b|,", before)[-1]
        if _RET_CUE.search(clause):
            ret = (month, day)
        elif _DEP_CUE.search(clause):
            dep = (month, day)
        else:
            loose.append((month, day))
    for d in loose:
        if dep is None:
            dep = d
        elif ret is None:
            ret = d
    # A day without a month takes the month of the other date.
    if dep and ret:
        if dep[0] is None and ret[0] is not None:
            dep = (ret[0], dep[1])
        if ret[0] is None and dep[0] is not None:
            ret = (dep[0], ret[1])
    return dep, ret


def _prefs(t: str) -> dict:
    prefs: dict = {}
    for clause in re.split(r"[.;!?]|,|\band\b|\bbut\b", t):
        for m in _WINDOW_RE.finditer(clause):
            key = "ret_window" if _RETURN_WORDS.search(clause) else "dep_window"
            prefs[key] = m.group(1)
    if re.search(r"\bbusiness\b", t):
        prefs["cabin"] = "business"
    elif re.search(r"\beconomy\b|\bcoach\b", t):
        prefs["cabin"] = "economy"
    m = _PRICE_RE.search(t)
    if m:
        prefs["max_price"] = int((m.group(1) or m.group(2)).replace(",", ""))
    if _NONSTOP_RE.search(t):
        prefs["max_connections"] = 0
    elif _ONE_STOP_RE.search(t):
        prefs["max_connections"] = 1
    if _NORMAL_AIRLINE_RE.search(t):
        prefs["normal_airline_only"] = True
    return prefs


@lru_cache(maxsize=_CACHE)
def read_customer(text: str) -> CustomerFacts:
    t = " ".join(text.lower().split())
    start = _FILLERS.sub("", t)
    t = _GREETING_RE.sub("", t)  # "good morning" is a greeting, not a departure time
    intent = next((name for name, rx in _INTENT_PATTERNS if rx.search(t)), None)
    words = re.findall(r"[a-z]+", t)
    origin, dest = _cities(t)
    dep, ret = _dates(t)
    prefs = _prefs(t)
    return CustomerFacts(
        intent=intent,
        name=_find_name(words),
        origin=origin,
        destination=dest,
        dep=dep,
        ret=ret,
        prefs=tuple(sorted(prefs.items())),
        no_prefs=bool(_NO_PREFS_RE.search(t)),
        accept=bool(_ACCEPT.match(start)),
        reject=bool(_REJECT.match(start)),
    )


# ---------------------------------------------------------------------------------------------
# Agent utterances

_PROPOSAL_RE = re.compile(r"\bflight\s*(?:number\s*|no\.?\s*|#\s*)?(\d{6})\b", re.I)
_ASKS = (
    ("intent", re.compile(r"how (?:can|may|could) i (?:help|assist)|what can i do for you|what brings you|what do you need")),
    ("name", re.compile(r"\bname\b|who (?:am i|is) (?:speaking|travel)|\bpassenger\b")),
    ("route", re.compile(r"\bwhere\b|which (?:city|cities|airport)|\b(?:flying|travel(?:l?ing)?|departing|leaving) from\b|"
                         r"\borigin\b|\bdestination\b")),
    ("dates", re.compile(r"\bwhen\b|\bdates?\b|which days?\b|what days?\b")),
    ("prefs", re.compile(r"\bpreferences?\b|\bbudget\b|price range|\bhow much\b|\bclass\b|\bstops\b|\bconnections\b|"
                         r"time of day|\brequirements\b|\bconstraints\b")),
    ("confirm_cancel", re.compile(r"\b(?:shall|should) i (?:go ahead and )?cancel|confirm the cancell?ation|want me to cancel")),
)  # fmt: skip
# what the customer says after the outcome (``simulate.closing_exchanges``): thanks that ask for nothing
CLOSING_THANKS = ("Thank you.", "Okay, thanks.", "Alright, thank you for your help.", "Thanks, that is all.",
                  "Great, thanks again.")


_GOODBYE_RE = re.compile(r"\bgoodbye\b|\bbye\b|have a (?:nice|great|good|lovely) day")


@dataclass(frozen=True)
class AgentFacts:
    asks: frozenset[str] = field(default_factory=frozenset)
    proposal: int | None = None
    action: Action | None = None
    goodbye: bool = False


@lru_cache(maxsize=_CACHE)
def read_agent(text: str) -> AgentFacts:
    action = read_action(text)
    t = " ".join(text.lower().split())
    if action is not None:
        return AgentFacts(action=action)
    asks = frozenset(name for name, rx in _ASKS if rx.search(t))
    # Asking to confirm a cancellation names the reserved flight; that is not a proposal.
    m = _PROPOSAL_RE.search(t) if "confirm_cancel" not in asks else None
    if m:
        return AgentFacts(proposal=int(m.group(1)))
    return AgentFacts(asks=asks, goodbye=bool(_GOODBYE_RE.search(t)) and not asks)
