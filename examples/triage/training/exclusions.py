"""What the generated training corpus must never contain: the evaluation tickets' subjects.

The 24 tickets in examples/triage/tickets/ are the test set and heldout.jsonl a second
held-out set in another style. Two guards keep them out of training (corpus.py applies both
to every generated ticket and fails, naming the ticket and the pattern, when one trips):

  1. SUBJECTS: for every evaluation ticket, the words of its particular situation (regular
     expressions over lowercased text). A billing ticket about a double charge means no
     training ticket mentions being charged twice; a feature request for a dark mode means
     no training ticket mentions a dark mode at all, under any label. For the example
     tickets this is the situation, not the topic's general vocabulary: "search returns no
     results" is t13's and excluded, a search that is slow is not; a card declined "when"
     upgrading is t08's, a card declined is ordinary billing vocabulary. The held-out set's
     patterns stay wider (whole topics), so it measures subjects the corpus never had.
  2. Shared word 5-grams: no training ticket shares a run of five words with any ticket of
     the test, held-out or development (dev.jsonl) sets.

The general vocabulary of support tickets (charge, invoice, refund, crash, error, please add,
would love, ...) is not excluded: that is what the model has to learn.
"""
import re

# (ticket id, patterns of its subject)
SUBJECTS = [
    # ---- the 24 example tickets (the test set)
    ("t01", [r"\btwice\b", r"\bduplicate", r"double[- ]?charg"]),
    ("t02", [r"settings page", r"android 14"]),
    ("t03", [r"dark (mode|theme)", r"night mode", r"eyes hurt"]),
    ("t04", [r"(billing|postal|company|street) address", r"\bmoved\b"]),
    ("t05", [r"login page", r"\breloads\b", r"cookies"]),
    ("t06", [r"\bpdf\b", r"export\w* (reports|as)", r"not only csv"]),
    ("t07", [r"(support|opening|office|business) hours", r"holiday"]),
    ("t08", [r"declin\w* when", r"pro plan", r"works everywhere else"]),
    ("t09", [r"sync icon", r"\b504\b", r"never show up"]),
    ("t10", [r"(share|shared|one|team) calendar", r"calendar across", r"each user separately"]),
    ("t11", [r"unused", r"cancel my subscription"]),
    ("t12", [r"home ?page", r"recieve"]),
    ("t13", [r"search returns", r"no results for any", r"documents i can see"]),
    ("t14", [r"\bvat\b", r"tax filing", r"past invoices"]),
    ("t15", [r"keyboard", r"shortcut", r"hotkey"]),
    ("t16", [r"password reset", r"reset (email|link)", r"never arrives"]),
    ("t17", [r"partner", r"agency"]),
    ("t18", [r"price (went|go|goes|going|has gone) up", r"price increase", r"raised? (the|your|my) price",
             r"without (any )?notice"]),
    ("t19", [r"dashboard", r"times? out\b", r"timeout"]),
    ("t20", [r"webhook", r"order (status|changes)"]),
    ("t21", [r"still (haven't|have not|not) (received|got)", r"requested a refund"]),
    ("t22", [r"quick help", r"works now", r"everything works"]),
    ("t23", [r"notification", r"banner", r"\bpush\b"]),
    ("t24", [r"\btags?\b", r"at once", r"one by one", r"\bbulk\b", r"many items"]),
    # ---- heldout.jsonl (casual chat style)
    ("h01", [r"bank statement", r"\bbucks\b"]),
    ("h02", [r"receipt"]),
    ("h03", [r"yearly", r"annual"]),
    ("h04", [r"closed my account", r"taking money"]),
    ("h05", [r"coupon", r"promo code", r"discount code"]),
    ("h06", [r"card (has )?expired", r"expired card", r"old one expired", r"(different|new|another) (credit )?card"]),
    ("h07", [r"finance (dept|department|team)", r"accounts@"]),
    ("h08", [r"student"]),
    ("h09", [r"\btrial\b"]),
    ("h10", [r"bank transfer", r"wire transfer"]),
    ("h11", [r"white screen", r"blank screen", r"\bipad"]),
    ("h12", [r"click(ing|ed)? save", r"\bsave button", r"changes (are )?gone"]),
    ("h13", [r"something went wrong", r"photo", r"upload"]),
    ("h14", [r"overlap", r"\beditor\b"]),
    ("h15", [r"verification", r"\bsms\b", r"text message"]),
    ("h16", [r"\bchrome\b", r"firefox", r"images? (don't|do not|won't) load"]),
    ("h17", [r"freez", r"force quit", r"scroll"]),
    ("h18", [r"\btotals?\b", r"weekly (summary|report)"]),
    ("h19", [r"google", r"sign in with"]),
    ("h20", [r"attachment", r"\b413\b"]),
    ("h21", [r"linux"]),
    ("h22", [r"\bpin\b", r"\bfav"]),
    ("h23", [r"currenc"]),
    ("h24", [r"two[- ]factor", r"\b2fa\b", r"authenticator"]),
    ("h25", [r"recurring", r"repeat(ing)? task"]),
    ("h26", [r"offline"]),
    ("h27", [r"\bundo\b"]),
    ("h28", [r"slack"]),
    ("h29", [r"colou?rs?\b"]),
    ("h30", [r"schedul"]),
    ("h31", [r"hiring", r"\bjobs?\b", r"career", r"designer"]),
    ("h32", [r"guest post", r"\bblog"]),
    ("h33", [r"\boffice\b"]),
    ("h34", [r"\blogo\b"]),
    ("h35", [r"phone number", r"call you"]),
    ("h36", [r"based in"]),
    ("h37", [r"journalist", r"interview"]),
    ("h38", [r"conference", r"\bcto\b", r"talk you gave"]),
    ("h39", [r"languages\b", r"\bspeak\b"]),
    ("h40", [r"newsletter", r"unsubscribe", r"marketing (email|list)"]),
]

_COMPILED = [(tid, re.compile(p)) for tid, pats in SUBJECTS for p in pats]


def subject_hit(text):
    """(ticket id, pattern) of the first evaluation subject `text` mentions, or None."""
    low = text.lower()
    for tid, rx in _COMPILED:
        if rx.search(low):
            return tid, rx.pattern
    return None


_WORD = re.compile(r"[a-z0-9']+")


def words(text):
    return _WORD.findall(text.lower())


def ngrams(text, n=5):
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
