"""What the sellers say: each style's wording of every question, proposal and final action
(``STYLES``), and what a mumbling seller says instead of a question (``RAMBLES``). Every ask must
be recognised by ``language.read_agent`` (tests/sim/test_language.py checks each template)."""

from __future__ import annotations

STYLES: dict[str, dict[str, tuple[str, ...]]] = {
    "polite": {
        "intent": ("Hello, thank you for calling. How may I help you today?", "Good day. How can I assist you?"),
        "name": ("Certainly. May I have your name, please?", "I can help with that. Could I have your full name?"),
        "route": ("Where will you be flying from, and where to?", "Which city are you departing from, and what is your destination?"),
        "dates": ("What are your travel dates?", "On which dates would you like to depart and return?"),
        "route_dates": ("Where are you flying from and to, and on which dates?",),
        "prefs": ("Do you have any preferences regarding time of day, class, budget or connections?",
                  "Are there any requirements for the flight, such as class, price range or number of stops?"),
        "propose": ("I found flight {num} with {airline}, departing {dep} at {dh} and returning {ret} at {rh}, "
                    "{cabin} class, {stops}, for ${price}. Shall I book it?",
                    "There is {airline} flight {num}: out {dep} at {dh}, back {ret} at {rh}, {cabin}, {stops}, "
                    "${price}. Would that suit you?"),
        "confirm_cancel": ("I see your reservation on flight {num}. Shall I cancel it?",
                           "I have located your booking. Do you want me to cancel it?"),
        "book": ("Your ticket on flight {num} has been booked for {name}. Thank you for flying with us.",),
        "change": ("Your reservation has been changed to flight {num}, {name}. Thank you.",),
        "cancel": ("Your reservation has been cancelled, {name}. Have a nice day.",),
        "no_flight": ("I am sorry, there are no flights that meet your requirements.",),
        "no_reservation": ("I am sorry, I could not find a reservation for {name}.",),
        "give_up": ("I am afraid I cannot help you further. Goodbye.",),
        "filler": ("One moment please, I'm checking.",),
        "closing": ("You're welcome.", "It was my pleasure.", "Thank you for calling."),
    },
    "friendly": {
        "intent": ("Hi there! What can I do for you?", "Hey! How can I help?"),
        "name": ("Sure thing! What's your name?", "Happy to help! Who am I speaking with? Your name please."),
        "route": ("Where are you flying from, and where to?", "Awesome. Where are you headed, and from which city?"),
        "dates": ("When do you want to go and come back? Dates please!", "Which dates work for you?"),
        "route_dates": ("Where from, where to, and when? Give me the dates too!",),
        "prefs": ("Any preferences? Time of day, class, budget, stops?", "Anything I should know, like budget or connections?"),
        "propose": ("Got one! Flight {num} on {airline}, leaving {dep} at {dh}, back {ret} at {rh}, {cabin}, {stops}, "
                    "just ${price}. Want it?",
                    "How about {airline} flight {num}? {dep} at {dh}, return {ret} at {rh}, {cabin}, {stops}, ${price}."),
        "confirm_cancel": ("Found your booking on flight {num}! Should I cancel it?",),
        "book": ("You're all set on flight {num}, {name}! Have a great trip!",),
        "change": ("Done! You're moved to flight {num}, {name}.",),
        "cancel": ("All cancelled, {name}. Take care!",),
        "no_flight": ("Oh no, nothing matches what you need, sorry!",),
        "no_reservation": ("Hmm, I can't find any reservation for {name}, sorry!",),
        "give_up": ("Sorry, I have to go now. Bye!",),
        "filler": ("Hang on a sec!",),
        "closing": ("No problem!", "Anytime!", "You bet!"),
    },
    "terse": {
        "intent": ("How can I help?",),
        "name": ("Name?", "Your name?"),
        "route": ("From where, to where?", "Origin and destination?"),
        "dates": ("Dates?", "Travel dates?"),
        "route_dates": ("Origin, destination and dates?",),
        "prefs": ("Preferences? Class, budget, stops?", "Any constraints?"),
        "propose": ("Flight {num}, {airline}, {dep} {dh} to {ret} {rh}, {cabin}, {stops}, ${price}. OK?",),
        "confirm_cancel": ("Reservation found, flight {num}. Should I cancel?",),
        "book": ("Booked flight {num} for {name}.",),
        "change": ("Changed to flight {num} for {name}.",),
        "cancel": ("Cancelled for {name}.",),
        "no_flight": ("No flights match.",),
        "no_reservation": ("No reservation found for {name}.",),
        "give_up": ("Cannot help. Bye.",),
        "filler": ("Checking.",),
        "closing": ("Welcome.", "Sure."),
    },
    "verbose": {
        "intent": ("Welcome to the airline reservations desk, it is a pleasure to have you with us today. "
                   "What can I do for you?",),
        "name": ("I would be delighted to take care of that for you. To get started, could you please tell me "
                 "the name of the passenger?",),
        "route": ("Wonderful. Now, could you tell me where you will be departing from and what your destination is?",),
        "dates": ("Thank you. And on which dates would you like to travel, both for the outbound and the return?",),
        "route_dates": ("Could you tell me where you are flying from, where to, and the dates of your travel?",),
        "prefs": ("Before I search, do you have any preferences I should keep in mind, for example the time of day, "
                  "the class of service, your budget or how many connections you would accept?",),
        "propose": ("I have found an option that may suit you: flight {num} operated by {airline}, departing on {dep} at "
                    "{dh} and returning on {ret} at {rh}, in {cabin} class with {stops}, for a total of ${price}. "
                    "Would you like me to go ahead with this one?",),
        "confirm_cancel": ("Thank you for waiting. I have located your reservation on flight {num}. "
                           "Just to be sure, shall I cancel it for you?",),
        "book": ("Excellent, I have booked your ticket on flight {num} under {name}. "
                 "You will receive a confirmation shortly. Have a wonderful trip.",),
        "change": ("All done: your reservation now holds flight {num} for {name}. Is there anything else? "
                   "Have a lovely day.",),
        "cancel": ("Your reservation has been cancelled as requested, {name}. I hope to see you on board another time.",),
        "no_flight": ("I have looked carefully, but I am sorry to say that no flight meets all of your requirements.",),
        "no_reservation": ("I have searched our records carefully, but I could not find any reservation for {name}.",),
        "give_up": ("I am terribly sorry, but I am unable to complete this request right now. Goodbye.",),
        "filler": ("Please bear with me for a moment while I look into this.",),
        "closing": ("You are most welcome, it has truly been a pleasure to assist you today.",
                    "It was my pleasure entirely, and thank you once again for choosing to call us."),
    },
}


# What a mumbling seller says instead of a question: it names nothing the customer could answer
# (language.read_agent finds no ask and no goodbye in it; a test checks).
RAMBLES = (
    "Right, of course, I completely understand, these things happen to all of us and we will sort it out together.",
    "Absolutely, that is what I am here for, and I want to make sure everything is just right for you.",
    "Okay, okay, let me just make a little note of that here, one second, all right, very good.",
)
