#!/usr/bin/env python3
"""The generated training corpus of the triage model: support tickets with their labels.

  /usr/bin/python3 examples/triage/training/corpus.py [--seed N] [--count N] [--show K]

A ticket is built from lexicon.py: a core sentence (or two) of the label's templates inside a
label-free frame (greeting, context, sign-off; now and then a sentence of unrelated English
prose), then a writing style (lowercase, dropped punctuation, chat
abbreviations, typos, line breaks). Labels are balanced: ticket i has label i mod 4 before a
seeded shuffle. Deterministic: the same seed gives the same tickets (Python's random.Random,
whose sequences are stable across versions for the calls used here).

Every ticket passes the guards of exclusions.py against the evaluation sets (the 24 example
tickets, heldout.jsonl, dev.jsonl). A ticket mentioning an evaluation ticket's subject is a
bug of the lexicon and stops generation with the ticket and the subject; a ticket that fails
a guard only by chance (five words shared through a combination of templates, or a subject
formed by word noise) is drawn again, and the number of redraws is reported.
"""
import argparse
import glob
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)

import exclusions  # noqa: E402
import lexicon_plain  # noqa: E402
import lexicon_wide  # noqa: E402
from lexicon import DETAILS, FRAMES, LABELS, PHRASES, SHAPES, SLOTS, SPEECH_ACTS, core  # noqa: E402

for _name, _values in lexicon_plain.P_SLOTS.items():   # new slot names only: no other draw changes
    assert _name not in SLOTS, _name
    SLOTS[_name] = _values

TICKETS_DIR = os.path.join(REPO, "examples", "triage", "tickets")
PROSE = os.path.join(REPO, "tests", "reference", "data", "bpe_sample", "en.txt")
_SLOT = re.compile(r"\{(\w+)\}")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluation_texts():
    """{id: text} of every ticket the corpus must stay away from: the example tickets (the
    test set), heldout.jsonl and dev.jsonl."""
    out = {}
    for path in sorted(glob.glob(os.path.join(TICKETS_DIR, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)] = f.read()
    for name in ("heldout.jsonl", "dev.jsonl"):
        for r in read_jsonl(os.path.join(HERE, name)):
            out[r["id"]] = r["text"]
    return out


def expand(template, rng):
    """Fills every {slot} (recursively); {Slot} capitalizes the first letter of the value."""
    def sub(m):
        name = m.group(1)
        value = expand(rng.choice(SLOTS[name.lower()]), rng)
        return value[0].upper() + value[1:] if name[0].isupper() else value
    return _SLOT.sub(sub, template)


def prose_sentences():
    """Sentences of the bundled English sample that pass the subject guard: label-free
    filler with a vocabulary wider than the lexicon's."""
    with open(PROSE, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    out = []
    for s in re.split(r"(?<=[.!?])\s+", text):
        if 5 <= len(s.split()) <= 28 and exclusions.subject_hit(s) is None:
            out.append(s)
    return out


# ----------------------------------------------------------------------------- styles

_ABBREV = [(r"\byou\b", "u"), (r"\byour\b", "ur"), (r"\bplease\b", "pls"), (r"\bthanks\b", "thx"),
           (r"\bI'm\b", "im"), (r"\bdon't\b", "dont"), (r"\bcan't\b", "cant"),
           (r"\bdoesn't\b", "doesnt"), (r"\bbecause\b", "bc"), (r"\bare\b", "r"),
           (r"\bwon't\b", "wont"), (r"\bisn't\b", "isnt"), (r"\bI'd\b", "id"), (r"\bwhat is\b", "whats"),
           (r"\bthank you\b", "ty"), (r"\bplease\b", "plz"), (r"\byou guys\b", "u guys"),
           (r"\bwant to\b", "wanna"), (r"\bgoing to\b", "gonna"), (r"\bwith\b", "w/"),
           (r"\bmessage\b", "msg"), (r"\bsomething\b", "smth"), (r"\band\b", "&"),
           (r"\bpeople\b", "ppl"), (r"\bthat\b", "tht"), (r"\bI\b", "i")]


def typo(word, rng):
    if len(word) < 4 or not word.isalpha():
        return word
    i = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(3)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]   # swap two letters
    if kind == 1:
        return word[:i] + word[i + 1:]                            # drop one
    return word[:i] + word[i] + word[i:]                          # double one


def chat(text, rng):
    """Typed like a chat message: greetings and sign-offs stay, but all lowercase, line
    breaks become spaces, most full stops go, abbreviations everywhere."""
    for pat, rep in _ABBREV:
        if rng.random() < 0.7:
            text = re.sub(pat, rep, text, flags=re.IGNORECASE)
    text = re.sub(r"\s*\n+\s*", " ", text.lower())
    return re.sub(r"[.,](\s|$)", lambda m: m.group(1) if rng.random() < 0.8 else m.group(0), text)


def style(text, rng):
    """A writing style applied to the whole ticket."""
    if rng.random() < 0.15:
        return chat(text, rng)
    if rng.random() < 0.2:
        for pat, rep in _ABBREV:
            text = re.sub(pat, rep, text, flags=re.IGNORECASE)
    if rng.random() < 0.25:
        text = text.lower()
    if rng.random() < 0.1:
        text = re.sub(r"[.,](\s|$)", r"\1", text)                 # no punctuation
    if rng.random() < 0.06:
        text = re.sub(r"([!?])", r"\1\1", text)
    if rng.random() < 0.2:
        w = text.split(" ")
        for _ in range(rng.randrange(1, 3)):
            k = rng.randrange(len(w))
            w[k] = typo(w[k], rng)
        text = " ".join(w)
    return text


def wide_phrases():
    """PHRASES with lexicon_wide.OTHER_MORE added to the "other" label's kinds (a copy)."""
    out = {label: {kind: list(v) for kind, v in kinds.items()} for label, kinds in PHRASES.items()}
    for kind, values in lexicon_wide.OTHER_MORE.items():
        out["other"][kind] += values
    return out


_WIDE_PHRASES = wide_phrases()


def wide_core(label, rng):
    """A core sentence for the wide corpus: one in three with a lead of lexicon_wide.LEADS,
    the others with lexicon.SPEECH_ACTS; phrases with lexicon_wide.OTHER_MORE."""
    acts = lexicon_wide.LEADS if rng.random() < 1 / 3 else SPEECH_ACTS
    return core(label, rng, expand, acts, _WIDE_PHRASES)


def wide_wrap(label, text, rng):
    """The wide corpus's wrapping of a ticket's point `text` (before any frame): with some
    probability an aside that does not decide the label (praise, or "not about X" for
    another label X), story sentences before it, and a register (angry, polite, hurried)
    instead of the ordinary frame. Returns (text, whether a register was applied)."""
    if rng.random() < 0.15:
        if rng.random() < 0.5:
            aside = rng.choice(lexicon_wide.PRAISE_ASIDES)
            text = aside + " " + (text[0].lower() + text[1:] if aside.endswith(",") or
                                  aside.endswith("but") or aside.endswith("however") else text)
        else:
            others = [x for lab in LABELS if lab != label for x in lexicon_wide.NOT_ABOUT[lab]]
            aside = rng.choice(others)
            text = aside + " " + text if rng.random() < 0.5 else text + " " + aside
    if rng.random() < 0.15:
        story = " ".join(rng.choice(lexicon_wide.STORY) for _ in range(rng.randrange(1, 3)))
        text = story + " " + text
    if rng.random() < 0.25:
        kind = rng.choice(sorted(lexicon_wide.REGISTERS))
        return expand(rng.choice(lexicon_wide.REGISTERS[kind]).replace("{core}", text), rng), True
    return text, False


def sentence_parts(label, rng, prose, wide=False):
    """The ticket's text before any style: a core sentence (sometimes two, sometimes with a
    detail sentence of the label) in a label-free frame, now and then a sentence of unrelated
    prose; or, for one ticket in seven or so, a multi-part shape of the label (SHAPES). One "other" ticket in six is
    unrelated prose alone: "other" is also what is left when nothing speaks of money, a
    defect or a wish."""
    if label == "other" and rng.random() < 1 / 6:
        text = " ".join(rng.choice(prose) for _ in range(rng.randrange(1, 3)))
        return expand(rng.choice(FRAMES).replace("{core}", text), rng)
    if rng.random() < 0.15:
        shape = rng.choice(SHAPES[label])
        text = shape.replace("{core}", core(label, rng, expand))
        while "{detail}" in text:
            text = text.replace("{detail}", rng.choice(DETAILS[label]), 1)
        return expand(text, rng)
    one = (lambda: wide_core(label, rng)) if wide else (lambda: core(label, rng, expand))
    text = one()
    if rng.random() < 0.15:
        text += " " + one()
    if label == "feature request" and rng.random() < 0.3:
        text += " " + expand("{feature_reason}", rng)
    if rng.random() < 0.3:
        text += " " + rng.choice(DETAILS[label])
    registered = False
    if wide:
        text, registered = wide_wrap(label, expand(text, rng), rng)
    if not registered:
        text = expand(rng.choice(FRAMES).replace("{core}", text), rng)
    if rng.random() < 0.08:
        p = rng.choice(prose)
        text = p + " " + text if rng.random() < 0.5 else text + " " + p
    return text


def word_noise(text, rng, words):
    """Replaces about one word in ten by a random word of the prose sample and drops about one
    in twenty: tickets are full of words the corpus never taught."""
    out = []
    for w in text.split(" "):
        r = rng.random()
        if r < 0.05:
            continue
        out.append(rng.choice(words) if r < 0.15 else w)
    return " ".join(out) or text


def plain_parts(label, rng, casual=0.0):
    """A plain ticket (lexicon_plain.py): one or two sentences that describe the situation,
    without a request form; a greeting or sign-off for one in four, nothing else. With
    `casual` > 0, that fraction instead gets a casual chat lead or tail (P_CASUAL), lowercased."""
    text = expand(rng.choice(lexicon_plain.P_TEMPLATES[label]), rng)
    text = " ".join(text.split())
    if casual and rng.random() < casual:
        return rng.choice(lexicon_plain.P_CASUAL).replace("{core}", text).lower()
    if rng.random() < 0.25:
        text = expand(rng.choice(["{greeting} {core}", "{core} {signoff}", "{greeting}\n\n{core}"])
                      .replace("{core}", text), rng)
    return text


def ticket(label, rng, prose, prose_words, wide=False, plain=0.0, casual=0.0):
    """(clean text, final text) of one ticket: the final text has a writing style, for a
    third of the tickets word noise, and for half a final newline. With `plain` > 0, that
    fraction of the tickets is a plain ticket (plain_parts), with word noise for one in ten."""
    if plain and rng.random() < plain:
        clean = plain_parts(label, rng, casual)
        text = word_noise(clean, rng, prose_words) if rng.random() < 0.1 else clean
        text = style(text, rng)
        return clean, text + ("\n" if rng.random() < 0.5 else "")
    clean = sentence_parts(label, rng, prose, wide)
    text = clean
    if rng.random() < 0.3:
        text = word_noise(text, rng, prose_words)
    text = style(text, rng)
    if rng.random() < 0.5:
        text += "\n"                   # as read from a file
    return clean, text


class Guard:
    """The two exclusion guards over the evaluation sets (exclusions.py)."""

    def __init__(self):
        self.grams = {}
        for tid, text in evaluation_texts().items():
            for g in exclusions.ngrams(text):
                self.grams.setdefault(g, tid)

    def check(self, text):
        hit = exclusions.subject_hit(text)
        if hit:
            return "mentions the subject of %s (/%s/)" % hit
        for g in exclusions.ngrams(text):
            if g in self.grams:
                return "shares the words '%s' with %s" % (" ".join(g), self.grams[g])
        return None


def generate(seed, count, wide=False, plain=0.0, casual=0.0):
    """`count` tickets [(text, label)], labels balanced, deterministic in (seed, count).
    ValueError naming the ticket when the lexicon produces an evaluation ticket's subject."""
    rng = random.Random(seed)
    prose = prose_sentences()
    prose_words = sorted({w for p in prose for w in p.split() if w.isalpha()})
    guard = Guard()
    labels = [LABELS[i % len(LABELS)] for i in range(count)]
    rng.shuffle(labels)
    out = []
    redrawn = 0
    for label in labels:
        while True:
            clean, text = ticket(label, rng, prose, prose_words, wide, plain, casual)
            hit = exclusions.subject_hit(clean)
            if hit:                               # the lexicon itself holds an evaluation subject
                raise ValueError("generated %s ticket %r mentions the subject of %s (/%s/)"
                                 % ((label, clean) + hit))
            if guard.check(text) is None:
                break
            redrawn += 1                          # a chance combination: draw again
        out.append((text, label))
    generate.redrawn = redrawn
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--show", type=int, default=12, help="print this many tickets")
    ap.add_argument("--wide", action="store_true", help="the wide corpus (lexicon_wide.py)")
    ap.add_argument("--plain", type=float, default=0.0, help="fraction of plain tickets (lexicon_plain.py)")
    ap.add_argument("--casual", type=float, default=0.0, help="fraction of the plain tickets in a casual chat wrapper")
    a = ap.parse_args(argv)
    data = generate(a.seed, a.count, a.wide, a.plain, a.casual)
    for text, label in data[:a.show]:
        print("%-16s %s" % (label, json.dumps(text)))
    distinct = len({t for t, _ in data})
    words = sum(len(t.split()) for t, _ in data) / len(data)
    print("%d tickets, %d distinct, %.1f words on average; every one passed the exclusion guards "
          "(%d drawn again for sharing five words with an evaluation ticket)"
          % (len(data), distinct, words, generate.redrawn))


if __name__ == "__main__":
    main()
