"""A stand-in for the TS agent's AgentToolHostService, in Python, for the sidecar's own tests (the
real host, in TS, is tested by ts_agent/test/agent-*.test.ts): tools `add`, `boom` (throws),
`slow` (sleeps past any short timeout), `huge` (a long output) and `lookup`; scorers `correct`
(the request's final answer equals the task's expected sum) and `used_tool` (any tool call)."""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures

import grpc

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

TOOLS = [
    {"name": "add", "description": "Add two integers.",
     "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]}},
    {"name": "boom", "description": "Always fails.", "parameters": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Never answers in time.", "parameters": {"type": "object", "properties": {}}},
    {"name": "huge", "description": "A very long output.", "parameters": {"type": "object", "properties": {}}},
]


def agent_spec(address: str, **limits) -> pb.AgentSpec:
    spec = pb.AgentSpec(tool_host=address, system_prompt="You are a careful calculator.", **limits)
    for t in TOOLS:
        spec.tools.add(name=t["name"], description=t["description"], parameters_json=json.dumps(t["parameters"]))
    spec.scorers.add(name="correct", weight=1.0)
    spec.scorers.add(name="used_tool", weight=0.5)
    return spec


class Host(pb_grpc.AgentToolHostServiceServicer):
    def __init__(self, expected: dict[str, str]):
        self.expected = expected
        self.calls: list[tuple[str, str, dict]] = []
        self.final_answers: dict[str, str] = {}
        """episode id -> the final answer its ScoreEpisode request carried"""
        self.lock = threading.Lock()

    def CallTool(self, request, context):
        args = json.loads(request.arguments_json)
        with self.lock:
            self.calls.append((request.episode_id, request.name, args))
        if request.name == "add":
            return pb.CallToolResponse(output=str(int(args["a"]) + int(args["b"])))
        if request.name == "boom":
            return pb.CallToolResponse(output="Error: boom", is_error=True)
        if request.name == "slow":
            time.sleep(30)
            return pb.CallToolResponse(output="late")
        if request.name == "huge":
            return pb.CallToolResponse(output="x" * 10_000)
        context.abort(grpc.StatusCode.NOT_FOUND, f"no tool {request.name}")

    def ScoreEpisode(self, request, context):
        json.loads(request.messages_json)
        with self.lock:
            self.final_answers[request.episode_id] = request.final_answer
        correct = 1.0 if request.final_answer == self.expected.get(request.task_id) else 0.0
        return pb.ScoreEpisodeResponse(scores={"correct": correct,
                                               "used_tool": 1.0 if request.stats.tool_calls > 0 else 0.0})


def serve(expected: dict[str, str]) -> tuple[grpc.Server, Host, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    host = Host(expected)
    pb_grpc.add_AgentToolHostServiceServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, host, f"127.0.0.1:{port}"
