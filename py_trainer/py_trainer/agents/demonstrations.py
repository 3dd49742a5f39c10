"""Demonstration episodes for the warm start (TRAIN_MODE_SFT, `training/train_sft.py`).

The file is what the TS agent writes (ts_agent/src/agent/agent-task/demonstrations.ts; the embedded
agent model reads the same files, `tiny_agent_model.load_episodes`): one episode a line, OpenAI's
tool-calling SFT format ``{"tools": [...], "messages": [system?, user, assistant, tool, ..., assistant]}``.

Each episode is rendered under the run's AgentSpec, not its own line's tools: the system turn is
the spec's system prompt and tool list, exactly as the episode runner writes every prompt of the
GRPO run that follows, so SFT trains on the text the episodes later see. A line whose system
message or tool calls disagree with the spec is refused naming the line. Token ids and the loss
mask come from `agent_format.transcript_ids` (concatenation, the runner's pieces).
"""

from __future__ import annotations

from pathlib import Path

from py_trainer.agents.spec import AgentSetup
from py_trainer.core.errors import InvalidArgument
from py_trainer.core.paths import resolve_under
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.agent_format import episode_template, transcript_ids
from py_trainer.models.tiny_agent_model import load_episodes

FIELD = "dataset.jsonl_path"


def load_demonstrations(ds: pb.Dataset, data_root: Path, setup: AgentSetup) -> list[dict]:
    """The dataset's demonstration episodes, each rendered under `setup` (`as_agent_episode`);
    InvalidArgument naming the field (and the file's line) for anything the warm start cannot use."""
    if ds.WhichOneof("source") != "jsonl_path":
        raise InvalidArgument("dataset", "TRAIN_MODE_SFT reads demonstration episodes from a jsonl_path (inline rows "
                                         "carry no messages): one {\"tools\", \"messages\"} episode a line")
    if ds.split:
        raise InvalidArgument("dataset.split", "demonstration episodes have no split field")
    path = resolve_under(data_root, ds.jsonl_path, FIELD)
    if not path.is_file():
        raise InvalidArgument(FIELD, f"{ds.jsonl_path!r} is not a file")
    try:
        episodes = load_episodes(path)
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidArgument(FIELD, str(err)) from None
    if ds.limit:
        episodes = episodes[: ds.limit]
    return [as_agent_episode(e, setup, f"{path.name} episode {i + 1}") for i, e in enumerate(episodes)]


def as_agent_episode(episode: dict, setup: AgentSetup, where: str) -> dict:
    """The episode with the spec's system prompt and tools; refused when its own system message
    differs from the spec's or it calls a tool the spec does not have."""
    msgs = episode["messages"]
    if msgs[0].get("role") == "system" and (msgs[0].get("content") or "") != setup.system_prompt:
        raise InvalidArgument(FIELD, f"{where}: its system message differs from agent.system_prompt")
    for m in msgs:
        for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
            name = (call.get("function") or {}).get("name")
            if name not in setup.tool_names:
                raise InvalidArgument(FIELD, f"{where}: calls {name!r}, not one of agent.tools "
                                             f"({', '.join(sorted(setup.tool_names)) or 'none'})")
    head = [{"role": "system", "content": setup.system_prompt}] if setup.system_prompt or setup.tools else []
    return {"tools": setup.tools, "messages": head + [m for m in msgs if m.get("role") != "system"]}


def sft_rows(tokenizer, episodes: list[dict]) -> list[dict]:
    """TRL SFTTrainer's pre-tokenized rows: ``input_ids`` and ``assistant_masks`` (TRL builds the
    labels from them: -100 wherever the mask is 0)."""
    rows = []
    template = episode_template(tokenizer)
    for e in episodes:
        ids, mask = transcript_ids(tokenizer, e, template)
        rows.append({"input_ids": ids, "assistant_masks": mask})
    return rows
