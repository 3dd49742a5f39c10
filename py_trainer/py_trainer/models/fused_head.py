"""TRL's fused LM head on CPU: score only the positions that are scored.

TRL (1.16) patches every policy and reference model it trains with a chunked log-prob LM head
(`trl.trainer.utils.add_fused_lm_head`, used by GRPOTrainer and DPOTrainer). Its forward chooses
between two ways to feed the head:

    compact = _use_triton(hidden_states.device)
    ... hidden_states[mask] if compact else hidden_states.reshape(-1, hidden)

`compact` (only the positions whose label is not -100, i.e. the completion tokens) is taken on
CUDA/XPU only. Everywhere else every position of the padded (prompt + completion) batch goes
through the LM-head projection and the log-softmax, forward and backward, and is masked
afterwards -- a choice made for Neuron, where a data-dependent row count recompiles the graph. On
CPU nothing recompiles, so that work is thrown away: with the AML prompts (~145 tokens) and
completions of ~7-32 tokens, well over 80% of the head's rows are prompt positions. In `make demo`
the head was a quarter of the step time (py-spy, 2026-12-01).

`compact_fused_head_on_cpu()` makes the head take TRL's own compact path on CPU as well. The
kernel choice is untouched (torch tiles on CPU; `trl.kernels.chunked_logprob` keeps its own
`_use_triton`), so CPU runs compute the same per-token log-probabilities and entropies on the
scored positions, in fewer rows. It patches one private name of TRL's and is applied only when
the source of `add_fused_lm_head` still makes that decision with that name; otherwise it leaves
TRL alone and says so (`tests/test_fused_head.py` checks both the equality and the guard).
"""

from __future__ import annotations

import inspect
import logging

log = logging.getLogger(__name__)

DECISION = "compact = _use_triton(hidden_states.device)"
_MARK = "_py_trainer_compact_on_cpu"


def compact_fused_head_on_cpu() -> bool:
    """Make TRL's fused LM head score only the valid positions on CPU. Idempotent. True when the
    patch is in place (now or before), False when this TRL does not make the decision this module
    knows (then nothing is changed)."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - trl is a runtime dependency
        return False
    current = getattr(trl_utils, "_use_triton", None)
    if current is None:
        log.info("TRL has no trainer.utils._use_triton: fused LM head left as TRL ships it")
        return False
    if getattr(current, _MARK, False):
        return True
    try:
        source = inspect.getsource(trl_utils.add_fused_lm_head)
    except (AttributeError, OSError, TypeError):
        source = ""
    if DECISION not in source:
        log.info("TRL's add_fused_lm_head no longer reads %r: fused LM head left as TRL ships it", DECISION)
        return False

    def compact_or_triton(device) -> bool:
        return device.type == "cpu" or current(device)

    setattr(compact_or_triton, _MARK, True)
    compact_or_triton.original = current  # type: ignore[attr-defined]
    trl_utils._use_triton = compact_or_triton
    return True


def restore_fused_head() -> None:
    """Undo `compact_fused_head_on_cpu` (tests and benchmarks compare both paths)."""
    import trl.trainer.utils as trl_utils

    current = getattr(trl_utils, "_use_triton", None)
    if current is not None and getattr(current, _MARK, False):
        trl_utils._use_triton = current.original
