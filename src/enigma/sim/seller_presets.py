"""The graded sellers: the knobs that set a seller's quality (``SellerKnobs``), each preset's
sellers as a table of knobs (``PRESETS``; every seller by id: ``SELLERS``) and each preset's
reward mix (``REWARD_WEIGHTS``). The seller that reads the knobs is ``sellers.SellerAgent``."""

from __future__ import annotations

from dataclasses import dataclass

from enigma.sim.config import PRESET_NAMES
from enigma.sim.scoring import AIRDIALOGUE_WEIGHTS


@dataclass(frozen=True)
class SellerKnobs:
    style: str = "polite"  # wording: polite | friendly | terse | verbose
    mishear_city: float = 0.0  # chance of hearing a city mention as another city
    mishear_date: float = 0.0  # ... a date a day or two off
    mishear_name: float = 0.0  # ... another last name
    intent_noise: float = 0.0  # chance an intent statement is read as a uniformly random intent
    ask_prefs: bool = True  # asks about preferences before searching
    choice: str = "best"  # best | first | random: how a flight is picked
    exact_dates: bool = True  # only flights on the exact dates (else anything within two days)
    confirm: bool = True  # proposes a flight / asks before cancelling, instead of acting at once
    check_reservation: bool = True  # looks up the reservation before changing or cancelling
    name_mode: str = "full"  # full | first | last: the name written into the action
    status_slip: float = 0.0  # chance the final action carries a wrong status
    give_up: float = 0.0  # per-turn chance (from the third turn) of ending without acting
    redundant: float = 0.0  # per-turn chance of asking again for something already known
    # Failure modes added with the airline-heldout preset (designed after the defaults were
    # frozen); every default leaves the sellers above exactly as they were.
    switch_flight: float = 0.0  # chance of booking another flight of the same dates than the one accepted
    swap_change_cancel: float = 0.0  # chance of reading a change request as a cancellation and vice versa
    wrong_name: float = 0.0  # chance the final action names someone else
    ask_twice: bool = False  # asks every question a second time before moving on
    late_give_up: float = 0.0  # per-turn chance, from the fifth turn, of ending without acting
    drop_prefs: float = 0.0  # chance of ignoring each preference the customer states
    eager_cancel: float = 0.0  # per-turn chance, in a change or once a proposal was refused, of cancelling instead
    mumble: float = 0.0  # chance a question is lost in filler the customer cannot read
    confirm_twice: bool = False  # books only after the customer accepts the same flight twice
    description: str = ""


_K = SellerKnobs

AIRLINE24: dict[str, SellerKnobs] = {
    "expert": _K(description="asks everything, confirms, picks the cheapest flight meeting every preference"),
    "expert_friendly": _K(style="friendly", mishear_date=0.05, give_up=0.015, description="near-expert in a friendly voice"),
    "expert_terse": _K(style="terse", status_slip=0.03, description="near-expert in a terse voice"),
    "expert_verbose": _K(style="verbose", mishear_city=0.05, description="near-expert, long-winded"),
    "careful_slow": _K(redundant=0.15, mishear_name=0.03, description="re-asks known slots now and then"),
    "first_fit": _K(choice="first", description="proposes the first acceptable flight, not the cheapest"),
    "first_fit_terse": _K(style="terse", choice="first", mishear_date=0.08, status_slip=0.03, description="first fit, terse"),
    "no_prefs_question": _K(ask_prefs=False, give_up=0.03, description="never asks preferences; learns them from refusals"),
    "slightly_deaf": _K(mishear_city=0.08, mishear_date=0.1, mishear_name=0.05, description="mishears now and then"),
    "hard_of_hearing": _K(mishear_city=0.35, mishear_date=0.35, mishear_name=0.3, description="mishears often"),
    "deaf_direct": _K(mishear_city=0.3, mishear_date=0.35, confirm=False, style="friendly",
                      description="mishears often and books without proposing"),
    "direct_booker": _K(confirm=False, description="books without proposing first"),
    "direct_no_prefs": _K(confirm=False, ask_prefs=False, style="friendly", description="books the cheapest on the dates at once"),
    "trusting": _K(check_reservation=False, description="never checks that a reservation exists"),
    "first_name_only": _K(name_mode="first", style="friendly", description="writes only the first name"),
    "status_slip": _K(status_slip=0.15, description="sometimes records the wrong final status"),
    "status_sloppy": _K(status_slip=0.45, style="terse", description="often records the wrong final status"),
    "impatient": _K(give_up=0.12, description="sometimes ends the conversation early"),
    "quitter": _K(give_up=0.45, style="terse", description="often ends the conversation early"),
    "chatterbox": _K(redundant=0.65, style="verbose", description="keeps asking for what it knows; runs out of turns"),
    "sloppy_dates": _K(exact_dates=False, confirm=False, ask_prefs=False, description="books the cheapest flight near the dates"),
    "random_picker": _K(choice="random", confirm=False, exact_dates=False, ask_prefs=False, status_slip=0.2, name_mode="first",
                        description="books a random nearby flight"),
    "intent_confused": _K(intent_noise=0.6, check_reservation=False, confirm=False,
                          description="misreads the intent often and acts at once"),
    "careless": _K(mishear_city=0.3, mishear_date=0.3, ask_prefs=False, confirm=False, name_mode="last", style="terse",
                   description="mishears, never confirms, last name only"),
    "broken_intent": _K(intent_noise=1.0, check_reservation=False, confirm=False, ask_prefs=False, choice="random",
                        exact_dates=False, description="reads the intent at random and books a random nearby flight"),
    "hopeless": _K(give_up=0.6, mishear_name=0.5, mishear_city=0.3, style="terse",
                   description="mishears names and usually gives up"),
    "worst": _K(intent_noise=0.8, mishear_city=0.3, mishear_date=0.3, mishear_name=0.3, choice="random",
                exact_dates=False, confirm=False, check_reservation=False, status_slip=0.3, name_mode="last",
                give_up=0.5, ask_prefs=False, style="terse", description="everything that can go wrong"),
}  # fmt: skip

# The paper's rule-rule setting: identical agents but for how noisily they read intent.
RULE6: dict[str, SellerKnobs] = {
    f"rule_noise{int(p * 100):03d}": _K(intent_noise=p, description=f"expert reading intent with noise {p:.1f}")
    for p in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
}

# Designed after the estimator's defaults were frozen and never used to choose anything: test
# data only (docs/simulator.md). Mostly failure modes no seller above has, a few old knobs mixed
# in, scored with a reward mix of its own.
HELDOUT: dict[str, SellerKnobs] = {
    "steady_hand": _K(style="friendly", mishear_name=0.02, description="near-expert; now and then mishears a name"),
    "upseller": _K(choice="priciest", description="proposes the dearest flight meeting every preference"),
    "bait_and_switch": _K(switch_flight=0.5, description="half the time books another flight of the accepted one's dates"),
    "swapped_change_cancel": _K(swap_change_cancel=0.6, description="often takes a change for a cancellation and vice versa"),
    "name_slip": _K(wrong_name=0.3, description="acts correctly but sometimes writes someone else's name in the action"),
    "name_scrambler": _K(wrong_name=0.85, style="terse", description="usually writes someone else's name in the action"),
    "echo": _K(ask_twice=True, description="asks every question twice, then works well"),
    "echo_hard_of_hearing": _K(ask_twice=True, mishear_city=0.25, mishear_name=0.4, style="verbose",
                               description="asks every question twice and mishears cities and names often"),
    "fades_late": _K(late_give_up=0.7, description="good early, usually gives up from the fifth turn"),
    "polite_but_sloppy": _K(drop_prefs=0.6, confirm=False, description="polite, but ignores most preferences and books at once"),
    "cancel_happy": _K(eager_cancel=0.5, description="in a change, or after a refused proposal, often cancels instead"),
    "mumbler": _K(mumble=0.5, style="verbose", description="verbose filler often hides the question"),
    "needs_repeat": _K(confirm_twice=True, redundant=0.3, style="verbose",
                       description="books only once the customer has accepted twice; re-asks known slots"),
    "rushed_upsell": _K(choice="priciest", confirm=False, ask_prefs=False, wrong_name=0.2, style="terse",
                        description="books the dearest flight on the dates at once, sometimes under a wrong name"),
    "ghost": _K(late_give_up=0.9, mumble=0.3, style="terse", description="mumbles; nearly always vanishes from the fifth turn"),
    "muddle": _K(swap_change_cancel=0.7, wrong_name=0.7, late_give_up=0.5, mishear_date=0.3, mumble=0.4,
                 description="confuses change and cancel, names, dates, and fades"),
}  # fmt: skip

PRESETS: dict[str, dict[str, SellerKnobs]] = {"airline24": AIRLINE24, "rule6": RULE6, "airline-heldout": HELDOUT}
if tuple(PRESETS) != PRESET_NAMES:  # the simulate section validates preset names without loading the sellers
    raise ImportError(f"enigma.sim.config.PRESET_NAMES {PRESET_NAMES} must name the presets here, {tuple(PRESETS)}")
DEFAULT_PRESET = "airline24"
SELLERS: dict[str, SellerKnobs] = {**AIRLINE24, **RULE6, **HELDOUT}
# Each preset's reward: weights of the name, flight and status scores (scoring.score), used for
# the logged ratings and the truth alike. The held-out preset weighs them otherwise, so that a
# feature tuned to the AirDialogue mix of the sellers above carries no advantage there.
REWARD_WEIGHTS: dict[str, dict[str, float]] = {
    "airline24": AIRDIALOGUE_WEIGHTS,
    "rule6": AIRDIALOGUE_WEIGHTS,
    "airline-heldout": {"name": 0.4, "flight": 0.2, "status": 0.4},
}


def preset_agents(preset: str = DEFAULT_PRESET) -> list[str]:
    """The agent ids of a preset, in a fixed order."""
    if preset not in PRESETS:
        raise ValueError(f"unknown simulator preset {preset!r}; known: {sorted(PRESETS)}")
    return list(PRESETS[preset])
