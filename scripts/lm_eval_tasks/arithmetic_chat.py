"""Hooks of the arithmetic_chat lm-evaluation-harness task (arithmetic_chat.yaml beside this file)."""

from py_trainer.rewards import build_scorer

_final_number_match = build_scorer({"name": "final_number_match"})


def test_split(dataset):
    """The rows of the task file's "test" split (the file holds every split)."""
    return dataset.filter(lambda row: row["split"] == "test")


def process_results(doc, results):
    """final_number_match of the one greedy completion, scored as py_trainer's Evaluate scores it."""
    score = _final_number_match(results[0], list(doc["answers"]))
    return {"final_number_match": 0.0 if score is None else float(score)}
