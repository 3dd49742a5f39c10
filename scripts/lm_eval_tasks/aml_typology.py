"""Hooks of the aml_typology lm-evaluation-harness task (aml_typology.yaml beside this file)."""

from py_trainer.rewards import build_scorer

_exact_match = build_scorer({"name": "exact_match"})


def test_split(dataset):
    """The rows of the task file's "test" split (the file holds every split)."""
    return dataset.filter(lambda row: row["split"] == "test")


def process_results(doc, results):
    """exact_match of the one greedy completion, scored as py_trainer's Evaluate scores it."""
    score = _exact_match(results[0], list(doc["answers"]))
    return {"exact_match": 0.0 if score is None else float(score)}
