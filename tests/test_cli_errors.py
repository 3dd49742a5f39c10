"""Every user mistake at `py-trainer` is one clean line on stderr naming the file and the field,
exit 2, and no traceback (a traceback means a bug). Table-driven: (args, files, expected text).

`EXIT_CODES` holds the one exit-code rule (docs/usage.md) for every py-trainer command, in this
process (unit tier): 2 for a user mistake or a refusal before any work, 1 for a failure; where a
failure needs a model or a run, the step that fails is replaced by one raising what it would."""

from __future__ import annotations

import functools
import json
import re
import socket
import subprocess
import sys

import pytest

from _sidecar import REPO, sidecar_env

slow = pytest.mark.slow  # a case that runs `py-trainer` as a subprocess
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


GOOD = "dataset:\n  inline: {rows: [{prompt: p, answers: [a]}]}\n"

CASES = [
    # (id, argv with {d} = the temp folder, files to write, text the one line must contain)
    ("missing config file", ["train", "--config", "{d}/nope.yaml"], {}, "{d}/nope.yaml: no such file"),
    ("evaluate missing config", ["evaluate", "--config", "{d}/nope.yaml"], {}, "{d}/nope.yaml: no such file"),
    ("sample missing request", ["data", "sample", "{d}/nope.yaml", "{d}/out.jsonl"], {}, "nope.yaml: no such file"),
    ("bad YAML with line and column", ["train", "--config", "{d}/c.yaml"],
     {"c.yaml": "grpo:\n  max_steps: [3\n"}, "{d}/c.yaml:3:1: not valid YAML/JSON"),
    ("bad JSON with line and column", ["train", "--config", "{d}/c.json"],
     {"c.json": '{"grpo": {"max_steps": 3,}\n}'}, "{d}/c.json:1:"),
    ("misspelt key, snake_case for YAML", ["train", "--config", "{d}/c.yaml"],
     {"c.yaml": GOOD + "grpo:\n  max_step: 3\n"}, "grpo.max_step: unknown field (did you mean max_steps?)"),
    ("misspelt key, camelCase kept", ["train", "--config", "{d}/c.yaml"],
     {"c.yaml": GOOD + "grpo: {maxStep: 3}\n"}, "grpo.maxStep: unknown field (did you mean maxSteps?)"),
    ("misspelt top-level key", ["train", "--config", "{d}/c.yaml"],
     {"c.yaml": GOOD + "held_outt: {}\n"}, "held_outt: unknown field (did you mean held_out?)"),
    ("bad number", ["train", "--config", "{d}/c.yaml"],
     {"c.yaml": GOOD + "grpo: {max_steps: abc}\n"}, "grpo.max_steps: invalid literal"),
    # the one end-to-end num_generations = 1 case (the message is pinned in test_config.py); the
    # runs root is the temp folder, so "nothing created" below is checked where a run would go
    ("out of range", ["train", "--config", "{d}/c.yaml", "--runs-root", "{d}/runs", "--data-root", "{d}"],
     {"c.yaml": GOOD + "grpo: {num_generations: 1}\n"},
     "grpo.num_generations: must be in [2, 256] (GRPO needs a group), got 1"),
    ("not a mapping", ["train", "--config", "{d}/c.yaml"], {"c.yaml": "- 1\n"}, "expected a mapping"),
    ("unknown flag with did-you-mean", ["train", "--conifg", "{d}/c.yaml"], {},
     "unknown flag --conifg (did you mean --config?)"),
    ("unknown command", ["trian"], {}, "unknown command 'trian' (did you mean train?)"),
    ("bad number flag", ["serve", "--port", "abc"], {}, "--port: invalid int value: 'abc'"),
    ("export of a non-adapter", ["export", "--adapter", "{d}", "--out", "{d}/x"], {}, "no adapter_config.json"),
    # issue 22, items 8 and 14: each printed a traceback or the wrong sentence before
    ("export --out a file", ["export", "--adapter", "{d}", "--out", "{d}/afile"],
     {"adapter_config.json": '{"peft_type": "LORA"}', "afile": "x"}, "--out: {d}/afile: is a file; give a folder to create"),
    ("export --out under a file", ["export", "--adapter", "{d}", "--out", "{d}/afile/x"],
     {"adapter_config.json": '{"peft_type": "LORA"}', "afile": "x"}, "--out: {d}/afile: is a file, so {d}/afile/x cannot"),
    ("unknown command before a flag", ["trian", "--config", "{d}/x.yaml"], {},
     "py-trainer: unknown command 'trian' (did you mean train?)"),
    ("negative port", ["serve", "--port", "-3"], {}, "argument --port: must be in [0, 65535], got -3"),
    ("negative seed", ["init-model", "--seed", "-3"], {}, "argument --seed: must be >= 0, got -3"),
    ("data sample strategy without its prefix", ["data", "sample", "{d}/s.yaml", "{d}/out.jsonl"],
     {"s.yaml": "prompts: [a b c]\nk: 2\nstrategy: TOP_P_LADDER\n"},
     "strategy: unknown value TOP_P_LADDER (did you mean SAMPLING_STRATEGY_TOP_P_LADDER?); valid: "
     "SAMPLING_STRATEGY_TOP_P_LADDER, SAMPLING_STRATEGY_PROMPT_SUFFIX, SAMPLING_STRATEGY_OVERGENERATE_TOP_K"),
]


@slow
@pytest.mark.parametrize("argv,files,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_user_mistake_is_one_line_exit_2(tmp_path, argv, files, want):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", *argv], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env=sidecar_env(), stdin=subprocess.DEVNULL)
    lines = [l for l in proc.stderr.splitlines() if l.strip() and "Warning" not in l and "warnings.warn" not in l]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert want.replace("{d}", str(tmp_path)) in lines[0]
    assert "Traceback" not in proc.stderr and "    at " not in proc.stderr
    assert not (tmp_path / "runs").exists()


EVAL_CONFIG = "tasks:\n  inline: {rows: [{id: t1, prompt: 'Case: a b c', answers: [structuring]}]}\ntemperature: 1.0\n"


@slow
@pytest.mark.parametrize("body,want", [
    ("adapters: [{name: a, path: rank-adapter}]\n", "adapters[0].path: 'rank-adapter': adapter_config.json says r = 8"),
    ("adapters: [{name: a, path: nan-adapter}]\n", "adapters[0].path: 'nan-adapter' has non-finite weights"),
    ("base_model: trunc-model\n", "base_model: 'trunc-model': model.safetensors is truncated"),
], ids=["rank", "nan", "truncated-base"])
def test_evaluate_of_a_damaged_adapter_or_model_is_one_line(tmp_path, tiny_model_home, tiny_model_dir, body, want):
    """`py-trainer evaluate` on item 7's inputs: one line naming the part and the cause (was a traceback)."""
    from _bad_models import write_bad_models

    write_bad_models(tmp_path, tiny_model_dir)
    (tmp_path / "e.yaml").write_text(EVAL_CONFIG + body)
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "evaluate", "--config", str(tmp_path / "e.yaml"),
                           "--data-root", str(tmp_path), "--runs-root", str(tmp_path / "runs")],
                          capture_output=True, text=True, cwd=REPO, timeout=300, stdin=subprocess.DEVNULL,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    # transformers' own "Loading weights" progress bar may come first (the NaN case loads the model)
    lines = [l for l in proc.stderr.splitlines() if l.strip() and "Warning" not in l and "warnings.warn" not in l
             and not l.startswith("Loading weights")]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"py-trainer evaluate: {want}"), proc.stderr


def test_every_sub_command_help_has_examples():
    """`py-trainer <command> --help` ends with examples of the command itself (issue 22, item 14)."""
    import argparse

    from py_trainer.server.cli import build_parser

    def leaves(parser, path=()):
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if action is None:
            yield path, parser
            return
        for name, sub in action.choices.items():
            yield from leaves(sub, path + (name,))

    found = list(leaves(build_parser()))
    assert len(found) >= 10
    for path, parser in found:
        text = parser.format_help()
        assert "examples:" in text, f"py-trainer {' '.join(path)} --help has no examples"
        assert f"py-trainer {' '.join(path)} " in text.split("examples:", 1)[1], path


# ---------------------------------------------------------------------------------------------
# The exit-code rule, command by command (in this process)


def fail_with(target: str, exc: Exception):
    """(dotted name, replacement): the step named `target` raises `exc`."""
    def raise_(*_a, **_k):
        raise exc
    return target, raise_


def _groups(*ranks) -> str:
    return "".join(json.dumps({"prompt": f"case {i}", "responses": [{"id": f"r{j}", "text": f"answer {j} of {i}"}
                                                                     for j in range(4)], "ranks": list(r)}) + "\n"
                   for i, r in enumerate(ranks))


def _failures():
    from py_trainer.core.errors import InvalidArgument, ResourceExhausted
    from py_trainer.models.inference import InferenceFailed
    from py_trainer.workers.export_check import MergeMismatch

    return {
        "train": fail_with("py_trainer.server.standalone.train_run", RuntimeError("the worker died")),
        "evaluate": fail_with("py_trainer.server.standalone.run_evaluation", InferenceFailed("", "generating failed")),
        "sample": fail_with("py_trainer.workers.sampling.sample_groups", ResourceExhausted("", "out of memory while sampling")),
        "sample-mistake": fail_with("py_trainer.workers.sampling.sample_groups", InvalidArgument("adapter.path", "no such adapter")),
        "export": fail_with("py_trainer.server.standalone.export_adapter", MergeMismatch("prompt 0", "completions differ")),
    }


PLOT = '{"title": "t", "gold": ["a"], "answers": ["a"], "variants": [{"name": "base", "matrix": [[1]]}]}'
TRAIN = ("dataset:\n  inline: {rows: [" + ", ".join(f"{{prompt: p{i}, answers: [a]}}" for i in range(4)) + "]}\n"
         "grpo: {max_steps: 1}\nheld_out: {num_prompts: 2}\n")
EVAL = "tasks:\n  inline: {rows: [{id: t1, prompt: p, answers: [a]}]}\n"
SAMPLE = "prompts: [a b c]\nk: 2\n"

EXIT_CODES = [
    # (command, argv with {d} = the temp folder and {busy} = a port in use, files, failure to inject, exit, text)
    ("serve", ["serve", "--port", "70000"], {}, None, 2, "argument --port: must be in [0, 65535], got 70000"),
    ("serve", ["serve", "--port", "{busy}", "--runs-root", "{d}/runs"], {}, None, 2, 
     "--host/--port: cannot listen on 127.0.0.1:{busy}: address already in use"),
    ("serve", ["serve", "--port", "0", "--runs-root", "{d}/afile"], {"afile": "x"}, None, 2,
     "runs root {d}/afile: {d}/afile is a file, not a folder"),
    ("train", ["train", "--config", "{d}/nope.yaml"], {}, None, 2, "{d}/nope.yaml: no such file"),
    ("train", ["train", "--config", "{d}/c.yaml", "--runs-root", "{d}/afile/runs", "--data-root", "{d}"],
     {"c.yaml": TRAIN, "afile": "x"}, None, 2, "runs root {d}/afile/runs: {d}/afile is a file, not a folder"),
    ("train", ["train", "--config", "{d}/c.yaml", "--runs-root", "{d}/runs", "--data-root", "{d}"],
     {"c.yaml": TRAIN}, "train", 1, ""),  # a run that FAILED: its state line on stdout
    ("evaluate", ["evaluate", "--config", "{d}/e.yaml", "--runs-root", "{d}/runs", "--data-root", "{d}"],
     {"e.yaml": EVAL + "adapters: [{name: a, run_id: no-such-run}]\n"}, None, 2, "adapters[0].run_id: no run 'no-such-run'"),
    ("evaluate", ["evaluate", "--config", "{d}/e.yaml", "--runs-root", "{d}/runs", "--data-root", "{d}"],
     {"e.yaml": EVAL}, "evaluate", 1, "py-trainer evaluate: generating failed"),
    ("defaults", ["defaults", "--all"], {}, None, 2, "py-trainer defaults: unknown flag --all"),
    ("init-model", ["init-model", "--tasks", "{d}/nope.jsonl"], {}, None, 2, "--tasks {d}/nope.jsonl: no such file"),
    ("init-model", ["init-model", "--out", "{d}/afile/model"], {"afile": "x"}, None, 2,
     "--out {d}/afile/model: {d}/afile is a file"),
    ("plot confusion", ["plot", "confusion", "{d}/s.json", "{d}/x.png"], {"s.json": "{}"}, None, 2, "gold: must be"),
    ("plot compare", ["plot", "compare", "{d}/nope.json", "{d}/x.png"], {}, None, 2, "{d}/nope.json: no such file"),
    ("data clean", ["data", "clean", "{d}/nope.jsonl", "{d}/out.jsonl"], {}, None, 2, "cannot read {d}/nope.jsonl"),
    ("data clean", ["data", "clean", "{d}/g.jsonl", "{d}/out.jsonl"], {"g.jsonl": _groups([0, 0, 1, 2])}, None, 1,
     "no group left in {d}/out.jsonl"),
    ("data sample", ["data", "sample", "{d}/s.yaml", "{d}/out.jsonl"], {"s.yaml": SAMPLE}, "sample-mistake", 2,
     "adapter.path: no such adapter"),
    ("data sample", ["data", "sample", "{d}/s.yaml", "{d}/out.jsonl"], {"s.yaml": SAMPLE}, "sample", 1,
     "out of memory while sampling"),
    ("data check-annotators", ["data", "check-annotators", "{d}/a.jsonl"], {"a.jsonl": _groups([0, 1, 2, 3])}, None, 2,
     "give --gold and/or at least two batches"),
    ("data check-annotators", ["data", "check-annotators", "--gold", "{d}/gold.jsonl", "{d}/bob.jsonl"],
     {"gold.jsonl": _groups([0, 1, 2, 3]), "bob.jsonl": _groups([3, 2, 1, 0])}, None, 1, ""),  # bob is REJECTED
    ("export", ["export", "--adapter", "{d}", "--out", "{d}/x"], {}, None, 2, "no adapter_config.json"),
    ("export", ["export", "--adapter", "{d}", "--out", "{d}/x", "--merge"], {}, "export", 1, "py-trainer export: refused:"),
    ("serve-policy", ["serve-policy", "--adapter", "{d}"], {}, None, 2, "--adapter {d}: no adapter_config.json"),
    ("serve-policy", ["serve-policy", "--run", "r9", "--runs-root", "{d}/runs"], {}, None, 2, "--run r9: no adapter at"),
    ("serve-policy", ["serve-policy", "--host", "0.0.0.0"], {}, None, 2, "a non-loopback address needs --token"),
    ("serve-policy", ["serve-policy", "--run", "r9", "--adapter", "{d}"], {}, None, 2, "not allowed with argument"),
]


@pytest.fixture
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_every_command_has_its_exit_codes():
    from py_trainer.server.cli import build_parser, main  # noqa: F401

    commands = {c[0] for c in EXIT_CODES}
    assert commands == {"serve", "train", "evaluate", "defaults", "init-model", "plot confusion", "plot compare",
                        "data clean", "data sample", "data check-annotators", "export", "serve-policy"}
    assert {c[0] for c in EXIT_CODES if c[4] == 2} == commands  # each has its user mistake


@pytest.mark.parametrize("command,argv,files,failure,code,want", EXIT_CODES,
                         ids=[f"{c[0]}-exit-{c[4]}-{i}" for i, c in enumerate(EXIT_CODES)])
def test_exit_code_rule(tmp_path, monkeypatch, capsys, busy_port, command, argv, files, failure, code, want):
    from py_trainer.server.cli import main

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    if failure is not None:
        monkeypatch.setattr(*_failures()[failure])
    sub = {"{d}": str(tmp_path), "{busy}": str(busy_port)}
    fill = lambda t: functools.reduce(lambda acc, kv: acc.replace(*kv), sub.items(), t)  # noqa: E731
    try:
        rc = main([fill(a) for a in argv])
    except SystemExit as done:
        rc = done.code
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.strip() and not LOG_LINE.match(l) and "Warning" not in l
             and "warnings.warn" not in l]
    assert rc == code, err
    assert "Traceback" not in err, err
    if want:  # a mistake is one line; a failure ends with the line that says why
        assert (len(lines) == 1 or code == 1) and fill(want) in lines[-1], err
