"""The one episode runner: training's rollouts, the held-out measurement and Evaluate all run agent
episodes through `run_episodes` (docs/agents.md, docs/architecture.md "Agents").

An episode: the task's prompt under the agent template (`agent_format.episode_template`: the
model's own chat template when it renders tools, else our ChatML one), then up to `max_turns`
model turns. A turn with ``<tool_call>`` blocks has each call run by the TS agent (`tool_host`), and
the results go back as tool turns; a turn without one is the final answer. Episodes of one batch
decode together (one `decoding.decode_batch` call per turn for every episode still going,
left-padded; a row leaves the batch once its turn has ended, instead of decoding padding until
the batch's longest row ends), each from its own KV cache of the turns before (`PrefixCaches`): a
turn reads only its new tokens, and the first turn reads the prompt tokens every episode shares
(system prompt, tools) once. Where that decoder does not run (`PrefixCaches.fits`), each turn is a
`generate` call over the whole transcript.

Token ids are built by concatenation, never by re-tokenizing the transcript (TRL's tool loop does
the same): `completion_ids` is every model-generated token (mask 1, trained on) and every tool
turn's tokens (mask 0, masked out of the loss: TRL's ``env_mask``). The decoded ids are exactly
the agent template's rendering of the transcript, and the template's markers are the only control
tokens in them: prompts and tool outputs are encoded as plain text (`agent_format.encode`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from py_trainer.agents.spec import AgentSetup
from py_trainer.agents.tool_host import ToolHost
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.agent_format import EpisodeTemplate, encode, episode_template, parse_turn
from py_trainer.models.loading import pad_batch

TOOL_THREADS = 16
"""Tool calls (and scorings) of one turn run concurrently, at most this many at a time."""


def cut_note(limit: int) -> str:
    """Appended to a tool output cut at `limit` characters (AgentSpec.max_tool_output_chars): this
    cut is the only one the model sees. The TS host sends at most one character past the limit (a
    bound on the wire, no note), so the note cannot say the full length."""
    return f"\n[error: output cut at {limit} characters]"


@dataclass
class Episode:
    task_id: str
    episode_id: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    """1 for a model-generated token, 0 for a tool turn's token (masked out of the loss)"""
    messages: list[dict] = field(default_factory=list)
    stats: pb.EpisodeStats = field(default_factory=pb.EpisodeStats)
    final_answer: str = ""
    """set here once, sent to the scorers and Evaluate's completion: the answering turn's text
    without its tool-call blocks when the episode ended by an answer, else "" (docs/agents.md)"""
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return bool(self.stats.ended_by)

    def record(self) -> dict:
        """The episode as the run folder's sample files and Evaluate's result keep it."""
        return {"task_id": self.task_id, "episode_id": self.episode_id, "messages": self.messages,
                "final_answer": self.final_answer, "scores": self.scores,
                "stats": {"turns": self.stats.turns, "tool_calls": self.stats.tool_calls,
                          "tool_errors": self.stats.tool_errors, "unknown_tool_calls": self.stats.unknown_tool_calls,
                          "malformed_calls": self.stats.malformed_calls, "ended_by": self.stats.ended_by}}


def start_episodes(tokenizer, setup: AgentSetup, tasks: list[tuple[str, str]], episode_ids: list[str]) -> list[Episode]:
    """One episode per (task id, prompt), its prompt rendered and tokenized."""
    template = episode_template(tokenizer)
    out = []
    for (task_id, prompt), eid in zip(tasks, episode_ids):
        ids = encode(tokenizer, template.prompt_parts(setup.system_prompt, setup.tools, prompt))
        out.append(Episode(task_id=task_id, episode_id=eid, prompt_ids=ids,
                           messages=template.prompt_messages(setup.system_prompt, setup.tools, prompt)))
    return out


def run_episodes(model, tokenizer, setup: AgentSetup, host: ToolHost, episodes: list[Episode], *,
                 temperature: float, top_p: float, max_new_tokens: int, max_total_tokens: int | None,
                 seed: int, reuse_cache: bool = True) -> list[Episode]:
    """Run every episode to its end (in place; returned for convenience), then score each.

    `max_new_tokens` bounds one turn; `max_total_tokens` (training's max_completion_length) bounds
    all of an episode's completion tokens, tool turns included, as TRL's does; None = no bound.
    temperature 0 is greedy. Sampling re-seeds torch per turn from (seed, turn). `reuse_cache`
    False re-prefills every turn (`PrefixCaches`: the same tokens; tests and scripts/bench_agent.py
    compare the two)."""
    import torch

    was_training = model.training
    model.eval()
    template = episode_template(tokenizer)
    stops = template.stops
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    greedy = temperature == 0
    loop = PrefixCaches.fits(model, greedy)  # decoding.decode_batch: ended rows leave a turn's batch
    caches = PrefixCaches(model) if reuse_cache and loop else None
    if caches:
        caches.share_prompt_prefix(episodes, device)
    try:
        with ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix="agent-tools") as pool:
            for turn in range(setup.max_turns):
                active = [e for e in episodes if not e.done]
                if not active:
                    break
                budgets = [max_new_tokens if max_total_tokens is None
                           else min(max_new_tokens, max_total_tokens - len(e.completion_ids)) for e in active]
                for e, b in zip(active, budgets):
                    if b <= 0:
                        e.stats.ended_by = "max_tokens"
                pairs = [(e, b) for e, b in zip(active, budgets) if b > 0]
                if not pairs:
                    break
                rows = [e.prompt_ids + e.completion_ids for e, _ in pairs]
                input_ids, mask = pad_batch(rows, 0, pad_id, device)
                longest = max(b for _, b in pairs)
                torch.manual_seed((seed * 1_000_003 + turn) % 2**63)
                if loop:
                    new, held = decode_turn(model, input_ids, mask, [b for _, b in pairs], stops, pad_id,
                                            caches.batch([e for e, _ in pairs], rows, longest) if caches else None,
                                            temperature=temperature, top_p=top_p)
                else:
                    with torch.no_grad():
                        gen = model.generate(input_ids=input_ids, attention_mask=mask, do_sample=not greedy,
                                             temperature=None if greedy else temperature,
                                             top_p=None if greedy else top_p, top_k=None if greedy else 0,
                                             max_new_tokens=longest, pad_token_id=pad_id, eos_token_id=stops)
                    new = gen[:, input_ids.shape[1]:].tolist()
                calls = []
                for (e, budget), ids in zip(pairs, new):
                    calls += take_turn(e, tokenizer, ids, budget, stops, setup)
                if caches:
                    caches.keep([e for e, _ in pairs], rows, held)
                results = list(pool.map(lambda c: run_call(host, setup, *c), calls))
                finish_turn(tokenizer, setup, template, pairs, calls, results, max_total_tokens, turn)
            for e in episodes:
                if not e.done:
                    e.stats.ended_by = "max_turns"
            scored = pool.map(lambda e: host.score(e.task_id, e.episode_id, e.messages, e.stats, e.final_answer,
                                                   setup.scorer_names), episodes)
            for e, scores in zip(episodes, scored):
                e.scores = scores
    finally:
        if was_training:
            model.train()
    return episodes


def decode_turn(model, input_ids, mask, budgets: list[int], stops: list[int], pad_id: int, cache, *,
                temperature: float, top_p: float) -> tuple[list[list[int]], list | None]:
    """One turn of a batch through `decoding.decode_batch` (greedy or sampled; a row leaves the batch
    once it stops or spends its budget): each row's new ids, and when `cache` (from
    `PrefixCaches.batch`) is given, what each row's cache holds after the turn, as (positions filled,
    per layer (keys, values) [heads, positions, dim]): a row that left is copied out as it leaves
    (the batch's buffers shrink without it), the rest are views of the final cache. Without a cache
    the turn re-prefills every row (a fresh `growing_cache`) and nothing is kept."""
    import torch

    from py_trainer.models import decoding

    order = list(range(len(budgets)))  # the batch row of each row still decoding
    held: list = [None] * len(budgets)

    def left(kept: list[int]) -> None:
        nonlocal order
        stay = set(kept)
        gone = [i for i in range(len(order)) if i not in stay]
        index = torch.tensor(gone, device=input_ids.device)
        filled = cache.get_seq_length()
        copies = [(layer.keys[index], layer.values[index]) for layer in cache.layers]
        for j, i in enumerate(gone):
            held[order[i]] = (filled, [(k[j], v[j]) for k, v in copies])
        order = [order[i] for i in kept]

    with torch.no_grad():
        ids = decoding.decode_batch(model, input_ids, mask, cached=0, prefix=None, max_new_tokens=max(budgets),
                                    eos_token_id=stops, pad_token_id=pad_id, temperature=temperature, top_p=top_p,
                                    budgets=budgets, cache=cache, on_rows_left=left if cache is not None else None)
    if cache is None:
        return ids.tolist(), None
    filled = cache.get_seq_length()
    for j, i in enumerate(order):
        held[i] = (filled, [(layer.keys[j], layer.values[j]) for layer in cache.layers])
    return ids.tolist(), held


def take_turn(e: Episode, tokenizer, ids: list[int], budget: int, stops: list[int], setup: AgentSetup) -> list[tuple]:
    """Append one generated turn to an episode; return the tool calls it asks for, as
    (episode, index in the turn, block) triples. A turn cut by the token budget ends the episode."""
    ids = ids[:budget]
    stop_at = next((i for i, t in enumerate(ids) if t in stops), None)
    ids = ids if stop_at is None else ids[:stop_at + 1]
    e.completion_ids += ids
    e.env_mask += [1] * len(ids)
    e.stats.turns += 1
    text = tokenizer.decode(ids[:-1] if stop_at is not None else ids, skip_special_tokens=False)
    parsed = parse_turn(text)
    for b in parsed.blocks:
        if "name" in b and b["name"] in setup.tool_names:
            reason = setup.arguments_error(b["name"], b["arguments"])
            if reason is not None:
                b["invalid"] = reason  # the model's error, counted as malformed; the tool never runs
    message = {"role": "assistant", "content": text}
    calls_ok = [b for b in parsed.blocks if "name" in b and "invalid" not in b]
    if calls_ok:
        message["tool_calls"] = [{"id": f"call_{e.stats.turns}_{i}", "type": "function",
                                  "function": {"name": b["name"], "arguments": b["arguments"]}}
                                 for i, b in enumerate(calls_ok)]
    e.messages.append(message)
    if stop_at is None:  # no final answer: a limit ended the episode
        e.stats.ended_by = "max_tokens"
        e.stats.malformed_calls += sum(is_malformed(b) for b in parsed.blocks)  # counted, never run
        return []
    if not parsed.blocks:
        e.stats.ended_by = "answer"
        e.final_answer = parsed.content
        return []
    out = []
    for i, block in enumerate(parsed.blocks):
        if "name" in block and block["name"] in setup.tool_names and "invalid" not in block:
            if e.stats.tool_calls >= setup.max_tool_calls:
                e.stats.ended_by = "max_tool_calls"  # the calls before the limit still run
                return out
            e.stats.tool_calls += 1
        out.append((e, i, block))
    return out


def is_malformed(block: dict) -> bool:
    """A block the model got wrong: not a call (`parse_turn`'s "malformed"), or a call to a known tool
    whose arguments its schema refuses ("invalid", set by `take_turn`)."""
    return "malformed" in block or "invalid" in block


def run_call(host: ToolHost, setup: AgentSetup, e: Episode, index: int, block: dict) -> tuple[str, str, bool]:
    """(tool name, what the model sees, is_error) for one block of a turn."""
    if "malformed" in block:
        return "", f"error: malformed tool call: {block['malformed']}", True
    name = block["name"]
    if "invalid" in block:
        return name, f"error: arguments: {block['invalid']}", True
    if name not in setup.tool_names:
        known = ", ".join(t["name"] for t in setup.tools) or "none"
        return name, f"error: unknown tool {name!r}; the tools are: {known}", True
    output, is_error = host.call_tool(e.task_id, e.episode_id, name, block["arguments"])
    if len(output) > setup.max_tool_output_chars:  # a tool error, as docs/agents.md's Faults table says
        return name, output[:setup.max_tool_output_chars] + cut_note(setup.max_tool_output_chars), True
    return name, output, is_error


def finish_turn(tokenizer, setup: AgentSetup, template: EpisodeTemplate, pairs, calls, results, max_total_tokens,
                turn: int) -> None:
    """Count each call's outcome, append the tool turns (masked) to every episode that goes on."""
    by_episode: dict[str, list[tuple[dict, tuple[str, str, bool]]]] = {}
    for (e, _, block), result in zip(calls, results):
        by_episode.setdefault(e.episode_id, []).append((block, result))
        if is_malformed(block):
            e.stats.malformed_calls += 1
        elif block["name"] not in setup.tool_names:
            e.stats.unknown_tool_calls += 1
        elif result[2]:
            e.stats.tool_errors += 1
    for e, _ in pairs:
        if e.done:
            continue
        if turn + 1 >= setup.max_turns:
            e.stats.ended_by = "max_turns"
            continue
        calls_made = e.messages[-1].get("tool_calls", [])
        results_msgs = []
        k = 0
        for block, (name, output, _) in by_episode.get(e.episode_id, []):
            msg = {"role": "tool", "name": name, "content": output}
            if not is_malformed(block) and k < len(calls_made) and calls_made[k]["function"]["name"] == name:
                msg["tool_call_id"] = calls_made[k]["id"]
                k += 1
            results_msgs.append(msg)
        suffix = encode(tokenizer, template.after_assistant_parts(results_msgs))
        if max_total_tokens is not None and len(e.completion_ids) + len(suffix) >= max_total_tokens:
            e.stats.ended_by = "max_tokens"  # no room for the results and a reply: TRL drops them too
            continue
        e.completion_ids += suffix
        e.env_mask += [0] * len(suffix)
        e.messages += results_msgs


# ---------------------------------------------------------------------------------------------
# Each episode's KV cache, kept across turns

class PrefixCaches:
    """Each episode's keys and values, kept from one turn's decoding to the next, so that a turn
    feeds the model only what it has not read yet (the tool turn, and the last token the model drew,
    which decoding never feeds) instead of re-prefilling the whole episode; before the first
    turn, the prompt tokens every episode shares are read once for all (`share_prompt_prefix`).

    A turn's batch keeps the re-prefill's layout (`pad_batch`: left padding, every row ending in the
    last column); the first `width - fed` columns of every row come from its episode's cache, where
    `fed` is the most tokens any row has uncached (a row with fewer reads some of its cached tokens
    again). The same tokens, positions and mask as the re-prefill, so the same logits up to
    rounding: a cached key was computed by an earlier forward of another shape. Used where the
    project's decoder runs (`decoding.greedy_search_is_plain` / `sampling_is_plain`: fp32, every
    cache layer full attention), where such rounding was never seen to flip a token; elsewhere every
    turn re-prefills through `generate`. tests/test_agent_episode_cache.py holds the two paths' ids
    equal, and scripts/bench_agent.py times them."""

    def __init__(self, model):
        self.model = model
        self.held: dict[int, tuple[int, list]] = {}
        """id(episode) -> (how many of its first tokens are cached, per layer (keys, values) [heads, tokens, dim])"""

    @staticmethod
    def fits(model, greedy: bool = True) -> bool:
        """Where `decoding.decode_batch` decodes as `generate` would (a scripted model has no config)."""
        from py_trainer.models.decoding import greedy_search_is_plain, sampling_is_plain

        if getattr(model, "config", None) is None:
            return False
        return greedy_search_is_plain(model) if greedy else sampling_is_plain(model)

    def share_prompt_prefix(self, episodes: list[Episode], device) -> None:
        """Read once the prompt tokens every episode starts with (the system prompt and the tools:
        most of a first turn's tokens) and let each episode hold them, so the first turn feeds each
        row only the rest of its prompt (vLLM's prefix caching, within one batch). Every row still
        feeds at least one token (the logits of its last prompt token come from its own forward)."""
        import torch

        if len(episodes) < 2:
            return
        first = episodes[0].prompt_ids
        n = min(len(e.prompt_ids) for e in episodes) - 1
        for e in episodes[1:]:
            n = next((i for i in range(n) if e.prompt_ids[i] != first[i]), n)
        if n < 1:
            return
        with torch.no_grad():
            cache = self.model(input_ids=torch.tensor([first[:n]], device=device), use_cache=True).cache
        layers = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
        for e in episodes:
            self.held[id(e)] = (n, layers)

    def batch(self, episodes: list[Episode], rows: list[list[int]], new_tokens: int):
        """The cache this turn's decoding starts from: every row's cached part, with room for
        `new_tokens` more positions (`decoding.growing_cache`: no `torch.cat` per step)."""
        from py_trainer.models.decoding import growing_cache

        self.held = {id(e): self.held[id(e)] for e in episodes if id(e) in self.held}  # ended episodes let go
        width = max(len(r) for r in rows)
        fed = max(len(r) - self.held.get(id(e), (0, None))[0] for e, r in zip(episodes, rows))
        cache = growing_cache(self.model, len(rows), width + new_tokens)
        reused = width - fed
        if reused <= 0:
            return cache
        some = next(iter(self.held.values()))[1]
        for i, layer in enumerate(cache.layers):
            k0, v0 = some[i]
            keys = k0.new_zeros((len(rows), k0.shape[0], reused, k0.shape[-1]))  # padding: masked out
            values = v0.new_zeros((len(rows), v0.shape[0], reused, v0.shape[-1]))
            for j, (e, r) in enumerate(zip(episodes, rows)):
                take = len(r) - fed  # <= what the episode holds: fed >= len(r) - held
                if take > 0:
                    k, v = self.held[id(e)][1][i]
                    keys[j, :, reused - take:] = k[:, :take]
                    values[j, :, reused - take:] = v[:, :take]
            layer.update(keys, values)
        return cache

    def keep(self, episodes: list[Episode], rows: list[list[int]], held: list) -> None:
        """After the turn (`decode_turn`) and `take_turn`: each going episode's cached tokens, its
        row's and as many of the turn's kept tokens as its row's cache holds (`held[j]`: positions
        filled, per layer (keys, values), in the batch's left-padded layout)."""
        width = max(len(r) for r in rows)
        for j, (e, r) in enumerate(zip(episodes, rows)):
            if e.done:
                self.held.pop(id(e), None)
                continue
            filled, layers = held[j]
            kept = len(e.prompt_ids) + len(e.completion_ids) - len(r)
            n = len(r) + min(kept, filled - width)
            pad = width - len(r)
            self.held[id(e)] = (n, [(k[:, pad:pad + n], v[:, pad:pad + n]) for k, v in layers])
