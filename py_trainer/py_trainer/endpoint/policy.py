"""A policy served on the endpoint: a chat request rendered to token ids by the agent template, the
model's turn generated (requests that wait together generate as one batch), its tool-call text
parsed into OpenAI ``tool_calls`` (docs/agent-programs.md).

Rendering is the episode runner's (`models.agent_format.episode_template`: the model's own chat
template when it renders tools, else our ChatML one): the system turn (system and developer
messages, then the request's tools), user, assistant and tool turns, each piece through `encode`,
so untrusted text never becomes a control token, and pieces cut where the episode runner cuts them
(at each assistant turn), so a program that replays an agent task's episode gets the episode
runner's ids. An assistant message the endpoint served on the same rollout
is not rendered again: its served ids are used (`rollouts`, token in, token out).

Tool calls: a well-formed ``<tool_call>`` block naming one of the request's tools becomes a
``tool_calls`` entry (arguments checked against the tool's schema); any other block stays in the
reply's text and is counted on the rollout as a malformed or unknown call, never a 500.
``tool_choice`` "none" leaves the tools out of the prompt and parses no call; "required" and a named
tool start the reply with the call's opening (``<tool_call>``, and the name, as the template writes a
call), written by the endpoint as prompt tokens, so the model writes the rest.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field

from py_trainer.agents.spec import arguments_problem
from py_trainer.endpoint.chat import ChatRequest, OpenAIError, bad
from py_trainer.endpoint.rollouts import Call, Limits, Rollout, message_key
from py_trainer.models.agent_format import CALL_OPEN, encode, episode_template, parse_turn, render

BATCH_WAIT_S = 0.02
"""How long the generator waits for more requests before it starts a batch."""
MAX_BATCH = 64
"""Sequences per generate call."""


@dataclass
class Job:
    prompt_ids: list[int]
    n: int
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    out: list = field(default_factory=list)
    """n (completion ids, logprobs) pairs once done"""
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class LogprobRecorder:
    """A logits processor that keeps each generated token's logprob under the policy at the
    sampling temperature (what TRL computes for the same token: logits / temperature, no top-p),
    holding one step's distribution at a time: the token chosen at step t is the last input id at
    step t + 1."""

    def __init__(self, temperature: float):
        self.temperature = temperature if temperature > 0 else 1.0
        self.prev = None
        self.taken: list = []

    def __call__(self, input_ids, scores):
        self._take(input_ids[:, -1])
        self.prev = (scores.float() / self.temperature).log_softmax(-1)
        return scores

    def _take(self, tokens) -> None:
        if self.prev is not None:
            self.taken.append(self.prev.gather(1, tokens[:, None])[:, 0])
            self.prev = None

    def finish(self, last_tokens) -> list[list[float]]:
        import torch

        self._take(last_tokens)
        if not self.taken:
            return [[] for _ in range(len(last_tokens))]
        return torch.stack(self.taken, 1).tolist()


class Policy:
    """One model and tokenizer served under a name; `generate` is called by request threads."""

    def __init__(self, name: str, model, tokenizer, *, max_new_tokens: int = 256):
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.template = episode_template(tokenizer)
        """the agent template (`agent_format.episode_template`): the model's own or our ChatML one"""
        self.stops = self.template.stops
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.max_new_tokens = max_new_tokens
        config = getattr(model, "config", None)
        self.context = int(getattr(config, "max_position_embeddings", 0) or 0) or None
        self.jobs: queue.Queue[Job] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # -- rendering ---------------------------------------------------------------------------------

    def render(self, req: ChatRequest, rollout: Rollout | None) -> tuple[list[int], list[int], str]:
        """(prompt ids, the forced opening's ids, its text) of a request (module docstring)."""
        t = self.template
        msgs = req.messages
        first = 0
        systems = []
        while first < len(msgs) and msgs[first].role == "system":
            systems.append(msgs[first].content)
            first += 1
        system = "\n\n".join(s for s in systems if s)
        tools = req.tools if req.tool_choice != "none" else []
        turns = [message_dict(m) for m in msgs[first:]]
        cuts = [i for i, m in enumerate(turns) if m["role"] == "assistant"] + [len(turns)]
        try:
            ids = encode(self.tokenizer, t.opening_parts(system, tools, turns[:cuts[0]]))
            for i, upto in zip(cuts, cuts[1:]):
                m = msgs[first + i]
                served = rollout.served.get(message_key(m.content, [(c.name, c.arguments) for c in m.tool_calls])) \
                    if rollout is not None else None
                if served is not None:
                    ids += served + ([] if served and served[-1] in self.stops else encode(self.tokenizer, [(t.end, True)]))
                else:
                    ids += encode(self.tokenizer, t.assistant_parts(turns[i]))
                ids += encode(self.tokenizer, t.after_assistant_parts(turns[i + 1:upto]))
            forced = [] if req.tool_choice in (None, "auto", "none") else \
                t.call_opening(None if req.tool_choice == "required" else req.tool_choice)
        except ValueError as err:  # the model's own template (`model_template.Unaligned`); ours renders anything
            raise bad("messages", f"the model's chat template cannot render these messages: {err}") from None
        return ids, encode(self.tokenizer, forced) if forced else [], render(forced)

    # -- generation --------------------------------------------------------------------------------

    def generate(self, prompt_ids: list[int], *, n: int, max_new_tokens: int, temperature: float, top_p: float,
                 seed: int | None) -> list[tuple[list[int], list[float]]]:
        """n (completion ids, logprobs), each cut after its stop token or at `max_new_tokens`."""
        self._ensure_thread()
        job = Job(prompt_ids, n, max_new_tokens, temperature, top_p, seed)
        self.jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.out

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=f"endpoint-{self.name}", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            jobs = [self.jobs.get()]
            time.sleep(BATCH_WAIT_S)
            while True:
                try:
                    jobs.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            for batch in batches(jobs):
                try:
                    self._run(batch)
                except BaseException as err:  # noqa: BLE001 - handed to the waiting request, which answers 500
                    for job in batch:
                        job.error = err
                finally:
                    for job in batch:
                        job.done.set()

    def _run(self, batch: list[Job]) -> None:
        import torch
        from transformers import LogitsProcessorList

        from py_trainer.models.loading import pad_batch

        head = batch[0]
        greedy = head.temperature == 0
        rows = [j.prompt_ids for j in batch for _ in range(j.n)]
        device = next(self.model.parameters()).device
        input_ids, mask = pad_batch(rows, 0, self.pad_id, device)
        recorder = LogprobRecorder(head.temperature)
        if head.seed is not None:
            torch.manual_seed(head.seed % 2**63)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                gen = self.model.generate(input_ids=input_ids, attention_mask=mask, do_sample=not greedy,
                                          temperature=None if greedy else head.temperature,
                                          top_p=None if greedy else head.top_p, top_k=None if greedy else 0,
                                          max_new_tokens=max(j.max_new_tokens for j in batch),
                                          pad_token_id=self.pad_id, eos_token_id=self.stops,
                                          logits_processor=LogitsProcessorList([recorder]))
        finally:
            if was_training:
                self.model.train()
        new = gen[:, input_ids.shape[1]:]
        logprobs = recorder.finish(new[:, -1]) if new.shape[1] else [[] for _ in rows]
        new = new.tolist()
        k = 0
        for job in batch:
            for _ in range(job.n):
                ids = new[k][:job.max_new_tokens]
                stop_at = next((i for i, t in enumerate(ids) if t in self.stops), None)
                ids = ids if stop_at is None else ids[:stop_at + 1]
                job.out.append((ids, logprobs[k][:len(ids)]))
                k += 1

    # -- one request -------------------------------------------------------------------------------

    def complete(self, req: ChatRequest, rollout: Rollout | None) -> dict:
        """The chat.completion object for a request (on a rollout: recorded there)."""
        lim = rollout.limits if rollout is not None else Limits(1.0, 1.0, self.max_new_tokens, None, 0, 0)
        prompt_ids, forced_ids, forced = self.render(req, rollout)
        prompt_ids = prompt_ids + forced_ids
        budget = lim.max_new_tokens if req.max_tokens is None else min(req.max_tokens, lim.max_new_tokens)
        ended = ""
        if rollout is not None:
            if len(rollout.calls) >= lim.max_calls:
                ended = "max_turns"
            budget = min(budget, rollout.budget(prompt_ids))
            if budget <= 0:
                ended = ended or "max_tokens"
        if self.context is not None and len(prompt_ids) + max(budget, 1) > self.context:
            raise bad("messages", f"the prompt is {len(prompt_ids)} tokens; with {max(budget, 1)} to generate it is over "
                                  f"the model's context of {self.context} tokens", code="context_length_exceeded")
        if ended:  # a limit: an empty reply that ends an agent's loop (the rollout records why)
            rollout.ended_by = rollout.ended_by or ended
            outs = [([], [])] * req.n
        else:
            temperature = lim.temperature if rollout is not None or req.temperature is None else req.temperature
            top_p = lim.top_p if rollout is not None or req.top_p is None else req.top_p
            seed = req.seed if rollout is None else None  # a rollout's calls batch together: not seeded one by one
            outs = self.generate(prompt_ids, n=req.n, max_new_tokens=budget, temperature=temperature, top_p=top_p,
                                 seed=seed)
        choices = []
        usage = 0
        for index, (ids, logprobs) in enumerate(outs):
            choice, call = self.choice(req, index, forced, ids, logprobs, 0 if ended else budget)
            choices.append(choice)
            usage += len(ids)
            if rollout is not None and not ended:
                call.prompt_ids = prompt_ids
                reply = choice["message"]
                key = message_key(reply.get("content") or "", [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                                                               for c in reply.get("tool_calls", [])])
                if not rollout.add(call, key, forced_ids + call.completion_ids, [message_dict(m) for m in req.messages],
                                   reply):
                    raise OpenAIError(404, f"the rollout {rollout.id} ended while this call ran", code="rollout_not_found")
        return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                "model": req.model, "choices": choices,
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": usage,
                          "total_tokens": len(prompt_ids) * max(len(outs), 1) + usage}}

    def choice(self, req: ChatRequest, index: int, forced: str, ids: list[int], logprobs: list[float],
               budget: int) -> tuple[dict, Call]:
        """One choice of a reply, and its record (prompt ids set by the caller)."""
        stopped = bool(ids) and ids[-1] in self.stops
        text = forced + self.tokenizer.decode(ids[:-1] if stopped else ids, skip_special_tokens=False)
        cut = cut_at_stop(text, req.stop)
        if cut is not None:
            text, stopped = cut, True
        call = Call(prompt_ids=[], completion_ids=list(ids), logprobs=logprobs, text=text)
        message: dict = {"role": "assistant", "content": text}
        if req.tool_choice != "none" and CALL_OPEN in text:
            parsed = parse_turn(text)
            known = {t["name"]: t for t in req.tools}
            calls, kept = [], []
            for b in parsed.blocks:
                if "malformed" in b:
                    call.malformed += 1
                elif b["name"] not in known:
                    call.unknown_tool_calls += 1
                elif arguments_problem(known[b["name"]].get("parameters", {}), b["arguments"]) is not None:
                    call.malformed += 1
                else:
                    calls.append(b)
                    continue
                kept.append(b)
            call.tool_calls = len(calls)
            if calls and not kept:
                message["content"] = parsed.content or None
                message["tool_calls"] = [{"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                                          "function": {"name": b["name"],
                                                       "arguments": json.dumps(b["arguments"], ensure_ascii=False)}}
                                         for b in calls]
            elif calls:  # some blocks are not calls: the whole turn stays text, so nothing the model wrote is lost
                call.tool_calls = 0
        finish = "tool_calls" if "tool_calls" in message else ("stop" if stopped else ("length" if ids or budget <= 0 else "stop"))
        choice = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        if req.logprobs:
            choice["logprobs"] = {"content": [{"token": self.tokenizer.decode([t]), "logprob": lp, "bytes": None,
                                               "top_logprobs": []} for t, lp in zip(ids, logprobs)]}
        return choice, call


def batches(jobs: list[Job]) -> list[list[Job]]:
    """Jobs that may generate together: the same sampling settings and no seed of their own (a
    seeded request generates alone, so its seed decides its tokens), at most MAX_BATCH sequences."""
    out: list[list[Job]] = []
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        if job.seed is not None:
            out.append([job])
            continue
        groups.setdefault((job.temperature, job.top_p), []).append(job)
    for group in groups.values():
        batch, size = [], 0
        for job in group:
            if batch and size + job.n > MAX_BATCH:
                out.append(batch)
                batch, size = [], 0
            batch.append(job)
            size += job.n
        out.append(batch)
    return out


def cut_at_stop(text: str, stops: list[str]) -> str | None:
    """The text before the first stop sequence, or None when none occurs (OpenAI's `stop`)."""
    hits = [text.find(s) for s in stops if s in text]
    return text[:min(hits)] if hits else None


def message_dict(m) -> dict:
    """A request's message as the rollout's transcript keeps it (OpenAI's format)."""
    out: dict = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out
