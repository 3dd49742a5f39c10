"""The sidecar's side of AgentToolHostService: calls into the TS agent that runs the user's tools and
scorers (the proto's AgentToolHostService; docs/agents.md).

What a fault becomes:
- a tool that throws or times out: the host answers ``is_error`` and the model sees the message as
  the tool's output (a counted tool error, never a failed run); one that returns too much is cut
  by the episode runner (`episodes.run_call`), which counts the error;
- the host alive but not answering within the tool's timeout (plus `DEADLINE_MARGIN_S`): a tool
  error "timed out" as well;
- the host gone (connection refused, the TS process killed): `ToolHostLost`, which fails the run
  (or the Evaluate) with a reason naming the agent process; a run resumes from its checkpoint
  once the agent serves again.
"""

from __future__ import annotations

import json

import grpc

from py_trainer.core.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

DEADLINE_MARGIN_S = 5.0
"""Added to a tool's own timeout (which the TS host enforces) before the sidecar gives up on a call."""
SCORE_DEADLINE_S = 120.0
GONE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.CANCELLED)


class ToolHostLost(FailedPrecondition):
    """The TS agent that serves the tools stopped answering: the run fails naming it."""

    def __init__(self, address: str, detail: str):
        super().__init__("agent.tool_host", f"the TS agent's tool host at {address} is gone ({detail}): its process "
                                            "was stopped or crashed; start it again and resume the run")


class ScorerError(FailedPrecondition):
    """Scoring an episode failed: a scorer threw or gave no number in [0, 1] (the TS host checks the
    range where the scorer runs, naming it and the value: the one place), or gave no score."""


class ToolHost:
    """A gRPC channel to the TS agent's AgentToolHostService."""

    def __init__(self, address: str, tool_timeout_ms: int):
        self.address = address
        self.tool_timeout_s = tool_timeout_ms / 1000.0
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.AgentToolHostServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def call_tool(self, task_id: str, episode_id: str, name: str, arguments: dict) -> tuple[str, bool]:
        """(output, is_error) of one tool call."""
        req = pb.CallToolRequest(task_id=task_id, episode_id=episode_id, name=name,
                                 arguments_json=json.dumps(arguments, ensure_ascii=False))
        try:
            resp = self.stub.CallTool(req, timeout=self.tool_timeout_s + DEADLINE_MARGIN_S, wait_for_ready=False)
        except grpc.RpcError as err:
            code = err.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"error: the tool {name!r} timed out after {self.tool_timeout_s:g} s", True
            if code in GONE:
                raise ToolHostLost(self.address, f"{code.name}: {err.details()}") from None
            return f"error: {code.name}: {err.details()}", True
        return resp.output, resp.is_error

    def score(self, task_id: str, episode_id: str, messages: list[dict], stats: pb.EpisodeStats, final_answer: str,
              scorer_names: list[str]) -> dict[str, float]:
        """Every scorer's score of one finished episode (each in [0, 1]: the TS host refuses any other)."""
        req = pb.ScoreEpisodeRequest(task_id=task_id, episode_id=episode_id, stats=stats, final_answer=final_answer,
                                     messages_json=json.dumps(messages, ensure_ascii=False))
        try:
            resp = self.stub.ScoreEpisode(req, timeout=SCORE_DEADLINE_S)
        except grpc.RpcError as err:
            if err.code() in GONE or err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ToolHostLost(self.address, f"{err.code().name}: {err.details()}") from None
            raise ScorerError("agent.scorers", f"scoring task {task_id!r} failed: {err.details()}") from None
        scores = dict(resp.scores)
        for name in scorer_names:
            if name not in scores:
                raise ScorerError("agent.scorers", f"the scorer {name!r} gave no score for task {task_id!r}")
        return {name: scores[name] for name in scorer_names}

    def run_rollout(self, task_id: str, episode_id: str, base_url: str, api_key: str, timeout_ms: int) -> tuple[str, str]:
        """(final_json, error) of one run of the TS agent program against `base_url`; error "" when it
        returned. The TS host enforces `timeout_ms`; past it plus DEADLINE_MARGIN_S the rollout fails here."""
        req = pb.RunRolloutRequest(task_id=task_id, episode_id=episode_id, base_url=base_url, api_key=api_key,
                                   timeout_ms=timeout_ms)
        try:
            resp = self.stub.RunRollout(req, timeout=timeout_ms / 1000.0 + DEADLINE_MARGIN_S)
        except grpc.RpcError as err:
            code = err.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return "", f"the agent program did not return within {timeout_ms} ms"
            if code in GONE:
                raise ToolHostLost(self.address, f"{code.name}: {err.details()}") from None
            return "", f"{code.name}: {err.details()}"
        return resp.final_json, resp.error
