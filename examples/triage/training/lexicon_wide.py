"""The corpus's third word list (`corpus.generate(..., wide=True)`, `train.py --wide-corpus`):
more sentence structures around the same labels, not more words in the same frames.

Same template grammar as lexicon.py. Written in general terms, from what support mail looks
like, without looking at the evaluation tickets' failures:
  * LEADS: more ways to put a core phrase of any kind ("Long story short, ...", "The thing
    is, ...", "Following up: ..."), shared by every label like lexicon.SPEECH_ACTS.
  * REGISTERS: label-free wrappers in other tones: angry, very polite and long, hurried;
    and STORY sentences before the point, so the words that decide the label come late.
  * ASIDES: a second topic that does not decide the label, around the main request: praise
    around a ticket of any label, and "not about X" remarks that name another label's topic.
  * OTHER_MORE: more kinds of message that are none of the three (sales pitches to the
    company, vendor questionnaires, away notices, requests for a recommendation, personal
    notes, mail meant for a colleague).
"""

# (kind, template) as lexicon.SPEECH_ACTS: {x} a phrase of that kind, {X} capitalized.
LEADS = [
    ("statement", "Long story short, {x}."), ("statement", "The thing is, {x}."),
    ("statement", "Following up: {x}."), ("statement", "Basically {x}."),
    ("statement", "Not sure who to ask, but {x}."), ("statement", "Just a heads up, {x}."),
    ("statement", "{X} - any idea?"), ("statement", "Hey, {x}, what now?"),
    ("statement", "Ok so {x}."), ("statement", "To be honest, {x}."),
    ("statement", "I'll keep it short: {x}."), ("statement", "As discussed with your colleague, {x}."),
    ("vp", "Is there a way to {x}?"), ("vp", "What's the best way to {x}?"),
    ("vp", "All I want is to {x}."), ("vp", "I have been trying to {x} for a while."),
    ("vp", "Our manager asked me to {x}."), ("vp", "Help me {x} please."),
    ("request", "When you have a moment, could you {x}?"), ("request", "I'm asking you to {x}."),
    ("request", "Would you mind if I asked you to {x}?"), ("request", "Kindly {x}."),
    ("request", "{X} asap."), ("request", "I really need you to {x}."),
    ("np", "All I'm asking for is {x}."), ("np", "Looking for {x}."), ("np", "We are after {x}."),
    ("np", "Any news on {x}?"), ("np", "Still hoping for {x}."),
    ("yesno", "Hi, {x}"), ("yesno", "One question. {x}"), ("yesno", "Hello again! {x}"),
    ("wh", "Hi, {x}"), ("wh", "Hello, one thing: {x}"), ("wh", "Sorry to bother you. {x}"),
    ("terse", "re: {x}"), ("terse", "{x}..."), ("terse", "urgent: {x}"),
]

# Label-free wrappers: {core} is the ticket's point (a core sentence and its details).
REGISTERS = {
    "angry": ["{core} This is really frustrating.", "Honestly, I'm fed up. {core}",
              "{core} Unacceptable.", "I have written about this before. {core}",
              "I'm losing patience here. {core}", "{core} Please sort this out today.",
              "Seriously? {core}", "{core} I expected better from you.",
              "{core}\n\nI want an answer from a real person.", "Not happy at all. {core}",
              "{core} If this is not fixed I'm leaving.", "Again?! {core}"],
    "polite": ["I hope this message finds you well. {core} Thank you very much for your time.",
               "Good day. I am sorry to bother you with this. {core} I appreciate any help you can offer.",
               "Dear team,\n\nI hope all is well with you. {core}\n\nWith many thanks and best wishes,\n{name}",
               "First of all, thank you for all your work. {core} Please let me know if you need anything from me.",
               "Hello and thank you in advance for reading this. {core} Wishing you a pleasant day.",
               "I would be grateful for your help with the following. {core} Thanks again."],
    "hurried": ["{core} thx", "{core} - sent in a hurry, sorry", "quick: {core}", "{core} more later",
                "on my way to a meeting. {core}", "{core} ty!"],
}

# Label-free sentences that come before the point (the label is decided late).
STORY = [
    "We started using {product} last spring for our team of {n}.", "I work at {company} and look after our tools.",
    "Our team meets every Monday to plan the week.", "I set up the account for my colleagues a while ago.",
    "Today I sat down to get some work done.", "I've recommended {product} to a few friends.",
    "We switched over from {tool} about a year ago.", "I mostly use {product} on {platform}.",
    "My manager {name} handles most of our account.", "We are a small team spread over three cities.",
    "I only use {product} a few times a month.", "This morning I opened {product} as usual.",
    "We have {n} projects running right now.", "I have been with you since the early days.",
    "I'm new to {product}, I joined my team {when}.", "Our team grew from {n} to {n} people this year.",
]

# Asides that do not decide the label, per label they must NOT go with: ("not about X").
NOT_ABOUT = {
    "billing": ["This is not about money.", "Our payments are all fine.", "The bill is not the issue here.",
                "No question about the invoice this time."],
    "bug": ["Nothing is broken.", "The app itself works fine.", "Everything runs smoothly, it's not a bug.",
            "No errors or crashes, just this."],
    "feature request": ["I'm not asking for anything new.", "This is not a feature request.",
                        "We have all the features we need."],
    "other": [],
}

PRAISE_ASIDES = ["I love {product}, but", "We are happy with {product} overall, however", "Great app by the way.",
                 "Big fan of your work.", "Thanks for a great product.", "You have been very helpful in the past."]

# More messages that are none of billing, bug, feature request (label "other").
OTHER_MORE = {
    "statement": ["we offer translation services and would like to work with your company",
                  "I run a small studio for search engine ads, would you like a free review",
                  "our security team needs you to fill in a vendor questionnaire",
                  "I'm away until {month} 20 with limited access to email",
                  "this was meant for my colleague {name}, please ignore it",
                  "can you recommend a good book about running small teams",
                  "I'm moving to another company and wanted to say goodbye",
                  "my kid drew a picture of your mascot, it made us smile",
                  "we are putting together a list of useful tools for nonprofits and want to include you",
                  "I'm collecting opinions for a survey on remote teams, it takes five minutes",
                  "I would like to buy a gift card for a friend, do you sell those",
                  "I'm not a customer, just curious how your company started",
                  "we are a local radio show and would love to mention you",
                  "I found a wallet at your stand at the fair in {city}",
                  "just checking that this contact form reaches someone",
                  "I'd like to visit your team with my class of {n}"],
    "wh": ["Who should I send our sponsorship deck to?", "Which charity do you support this year?",
           "Who takes care of press questions?", "Where can I find your company report for last year?",
           "What does your team do for Earth Day?", "Who made the music in your video?"],
    "yesno": ["Can you put me in touch with your sales team for a reseller deal?",
              "Would your founders join a podcast episode?", "Do you give talks at universities?",
              "Is the team going to the fair in {city} this year?", "Are you the people behind the podcast about startups?"],
}
