"""What the endpoint served, per rollout, and the training rows built from it (docs/agent-programs.md).

Token in, token out: each model call of a rollout keeps the prompt ids it was given, the completion
ids it generated and their logprobs. The rows TRL trains on are built from those ids alone, never
by tokenizing the program's messages again (TRL #5224, verl's agent-loop docs):
- a call whose prompt ids start with exactly a row's ids (its prompt, then every token after it)
  continues that row: the tokens between (the tool results the program sent, the next turn's
  opening) are environment tokens, masked out of the loss (mask 0, TRL's ``env_mask``); the
  completion's tokens are the model's (mask 1);
- any other call starts a new row (the program rewrote its history, or asked for `n` > 1 and went
  on with one choice): a split, counted. GRPO trains one row per rollout, the one that holds the
  rollout's last call; the other rows are counted as dropped, never silently.
The prompt the endpoint builds for a call re-uses the ids it served for an earlier assistant
message of the same rollout (matched by its content and tool calls), so a program that sends its
history back unchanged continues one row.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field


@dataclass
class Call:
    """One choice of one model call."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    """the completion as text, special tokens kept (the tool-call blocks included)"""
    malformed: int = 0
    """tool-call blocks in it that were not a call (returned as text)"""
    tool_calls: int = 0
    unknown_tool_calls: int = 0


@dataclass
class Row:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    """per completion token: the sampling logprob for the model's tokens, 0.0 for environment tokens"""
    last_call: int = -1

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def rows_of(calls: list[Call]) -> list[Row]:
    """The rows of a rollout's calls, in call order (module docstring): a call continues the longest
    row whose ids are a prefix of its prompt, else starts a new one."""
    rows: list[Row] = []
    for index, call in enumerate(calls):
        best = None
        for row in rows:
            n = len(row.prompt_ids) + len(row.completion_ids)
            if n <= len(call.prompt_ids) and call.prompt_ids[:n] == row.ids and (best is None or n > len(best.ids)):
                best = row
        if best is None:
            best = Row(prompt_ids=list(call.prompt_ids))
            rows.append(best)
        else:
            between = call.prompt_ids[len(best.ids):]
            best.completion_ids += between
            best.env_mask += [0] * len(between)
            best.logprobs += [0.0] * len(between)
        best.completion_ids += call.completion_ids
        best.env_mask += [1] * len(call.completion_ids)
        best.logprobs += call.logprobs
        best.last_call = index
    return rows


def message_key(content: str, tool_calls: list[tuple[str, dict]]) -> str:
    """An assistant message as the endpoint matches it to what it served: its text and its calls
    (name, arguments as parsed JSON: clients re-serialize arguments)."""
    return json.dumps([content.strip(), [[n, a] for n, a in tool_calls]], sort_keys=True, ensure_ascii=False)


@dataclass
class Limits:
    """A rollout's sampling and bounds: the run's, not the program's (the GRPO ratio assumes the
    policy samples as configured); the client's temperature and top_p are not used on a rollout."""

    temperature: float
    top_p: float
    max_new_tokens: int
    """one call's completion (the run's per-turn budget; a request's max_tokens may lower it)"""
    max_total_tokens: int | None
    """all of the trained row's completion ids, tool turns included (TRL's max_completion_length)"""
    max_calls: int
    seed: int


class Rollout:
    """The calls of one rollout and the assistant messages it served."""

    def __init__(self, rollout_id: str, limits: Limits):
        self.id = rollout_id
        self.limits = limits
        self.calls: list[Call] = []
        self.served: dict[str, list[int]] = {}
        self.last_messages: list[dict] = []
        self.last_reply: dict | None = None
        self.ended_by = ""
        """"max_turns" or "max_tokens" once a limit answered a call with nothing"""
        self.closed = False
        self.lock = threading.Lock()

    def add(self, call: Call, reply_key: str, served_ids: list[int], messages: list[dict], reply: dict) -> bool:
        """Record one choice (False once the rollout is closed: nothing is recorded). `served_ids`: the
        assistant turn's ids after its opening (a forced call's opening, then the completion)."""
        with self.lock:
            if self.closed:
                return False
            self.calls.append(call)
            self.served.setdefault(reply_key, served_ids)
            self.last_messages, self.last_reply = messages, reply
            return True

    def budget(self, prompt_ids: list[int]) -> int:
        """The completion tokens a call with this prompt may still generate: the per-call budget,
        bounded by what the row it continues has left (a new row has the whole budget)."""
        lim = self.limits
        if lim.max_total_tokens is None:
            return lim.max_new_tokens
        used = 0
        for row in rows_of(self.calls):
            if len(row.ids) <= len(prompt_ids) and prompt_ids[:len(row.ids)] == row.ids:
                used = max(used, len(prompt_ids) - len(row.prompt_ids))
        return min(lim.max_new_tokens, lim.max_total_tokens - used)

    def transcript(self) -> list[dict]:
        """The program's last request's messages and the model's last reply (OpenAI's format)."""
        return self.last_messages + ([self.last_reply] if self.last_reply else [])


class RolloutBook:
    """The open rollouts of one endpoint, by id; the api key every rollout URL requires."""

    def __init__(self):
        self.api_key = "rollout-" + secrets.token_hex(16)
        self._open: dict[str, Rollout] = {}
        self._lock = threading.Lock()

    def open(self, limits: Limits) -> Rollout:
        rollout = Rollout(secrets.token_hex(12), limits)
        with self._lock:
            self._open[rollout.id] = rollout
        return rollout

    def get(self, rollout_id: str) -> Rollout | None:
        with self._lock:
            return self._open.get(rollout_id)

    def close(self, rollout: Rollout) -> None:
        """No call reaches it after this (a late call of a program that timed out is a 404)."""
        with self._lock:
            self._open.pop(rollout.id, None)
        with rollout.lock:
            rollout.closed = True
