"""Test inputs built in one place: small GRPO and ranked-preference requests, run folders written
by hand (as a sidecar leaves them), and annotated ranked groups. Test files import these from
here, never from each other."""

from __future__ import annotations

import json
import random
from pathlib import Path

from google.protobuf import json_format

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


# ---------------------------------------------------------------------------------------------
# GRPO requests and run folders


def small_request(run_id: str, max_steps: int = 3, **grpo) -> pb.TrainRequest:
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()[:24]]
    return json_format.ParseDict({
        "run_id": run_id,
        "dataset": {"inline": {"rows": [{"id": r["id"], "prompt": r["prompt"], "answers": r["answers"]} for r in rows]}},
        "grpo": {"max_steps": max_steps, "num_generations": 4, "per_device_train_batch_size": 8,
                 "max_completion_length": 12, "save_steps": 2, "seed": 3, **grpo},
        "held_out": {"num_prompts": 4, "samples_per_prompt": 2},
    }, pb.TrainRequest())


def event_line(seq: int, run_id: str, **kind) -> str:
    ev = pb.RunEvent(seq=seq, run_id=run_id, **kind)
    ev.time.FromNanoseconds(1_700_000_000_000_000_000 + seq * 1_000_000_000)
    return json_format.MessageToJson(ev, indent=None, preserving_proto_field_name=True) + "\n"


def make_run(runs: Path, run_id: str, states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_SUCCEEDED),
             extra: list[dict] | None = None) -> Path:
    """A run folder as a sidecar leaves it: request.json and events.jsonl (state changes, then `extra`
    events before the last state)."""
    folder = runs / run_id
    folder.mkdir(parents=True)
    (folder / "request.json").write_text(json_format.MessageToJson(small_request(run_id), preserving_proto_field_name=True))
    kinds = [{"state_change": pb.StateChange(state=s)} for s in states]
    kinds[-1:-1] = extra or []
    (folder / "events.jsonl").write_text("".join(event_line(i, run_id, **k) for i, k in enumerate(kinds, start=1)))
    return folder


# ---------------------------------------------------------------------------------------------
# Ranked groups and ranked-preference requests

# The typology an analyst is most likely to confuse with each one.
NEAR_MISS = {"structuring": "smurfing", "smurfing": "structuring", "layering": "round_tripping",
             "round_tripping": "layering", "trade_based": "shell_company", "shell_company": "trade_based",
             "funnel_account": "money_mule", "money_mule": "funnel_account"}


def aml_groups(split: str, n: int, seed: int = 0) -> list[dict]:
    """Ranked groups (proto JSON) from the AML task set, K = 4, responses in shuffled order:
    0 the right label in the answer format, 1 the near-miss label in format, 2 another label with
    no tags, 3 a hedged sentence naming a third label. Five of the six pairs are about the answer
    format; (0, 1) needs the case itself."""
    rng = random.Random(seed)
    rows = [json.loads(line) for line in TASKS.read_text().splitlines() if json.loads(line)["split"] == split][:n]
    groups = []
    for r in rows:
        right = r["typology"]
        near = NEAR_MISS[right]
        other, third = rng.sample([t for t in sorted(NEAR_MISS) if t not in (right, near)], 2)
        texts = [f"<answer>{right}</answer>", f"<answer>{near}</answer>", other,
                 f"I think it might be {third}, but I am not sure."]
        order = rng.sample(range(4), 4)  # order[i] = the rank of the response shown at position i
        groups.append({"prompt": r["prompt"],
                       "responses": [{"id": f"{r['id']}-{i}", "text": texts[order[i]]} for i in range(4)],
                       "ranks": order, "metadata": {"task_id": r["id"]}})
    return groups


def preference_request(**overrides) -> pb.TrainRequest:
    base = {"mode": "TRAIN_MODE_RANKED_PREFERENCE", "dataset": {"inline": {"groups": aml_groups("train", 24)}},
            "runtime": {"device": "cpu"}}
    base.update(overrides)
    return json_format.ParseDict(base, pb.TrainRequest())


def annotate(batch, rank_fn) -> list[pb.RankedGroup]:
    """A copy of each group of `batch` ranked by `rank_fn(position, group)`, as an annotator returns it."""
    out = []
    for b, g in enumerate(batch):
        a = pb.RankedGroup()
        a.CopyFrom(g)
        del a.ranks[:]
        a.ranks.extend(rank_fn(b, g))
        out.append(a)
    return out
