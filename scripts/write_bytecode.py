"""Write the .pyc files of what the sidecar, its workers, its CLI and the test suite import, once, at
`make setup` (the `.stamps/bytecode` step).

Why: uv installs packages without compiling their bytecode (pip compiles at install), and where the
environment sets PYTHONDONTWRITEBYTECODE (this machine does, and so may a CI runner), Python never
writes a .pyc at import either. Every process then compiles the Python sources of torch,
transformers, TRL and PEFT again: `import trl, peft, transformers, torch` took 29.9 s of CPU on the
2-core machine without .pyc files and 11.8 s with them, and `make test` starts about seventy such
processes (sidecars' fork servers, workers, CLIs). `python -m compileall` over the whole venv
writes every module's (19,500 files, 51 s on 2 cores); importing what is used writes only those.

The modules: the fork server's preload lists (one source: local_executor and inference_worker),
the entry points, the model classes the embedded and real models load lazily, and the reference
libraries the tests import. A module left out costs its compile in each process that imports it,
nothing else. Python reads existing .pyc files whatever PYTHONDONTWRITEBYTECODE says, so nothing
else changes."""

from __future__ import annotations

import importlib
import sys
import time

sys.dont_write_bytecode = False  # this process writes them, whatever the environment says

from py_trainer.runs.local_executor import RUN_PRELOAD, WORKER_PRELOAD  # noqa: E402
from py_trainer.workers.inference_worker import PRELOAD as INFERENCE_PRELOAD  # noqa: E402

ENTRY_POINTS = ["py_trainer.server.cli", "py_trainer.server.servicer", "py_trainer.workers.train_worker", "py_trainer.workers.inference_worker",
                "py_trainer.runs.forkserver", "py_trainer.server.standalone", "py_trainer.workers.export_check",
                "py_trainer.workers.memory_estimate", "py_trainer.runs.multinode"]
LAZY = ["transformers.models.qwen2.modeling_qwen2", "transformers.models.qwen2.tokenization_qwen2",
        "transformers.models.llama.modeling_llama", "transformers.models.gpt2.tokenization_gpt2",
        "transformers.modeling_gguf_pytorch_utils", "transformers.integrations",
        "transformers.integrations.integration_utils", "transformers.trainer", "trl.trainer.dpo_trainer",
        "peft.tuners.lora", "torch.distributed.run"]
OPTIONAL = ["ray", "ray.util.placement_group", "ray.util.scheduling_strategies", "py_trainer.workers.ray_bridge",
            "py_trainer.runs.ray_executor", "scipy.stats", "scipy.optimize", "statsmodels.api",
            "statsmodels.stats.proportion", "statsmodels.stats.power", "statsmodels.stats.multitest",
            "statsmodels.stats.inter_rater", "statsmodels.stats.contingency_tables", "statsmodels.tsa.stattools",
            "sklearn.metrics", "torch.utils.tensorboard", "tensorboard.backend.event_processing.event_accumulator", "hypothesis", "gguf"]
"""Imported where installed (the ray and dev extras, the real model's gguf reader)."""


def main() -> int:
    t0 = time.monotonic()
    required = [*ENTRY_POINTS, *RUN_PRELOAD, *(m for ms in WORKER_PRELOAD.values() for m in ms), *INFERENCE_PRELOAD,
                *LAZY]
    for name in required:
        importlib.import_module(name)
    skipped = []
    for name in OPTIONAL:
        try:
            importlib.import_module(name)
        except ImportError:
            skipped.append(name)
    note = f" (not installed: {', '.join(skipped)})" if skipped else ""
    print(f"bytecode written for {len(sys.modules)} modules in {time.monotonic() - t0:.0f} s{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
