"""K3's chat format (k3-model.md 9.1), written out again in Python for the end-to-end tests:
the prompt a conversation renders to, and the reading of a reply into its channels
(jobs/chat/chat_reply.h's rules). The tests compare the program against these, so they are
kept independent of the C++ code: pieces are built from the document's text, token bytes come
straight from the model's tiktoken.model, control ids from its tokenizer_config.json."""
import base64
import json
import os
import re

EFFORT_BODY = ("`thinking_effort` guides on how much to think in your thinking channel (not including the "
               "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
               "Now the system is invoked with `thinking_effort={}`.")
EOM, OPEN, CLOSE, SEP = "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>"


def message_text(content):
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def prompt_pieces(messages, thinking=False, effort="max"):
    """The prompt as pieces: ("c", control token name) or ("t", text)."""
    out = []

    def element_open(tag):
        out.extend([("c", OPEN), ("t", tag), ("c", SEP)])

    def element_close(name):
        out.extend([("c", CLOSE), ("t", name), ("c", SEP)])

    if thinking:
        element_open('message role="system" type="thinking-effort"')
        out.append(("t", EFFORT_BODY.format(effort)))
        element_close("message")
        out.append(("c", EOM))
    for m in messages:
        role = "system" if m["role"] == "developer" else m["role"]
        element_open('message role="%s"' % role)
        if role == "assistant":
            if thinking:
                element_open("think")
                out.append(("t", m.get("reasoning_content") or ""))
                element_close("think")
            element_open("response")
            out.append(("t", message_text(m["content"])))
            element_close("response")
        else:
            out.append(("t", message_text(m["content"])))
        element_close("message")
        out.append(("c", EOM))
    element_open('message role="assistant"')
    element_open("think" if thinking else "response")
    return out


def prompt_text(pieces):
    return "".join(text for _, text in pieces)


class Vocab:
    """A model directory's tokens: bytes per rank, special names and ids."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "tiktoken.model")) as f:
            self.ranks = [base64.b64decode(line.split()[0]) for line in f if line.strip()]
        with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
            config = json.load(f)
        self.special = {tok["content"]: int(i) for i, tok in config["added_tokens_decoder"].items()}
        self.eom, self.open, self.close, self.sep = (self.special[n] for n in (EOM, OPEN, CLOSE, SEP))

    def is_special(self, i):
        return i >= len(self.ranks)

    def token_bytes(self, i):
        if not self.is_special(i):
            return self.ranks[i]
        return next(name for name, sid in self.special.items() if sid == i).encode()

    def prompt_ids(self, pieces, encode):
        """Ids of the pieces: control names by id, text runs by `encode(text)` (plain)."""
        ids = []
        for kind, text in pieces:
            if kind == "c":
                ids.append(self.special[text])
            elif text:
                ids.extend(encode(text))
        return ids

    def read_reply(self, ids, thinking, stop=()):
        """(content, reasoning, ended, tokens read): content None when the response channel was
        never reached, reasoning None when thinking is off; texts as bytes."""
        place, channel = "body", "think" if thinking else "response"
        text = {"think": b"", "response": b""}
        response_opened = not thinking
        tag = b""
        ended = False
        n = 0
        for n, i in enumerate(ids, 1):
            if i == self.eom:
                ended = True
                break
            if i in (self.open, self.close):
                place, tag = "open" if i == self.open else "close", b""
                continue
            if i == self.sep:
                if place == "open":
                    name = re.split(rb"[ \t\r\n]", tag)[0]
                    if name == b"response":
                        channel, response_opened = "response", True
                    elif name == b"think" and thinking:
                        channel = "think"
                    else:
                        channel = None
                    place = "body"
                elif place == "close":
                    place = "between"
                continue
            if self.is_special(i):
                continue
            if place in ("open", "close"):
                tag += self.ranks[i]
            elif place == "body" and channel:
                before = len(text[channel])
                text[channel] += self.ranks[i]
                hits = [text[channel].find(s.encode(), max(0, before - len(s.encode()) + 1)) for s in stop]
                hits = [h for h in hits if h >= 0]
                if hits:
                    text[channel] = text[channel][:min(hits)]
                    ended = True
                    break
        return (text["response"] if response_opened else None, text["think"] if thinking else None, ended,
                n if ids else 0)
