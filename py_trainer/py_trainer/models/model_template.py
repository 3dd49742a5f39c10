"""A model's own chat template as the agent template (docs/agents.md, "The episode format"): the
pieces the episode runner, the warm start and the endpoint concatenate, cut out of renderings of
the model's template. `agent_format.episode_template` decides when it is used.

How the pieces are cut, as TRL's tool loop cuts them (`GRPOTrainer._get_tool_suffix_ids`): the
prompt is the conversation rendered with the generation prompt; an assistant turn is what its
message adds to a one-line conversation rendered with the generation prompt, up to the turn's end
token; what follows an assistant turn (tool turns, then the next assistant opening) is the
difference between a conversation rendered with those messages (and the generation prompt) and
without them, cut after the assistant's end token.

How untrusted text stays text: every untrusted string (system prompt, task prompt, tool output and
name, the tools' names, descriptions and schemas, a call's arguments) is replaced by a unique
sentinel, and the template is rendered twice, with the sentinels and with the real strings. The
sentinel rendering says where the template's own text is, the real one which form each string
took (as is, or escaped by ``tojson``); when the two do not line up (the template branched on an
untrusted string, or changed one) the rendering is refused (`Unaligned`), never guessed. The
template's own text is split at the vocabulary's added tokens, each one a marker (`Part`); an
untrusted string is never a marker, so `agent_format.encode` gives it plain text's ids and a tool
output holding ``<|im_end|>`` cannot end its turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid

Part = tuple[str, bool]
"""A piece of a rendered episode: (text, True when it is one of the template's own markers: for the
ChatML template IM_START or the turn's end, for a model's template an added token its own text
writes). Every other piece is text, whoever wrote it."""

PROBE_USER = {"role": "user", "content": "hi"}
"""The one-line conversation an assistant turn is cut from (TRL's dummy user turn)."""


class Unaligned(ValueError):
    """A rendering whose untrusted strings cannot be told from the template's own text."""


class Masker:
    """Untrusted strings -> sentinels, one per distinct string (a template that compares two strings,
    a parameter name with the schema's "required" list, compares their sentinels alike)."""

    def __init__(self, controls: frozenset[str]):
        self.tag = "zz" + uuid.uuid4().hex[:12]
        self.pattern = re.compile(self.tag + r"n(\d+)z")
        self.controls = controls
        self.originals: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, text: str) -> str:
        if not text:
            return text  # nothing to hide, and a template's `if content` sees the same
        if text not in self.index:
            self.index[text] = len(self.originals)
            self.originals.append(text)
        return f"{self.tag}n{self.index[text]}z"

    def has_control(self, text: str) -> bool:
        return any(c in text for c in self.controls)

    def json(self, obj, key: str | None = None, keyed: bool = False):
        """A tool, schema or arguments object with its strings masked: every string value but a
        ``"type"`` (templates read it: "function", "object") that holds no control text; every key of
        a ``properties`` object or of the arguments (`keyed`: names the user chose), and any key
        holding control text."""
        if isinstance(obj, str):
            return obj if key == "type" and not self.has_control(obj) else self(obj)
        if isinstance(obj, dict):
            return {(self(k) if keyed or self.has_control(k) else k): self.json(v, k, not keyed and k == "properties")
                    for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.json(v, key) for v in obj]
        return obj

    def message(self, m: dict) -> dict:
        out = dict(m)
        for k in ("content", "name", "tool_call_id"):
            if isinstance(m.get(k), str):
                out[k] = self(m[k])
        if m.get("tool_calls"):
            out["tool_calls"] = [{**c, **({"id": self(c["id"])} if isinstance(c.get("id"), str) else {}),
                                  "function": {**c["function"], "name": self(c["function"]["name"]),
                                               "arguments": self.json(c["function"]["arguments"], keyed=True)}}
                                 for c in m["tool_calls"]]
        return out


def forms(text: str) -> list[str]:
    """How a template may write an untrusted string: as is, or escaped by ``tojson`` (transformers'
    writes non-ASCII as is; Python's default escapes it)."""
    return list(dict.fromkeys([text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]]))


def drop(parts: list[Part], n: int) -> list[Part]:
    """`parts` without their first `n` characters (a cut inside a marker is refused)."""
    out: list[Part] = []
    for text, marker in parts:
        if n >= len(text):
            n -= len(text)
            continue
        if n and marker:
            raise Unaligned(f"the cut falls inside the marker {text!r}")
        out.append((text[n:], marker))
        n = 0
    return out


def keep(parts: list[Part], n: int) -> list[Part]:
    """The first `n` characters of `parts` (a cut inside a marker is refused)."""
    out: list[Part] = []
    for text, marker in parts:
        if n <= 0:
            break
        if len(text) > n and marker:
            raise Unaligned(f"the cut falls inside the marker {text!r}")
        out.append((text[:n], marker))
        n -= len(text)
    return out


def wrapped(tools: list[dict]) -> list[dict] | None:
    """Function dicts in OpenAI's tool format, as `apply_chat_template` takes them (None: no tools)."""
    return [{"type": "function", "function": t} for t in tools] or None


class ModelTemplate:
    """The model's own template: the same methods as `agent_format.ChatmlTemplate`, each returning
    the `Part`s `agent_format.encode` tokenizes. Built by `agent_format.episode_template`, which
    checks first that the template renders tools, keeps prefixes and writes Hermes-style calls."""

    own = True

    def __init__(self, tokenizer, text: str, call_open: str):
        self.tokenizer = tokenizer
        self.text = text
        """the Jinja template, as the tokenizer holds it"""
        self.sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.call_open = call_open
        added = tokenizer.get_added_vocab()
        self.controls = frozenset(added)
        by_length = sorted(added, key=len, reverse=True)
        self.split = re.compile("(" + "|".join(map(re.escape, by_length)) + ")") if added else None
        probe = Masker(self.controls)
        turn = self.render([PROBE_USER, {"role": "assistant", "content": probe("ok")}], None, False)
        tail = turn.split(probe("ok"), 1)[1]
        self.end = next((t for t in by_length if tail.startswith(t)), "")
        """the token that ends the model's turn: the added token the template writes right after an
        assistant message's content"""
        if not self.end:
            raise Unaligned(f"the template ends an assistant turn with {tail[:20]!r}, not one token of the vocabulary")
        self.stops = sorted({added[self.end], tokenizer.eos_token_id} - {None})

    def render(self, messages: list[dict], tools: list[dict] | None, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, chat_template=self.text, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def parts(self, messages: list[dict], tools: list[dict] | None = None, generation_prompt: bool = False) -> list[Part]:
        """The template's rendering of a conversation as parts: its own text split at added tokens,
        each untrusted string one text part (module docstring)."""
        masker = Masker(self.controls)
        masked = self.render([masker.message(m) for m in messages], masker.json(tools), generation_prompt)
        real = self.render(messages, tools, generation_prompt)
        pieces = masker.pattern.split(masked)  # own text, sentinel index, own text, ...
        out: list[Part] = []
        pos = 0
        for k in range(0, len(pieces), 2):
            own = pieces[k]
            if not real.startswith(own, pos):
                raise Unaligned("the template writes other text around the real strings than around their sentinels")
            out += self.own_parts(own)
            pos += len(own)
            if k + 1 == len(pieces):
                break
            after = pieces[k + 2]
            form = next((f for f in forms(masker.originals[int(pieces[k + 1])])
                         if real.startswith(f, pos) and real.startswith(after, pos + len(f))), None)
            if form is None:
                raise Unaligned("the template changed an untrusted string beyond escaping it")
            out.append((form, False))
            pos += len(form)
        if pos != len(real):
            raise Unaligned("the real rendering is longer than the sentinel one")
        return out

    def own_parts(self, text: str) -> list[Part]:
        if self.split is None:
            return [(text, False)] if text else []
        return [(p, p in self.controls) for p in self.split.split(text) if p]

    def after(self, before: str, parts: list[Part]) -> list[Part]:
        """`parts` past the text `before`, which must be where they start."""
        if not "".join(t for t, _ in parts).startswith(before):
            raise Unaligned("the template does not keep a conversation's prefix")
        return drop(parts, len(before))

    # -- the pieces (agent_format.ChatmlTemplate has the same) -----------------------------------

    def prompt_messages(self, system_prompt: str, tools: list[dict], user: str) -> list[dict]:
        """The transcript's first messages: a system message only when there is a system prompt (the
        template writes the tools, and its own default system turn if it has one)."""
        return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [{"role": "user", "content": user}]

    def prompt_parts(self, system_prompt: str, tools: list[dict], user: str) -> list[Part]:
        return self.parts(self.prompt_messages(system_prompt, tools, user), wrapped(tools), True)

    def opening_parts(self, system: str, tools: list[dict], messages: list[dict]) -> list[Part]:
        """A conversation up to its first assistant turn, and that turn's opening."""
        return self.parts(([{"role": "system", "content": system}] if system else []) + messages, wrapped(tools), True)

    def assistant_parts(self, message: dict) -> list[Part]:
        """An assistant message as the template writes it, up to and with its end token."""
        rest = self.after(self.render([PROBE_USER], None, True), self.parts([PROBE_USER, message]))
        ends = [i for i, (t, marker) in enumerate(rest) if marker and t == self.end]
        if not ends:
            raise Unaligned("the template wrote no end token after the assistant message")
        return rest[:ends[-1] + 1]

    def after_assistant_parts(self, messages: list[dict]) -> list[Part]:
        """What follows an assistant turn's end token: `messages` (tool results, a user's next turn)
        and the next assistant opening. Cut as TRL cuts its tool suffix, after a call to the first
        tool message's tool (a template may write the name)."""
        name = next((m["name"] for m in messages if m.get("name")), "") or "tool"
        head = [PROBE_USER, {"role": "assistant", "content": "",
                             "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}]}]
        before = self.render(head, None, False)
        before = before[:before.rindex(self.end) + len(self.end)]
        return self.after(before, self.parts(head + messages, None, True))

    def call_opening(self, name: str | None) -> list[Part]:
        """The start of a call the endpoint forces (tool_choice): the call's opening marker, and for
        a named tool everything before the arguments, as the template writes a call."""
        probe = "zz_arguments_start"
        turn = self.assistant_parts({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": name or "tool", "arguments": {probe: 0}}}]})
        text = "".join(t for t, _ in turn)
        start = text.index(self.call_open)
        cut = start + len(self.call_open) if name is None else text.rindex("{", 0, text.index(f'"{probe}"', start))
        return keep(turn, cut)
