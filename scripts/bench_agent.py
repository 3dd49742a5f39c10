"""Episode speed (issue 53, "Episode speed"): the episode runner against a plain batched `generate`
of the same token counts, side by side in one run.

The runner (`py_trainer.agents.episodes.run_episodes`) plays a batch of episodes with real tool
turns: a tool host served here in-process over gRPC (the AgentToolHostService a TS agent serves:
every tool returns the same fixed string, the one scorer gives 1.0). The baseline is one
`generate` call on the same prompts, the same batch, with `min_new_tokens = max_new_tokens` = the
longest episode's model-generated tokens: every row generates that many, and its rate counts only
the tokens the runner's episodes generated (their sum), so both rows do the same useful work. The
runner does more than that (a decoding call per turn, the tool turns' tokens read in, the calls, the
scoring): the ratio is what those cost. It runs twice, reusing each episode's KV cache across
turns (what the runner does) and re-prefilling every turn (what it did before), so the table shows
what the cache buys.

    .venv/bin/python scripts/bench_agent.py                                  # the embedded agent model
    .venv/bin/python scripts/bench_agent.py --model smollm2-135m-instruct --episodes 4

The embedded agent model is built once (2-3 minutes on 2 cores, cached under $PY_TRAINER_HOME) from
demonstrations written here: a shop assistant that looks a price up, computes a total, then
answers (two tool turns). Sampled at temperature 1 as training samples. Run it alone: another
torch process on the same cores slows every row and changes nothing else. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import grpc  # noqa: E402

from py_trainer.agents.episodes import AgentSetup, run_episodes, start_episodes  # noqa: E402
from py_trainer.agents.tool_host import ToolHost  # noqa: E402
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb  # noqa: E402
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc  # noqa: E402

EMBEDDED = "embedded-agent"
TOOL_OUTPUT = "12"
"""What every tool call returns (the demonstrations' tools return it too)."""
SYSTEM = "You are a shop assistant. Look prices up and compute totals with the tools."
TOOLS = [
    {"name": "lookup_price", "description": "The unit price of an item, in euros.",
     "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}},
    {"name": "total", "description": "Price times quantity.",
     "parameters": {"type": "object", "properties": {"price": {"type": "number"}, "quantity": {"type": "integer"}},
                    "required": ["price", "quantity"]}},
]
ITEMS = ["apples", "pears", "lemons", "plums", "figs", "limes", "dates", "kiwis", "mangos", "grapes", "peaches",
         "cherries"]


# ---------------------------------------------------------------------------------------------
# The task, its demonstrations and the tool host

def prompt(i: int) -> str:
    return f"How much do {i % 9 + 2} {ITEMS[i % len(ITEMS)]} cost?"


def call(turn: int, name: str, arguments: dict) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": f"c{turn}", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def demonstrations(n: int = 64) -> list[dict]:
    """Episodes of two tool turns and an answer, in the format the embedded agent model is built from."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        q, item = rng.randint(2, 10), rng.choice(ITEMS)
        out.append({"tools": TOOLS, "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": f"How much do {q} {item} cost?"},
            call(0, "lookup_price", {"item": item}), {"role": "tool", "name": "lookup_price", "content": TOOL_OUTPUT},
            call(1, "total", {"price": int(TOOL_OUTPUT), "quantity": q}),
            {"role": "tool", "name": "total", "content": TOOL_OUTPUT},
            {"role": "assistant", "content": f"{q} {item} cost {TOOL_OUTPUT} euros."}]})
    return out


class FixedHost(pb_grpc.AgentToolHostServiceServicer):
    """Every tool returns TOOL_OUTPUT; the one scorer gives 1.0."""

    def CallTool(self, request, context):
        return pb.CallToolResponse(output=TOOL_OUTPUT)

    def ScoreEpisode(self, request, context):
        return pb.ScoreEpisodeResponse(scores={"done": 1.0})


def serve_host() -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_AgentToolHostServiceServicer_to_server(FixedHost(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def agent_setup(address: str, max_turns: int) -> AgentSetup:
    spec = pb.AgentSpec(tool_host=address, system_prompt=SYSTEM, max_turns=max_turns)
    for t in TOOLS:
        spec.tools.add(name=t["name"], description=t["description"], parameters_json=json.dumps(t["parameters"]))
    spec.scorers.add(name="done", weight=1.0)
    return AgentSetup.from_spec(spec)


def load(model_name: str):
    """(model, tokenizer, folder) in fp32 on the CPU."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model_name == EMBEDDED:
        from py_trainer.models.tiny_agent_model import ensure_agent_model

        with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
            demos = Path(tmp) / "bench-shop-demos.jsonl"
            demos.write_text("".join(json.dumps(d) + "\n" for d in demonstrations()))
            folder = ensure_agent_model(demos)  # keyed by the file's bytes: built once
    else:
        from py_trainer.models.base_models import resolve_base_model

        folder = resolve_base_model(model_name, REPO)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(folder).eval(), tokenizer, folder


# ---------------------------------------------------------------------------------------------
# The measurements

class Timed:
    """Wraps `owner.name` (`model.generate`, `decoding.decode_batch`: what decodes a turn) to count
    its calls and the seconds spent in them."""

    def __init__(self, owner, name: str):
        self.inner, self.calls, self.seconds = getattr(owner, name), 0, 0.0
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t0

    def reset(self) -> None:
        self.calls, self.seconds = 0, 0.0


def runner(model, tokenizer, setup, host, n: int, args, reuse_cache: bool, seed: int) -> dict:
    eps = start_episodes(tokenizer, setup, [(f"t{i}", prompt(i)) for i in range(n)], [f"e{i}" for i in range(n)])
    from py_trainer.models import decoding

    timed = [model.generate, decoding.decode_batch]
    for t in timed:
        t.reset()
    t0 = time.perf_counter()
    run_episodes(model, tokenizer, setup, host, eps, temperature=args.temperature, top_p=1.0,
                 max_new_tokens=args.max_new_tokens, max_total_tokens=None, seed=seed, reuse_cache=reuse_cache)
    seconds = time.perf_counter() - t0
    generated = [sum(e.env_mask) for e in eps]
    return {"seconds": seconds, "generated": generated, "generate_s": sum(t.seconds for t in timed),
            "generate_calls": sum(t.calls for t in timed),
            "tool_tokens": sum(len(e.env_mask) - sum(e.env_mask) for e in eps),
            "turns": sum(e.stats.turns for e in eps), "tool_calls": sum(e.stats.tool_calls for e in eps),
            "prompts": [e.prompt_ids for e in eps], "ids": [e.completion_ids for e in eps]}


def plain_generate(model, tokenizer, prompts: list[list[int]], generated: list[int], args, seed: int) -> dict:
    """One batched `generate` of the same prompts, every row generating the longest episode's count."""
    import torch

    from py_trainer.models.loading import pad_batch

    input_ids, mask = pad_batch(prompts, 0, tokenizer.pad_token_id, "cpu")
    longest = max(generated)
    greedy = args.temperature == 0
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(input_ids=input_ids, attention_mask=mask, do_sample=not greedy,
                       temperature=None if greedy else args.temperature, top_p=None if greedy else 1.0,
                       top_k=None if greedy else 0, min_new_tokens=longest, max_new_tokens=longest,
                       pad_token_id=tokenizer.pad_token_id)
    return {"seconds": time.perf_counter() - t0, "generated": generated}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=EMBEDDED,
                        help=f"{EMBEDDED} (built here from the demonstrations) or a base_model name, e.g. "
                             "smollm2-135m-instruct (default %(default)s)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes in the batch (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each row, after one warm-up; the "
                                                               "best is printed (default %(default)s)")
    parser.add_argument("--max-turns", type=int, default=4, help="AgentSpec.max_turns (default %(default)s)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="a turn's token budget (default %(default)s)")
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default %(default)s: on a 2-core machine shared with other work, a "
                             "second OpenMP thread waits for its partner and times swing 10x)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    model, tokenizer, folder = load(args.model)
    from py_trainer.models import decoding

    Timed(model, "generate")
    Timed(decoding, "decode_batch")
    server, address = serve_host()
    setup = agent_setup(address, args.max_turns)
    host = ToolHost(address, setup.tool_timeout_ms)
    rows: dict[str, list[dict]] = {"runner, KV cache reused": [], "runner, re-prefill per turn": [],
                                   "plain generate": []}
    same = True
    try:
        for r in range(-1, args.repeats):  # -1: a warm-up of each row, not counted
            cached = runner(model, tokenizer, setup, host, args.episodes, args, True, seed=r)
            again = runner(model, tokenizer, setup, host, args.episodes, args, False, seed=r)
            base = plain_generate(model, tokenizer, cached["prompts"], cached["generated"], args, seed=r)
            if r < 0:
                continue
            same = same and cached["ids"] == again["ids"]
            rows["runner, KV cache reused"].append(cached)
            rows["runner, re-prefill per turn"].append(again)
            rows["plain generate"].append(base)
    finally:
        host.close()
        server.stop(0)

    n = args.episodes
    first = rows["runner, KV cache reused"][0]
    print(f"model: {args.model} ({Path(folder).name}), {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"fp32, {torch.get_num_threads()} threads")
    print(f"batch: {n} episodes, max_turns {args.max_turns}, max_new_tokens {args.max_new_tokens}/turn, "
          f"temperature {args.temperature}, best of {args.repeats} (after a warm-up)")
    print(f"episodes (first repeat): {first['turns'] / n:.2f} turns, {first['tool_calls'] / n:.2f} tool calls, "
          f"{sum(first['generated']) / n:.1f} generated and {first['tool_tokens'] / n:.1f} tool-turn tokens per "
          f"episode, "
          f"prompt {statistics.mean(len(p) for p in first['prompts']):.0f} tokens")
    print(f"cached and re-prefilled episodes token for token the same: {'yes' if same else 'NO'}")
    for name, runs in rows.items():
        print(f"  {name}: " + " ".join(f"{x['seconds']:.2f}" for x in runs) + " s")
    plain = [x["seconds"] for x in rows["plain generate"]]
    for name in ("runner, KV cache reused", "runner, re-prefill per turn"):
        ratios = sorted(x["seconds"] / p for x, p in zip(rows[name], plain))
        print(f"  {name} / plain generate, per repeat: {ratios[0]:.2f}x to {ratios[-1]:.2f}x, "
              f"median {statistics.median(ratios):.2f}x")
    best = {name: min(runs, key=lambda x: x["seconds"]) for name, runs in rows.items()}
    base = best["plain generate"]["seconds"]
    print(f"\n{'path':<30}{'seconds':>9}{'episodes/s':>12}{'gen tokens/s':>14}{'decoding':>13}{'x generate':>12}")
    for name, x in best.items():
        share = f"{x['generate_s'] / x['seconds']:.0%}" if "generate_s" in x else "100%"
        print(f"{name:<30}{x['seconds']:>9.2f}{n / x['seconds']:>12.2f}{sum(x['generated']) / x['seconds']:>14.1f}"
              f"{share:>13}{x['seconds'] / base:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
