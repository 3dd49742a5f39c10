"""`py-trainer plot confusion | compare`: the figures the TS report draws with matplotlib."""

from __future__ import annotations

import argparse
from pathlib import Path

from py_trainer.server.cli_args import Parser, UsageError


def _cmd_plot_confusion(args: argparse.Namespace) -> int:
    import json

    from py_trainer.plots.curves import write_confusion_plot

    try:
        spec = json.loads(args.input.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"py-trainer plot confusion: {args.input}: no such file")
    except json.JSONDecodeError as err:
        raise UsageError(f"py-trainer plot confusion: {args.input}:{err.lineno}:{err.colno}: {err.msg}")
    try:
        write_confusion_plot(args.output, spec)
    except ValueError as err:
        raise UsageError(f"py-trainer plot confusion: {args.input}: {err}")
    print(args.output)
    return 0


def _cmd_plot_compare(args: argparse.Namespace) -> int:
    import json

    from py_trainer.plots.compare_plot import write_compare_plot

    try:
        spec = json.loads(args.input.read_text(encoding="utf-8"))
        write_compare_plot(args.output, spec)
    except FileNotFoundError:
        raise UsageError(f"py-trainer plot compare: {args.input}: no such file")
    except json.JSONDecodeError as err:
        raise UsageError(f"py-trainer plot compare: {args.input}:{err.lineno}:{err.colno}: {err.msg}")
    except (ValueError, AttributeError) as err:
        raise UsageError(f"py-trainer plot compare: {args.input}: {err}")
    print(args.output)
    return 0


def add_plot_commands(sub) -> None:
    """`plot` and its two figures."""
    p = sub.add_parser("plot", help="draw a figure for the TS report with matplotlib")
    psub = p.add_subparsers(dest="plot_command", required=True, parser_class=Parser)
    c = psub.add_parser("confusion", help="confusion matrices (gold label x answer) per variant, side by side")
    c.add_argument("input", type=Path, help='JSON: {"title", "gold": [...], "answers": [...], "variants": [{"name", "matrix"}]}')
    c.add_argument("output", type=Path, help="PNG to write (atomically)")
    c.set_defaults(func=_cmd_plot_confusion)
    c = psub.add_parser("compare", help="agent compare's pairwise differences with their decision intervals")
    c.add_argument("input", type=Path, help='JSON: {"title", "rows": [{"label", "estimate", "lower", "upper", "rejects"}]}')
    c.add_argument("output", type=Path, help="PNG to write (atomically)")
    c.set_defaults(func=_cmd_plot_compare)
