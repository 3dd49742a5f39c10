"""Episodes of an agent program (AgentSpec.program; docs/agent-programs.md): the user's own agent,
run by the TS agent through RunRollout against this process's OpenAI-compatible endpoint, one base
URL per rollout. The episode is what the endpoint recorded, never the program's messages
tokenized again: the trained row (`rollouts.rows_of`) gives prompt_ids, completion_ids and
env_mask, as the episode runner's episodes do, so TRL's rollout_func, the held-out measurement and
Evaluate take either kind.

A rollout that fails (the program threw, timed out, or its host answered an error) is counted
(``ended_by`` "error", its reason kept in the sample files), scores 0 on every scorer without
asking them, and trains nothing (its row is masked); the step goes on. A batch where every
rollout failed fails the run (or the Evaluate) naming the first reason: nothing was learned from it.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from py_trainer.agents.episodes import Episode
from py_trainer.agents.spec import AgentSetup
from py_trainer.agents.tool_host import ToolHost
from py_trainer.core.errors import FailedPrecondition
from py_trainer.endpoint.app import EndpointServer, build_app
from py_trainer.endpoint.policy import Policy
from py_trainer.endpoint.rollouts import Limits, Rollout, RolloutBook, rows_of
from py_trainer.models.agent_format import encode, end_token, prompt_parts

ROLLOUT_THREADS = 64
"""Rollouts run at once (their model calls batch together in the endpoint's generator)."""


@dataclass
class ProgramEpisode(Episode):
    error: str = ""
    """why the rollout failed ("" when the program returned)"""
    rows: int = 0
    """rows the rollout's calls made; every one but the trained row is dropped (a split)"""
    final_json: str = ""

    def record(self) -> dict:
        return {**super().record(), "error": self.error, "rows": self.rows, "final_json": self.final_json}


class ProgramEndpoint:
    """This process's endpoint for agent-program rollouts: started once, serves whatever model the
    runner was last handed (the policy being trained, at its current step)."""

    def __init__(self, tokenizer, host: str = "127.0.0.1"):
        self.book = RolloutBook()
        self.policy = Policy("policy", None, tokenizer)
        self.server = EndpointServer(build_app({}, self.book, None, lambda: self.policy), host=host).start()

    def close(self) -> None:
        self.server.stop()


def run_program_episodes(endpoint: ProgramEndpoint, model, tokenizer, setup: AgentSetup, host: ToolHost,
                         tasks: list[tuple[str, str]], episode_ids: list[str], *, temperature: float, top_p: float,
                         max_new_tokens: int, max_total_tokens: int | None, seed: int) -> list[ProgramEpisode]:
    """One rollout per (task id, prompt), all at once; then each finished one scored by the TS scorers."""
    endpoint.policy.model = model
    endpoint.policy.context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
    limits = Limits(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                    max_total_tokens=max_total_tokens, max_calls=setup.max_turns, seed=seed)
    rollouts = [endpoint.book.open(limits) for _ in tasks]

    def run(i: int) -> tuple[str, str]:
        url = f"{endpoint.server.url}/rollouts/{rollouts[i].id}/v1"
        return host.run_rollout(tasks[i][0], episode_ids[i], url, endpoint.book.api_key, setup.program_timeout_ms)

    try:
        with ThreadPoolExecutor(min(ROLLOUT_THREADS, max(len(tasks), 1)), thread_name_prefix="rollouts") as pool:
            results = list(pool.map(run, range(len(tasks))))
    finally:
        for r in rollouts:
            endpoint.book.close(r)
    episodes = [episode_of(tokenizer, setup, task, eid, r, final, error)
                for task, eid, r, (final, error) in zip(tasks, episode_ids, rollouts, results)]
    failed = [e for e in episodes if e.error]
    if episodes and len(failed) == len(episodes):
        raise FailedPrecondition("agent.program", f"every rollout of this batch failed ({len(failed)}); the first, "
                                                  f"task {failed[0].task_id!r}: {failed[0].error}")
    with ThreadPoolExecutor(16, thread_name_prefix="scorers") as pool:
        scored = list(pool.map(lambda e: None if e.error else host.score(
            e.task_id, e.episode_id, e.messages, e.stats, e.final_answer, setup.scorer_names), episodes))
    for e, scores in zip(episodes, scored):
        e.scores = scores if scores is not None else {n: 0.0 for n in setup.scorer_names}
    return episodes


def final_text(final_json: str) -> str:
    """The program's return value as the scorers' final answer: a string as is, anything else as JSON."""
    if not final_json:
        return ""
    try:
        value = json.loads(final_json)
    except json.JSONDecodeError:
        return final_json
    return value if isinstance(value, str) else final_json


def episode_of(tokenizer, setup: AgentSetup, task: tuple[str, str], episode_id: str, rollout: Rollout,
               final_json: str, error: str) -> ProgramEpisode:
    """The episode a rollout recorded: its trained row (the one holding its last call), its counts."""
    rows = rows_of(rollout.calls)
    end = end_token(tokenizer)
    if rows:
        row = max(rows, key=lambda r: r.last_call)
        prompt_ids, completion_ids, env_mask = row.prompt_ids, row.completion_ids, row.env_mask
    else:  # no model call: the task's prompt, one masked token (TRL needs a completion; nothing is trained)
        prompt_ids = encode(tokenizer, prompt_parts(setup.system_prompt, [], task[1], end))
        completion_ids, env_mask = encode(tokenizer, [(end, True)]), [0]
    cap = rollout.limits.max_total_tokens
    if cap is not None and len(completion_ids) > cap:  # tool results past the budget: cut as TRL cuts a completion
        completion_ids, env_mask = completion_ids[:cap], env_mask[:cap]
    if error:
        env_mask = [0] * len(completion_ids)
    messages = rollout.transcript() or [{"role": "user", "content": task[1]}]
    ep = ProgramEpisode(task_id=task[0], episode_id=episode_id, prompt_ids=list(prompt_ids),
                        completion_ids=list(completion_ids), env_mask=list(env_mask), messages=messages,
                        error=error, rows=len(rows), final_json=final_json)
    ep.stats.turns = len(rollout.calls)
    ep.stats.tool_calls = sum(c.tool_calls for c in rollout.calls)
    ep.stats.malformed_calls = sum(c.malformed for c in rollout.calls)
    ep.stats.unknown_tool_calls = sum(c.unknown_tool_calls for c in rollout.calls)
    ep.stats.ended_by = "error" if error else (rollout.ended_by or "answer")
    ep.final_answer = "" if error else final_text(final_json)
    return ep
