"""`py-trainer serve-policy`: a base model, or a base with a run's adapter, on the OpenAI-compatible
endpoint for a user's own tries with any OpenAI client (docs/agent-programs.md, "Try a policy by
hand"): what `vllm serve` gives GPU users, on the agent template the runs train with."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

from py_trainer.server.cli_args import UsageError, int_in


def policy_source(args: argparse.Namespace) -> tuple[str, Path | None, str]:
    """(base model, adapter folder or None, the policy's name) from the flags, refused up front."""
    adapter = None
    if args.run:
        adapter = args.runs_root / args.run / "adapter"
        if not (adapter / "adapter_config.json").is_file():
            raise UsageError(f"py-trainer serve-policy: --run {args.run}: no adapter at {adapter} (a run that "
                             "SUCCEEDED under --runs-root has one)")
    elif args.adapter is not None:
        adapter = args.adapter
        if not (adapter / "adapter_config.json").is_file():
            raise UsageError(f"py-trainer serve-policy: --adapter {adapter}: no adapter_config.json (not a PEFT "
                             "adapter folder)")
    base = args.base_model
    if base is None:
        if adapter is None:
            base = ""
        else:
            base = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    name = args.name or args.run or (adapter.name if adapter is not None else base or "base")
    return base, adapter, name


def _cmd_serve_policy(args: argparse.Namespace) -> int:
    from py_trainer.endpoint.app import EndpointServer, build_app
    from py_trainer.endpoint.policy import Policy
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.models.loading import load_model

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.token:
        raise UsageError(f"py-trainer serve-policy: --host {args.host}: a non-loopback address needs --token")
    base, adapter, name = policy_source(args)
    model, tokenizer, *_ = load_model(base, args.data_root, pb.RuntimeSettings())
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    policy = Policy(name, model, tokenizer, max_new_tokens=args.max_new_tokens)
    server = EndpointServer(build_app({name: policy}, None, args.token or None), args.host, args.port).start()
    print(f"serving {name!r} ({base or 'the embedded default model'}{f' + {adapter}' if adapter else ''}) on "
          f"{server.url}/v1 (OpenAI chat completions; Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def add_serve_policy_command(sub) -> None:
    """`serve-policy`: one policy on the OpenAI-compatible endpoint."""
    p = sub.add_parser("serve-policy", help="serve a base model (or base + a run's adapter) as an OpenAI-compatible "
                                            "chat-completions endpoint",
                       description="examples:\n  py-trainer serve-policy --run r1 --runs-root runs --port 8000\n"
                                   "  py-trainer serve-policy --base-model smollm2-135m-instruct\n"
                                   "then: OpenAI({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'unused' })",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-model", default=None,
                   help="base model as a request's base_model ('' = the embedded default model; default: the "
                        "adapter's base_model_name_or_path, or the embedded default model)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--run", default="", help="serve this run's adapter (runs-root/RUN/adapter)")
    which.add_argument("--adapter", type=Path, default=None, help="serve this PEFT adapter folder")
    p.add_argument("--runs-root", type=Path, default=Path("runs"), help="where --run's folder is (default ./runs)")
    p.add_argument("--data-root", type=Path, default=Path("."), help="a relative --base-model is under this folder")
    p.add_argument("--name", default="", help="the model name clients send (default: the run id, the adapter "
                                              "folder's name, else the base model as given, 'base' for the "
                                              "embedded default model)")
    p.add_argument("--host", default="127.0.0.1", help="bind address; non-loopback needs --token")
    p.add_argument("--port", type=int_in(0, 65535), default=8000, help="0 = a free port (printed on start)")
    p.add_argument("--token", default="", help="require 'Authorization: Bearer TOKEN' (the client's apiKey)")
    p.add_argument("--max-new-tokens", type=int_in(1), default=256,
                   help="a reply's token limit (a request's max_tokens may lower it; default 256)")
    p.set_defaults(func=_cmd_serve_policy)
