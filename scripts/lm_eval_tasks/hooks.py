"""Hooks of the lm-evaluation-harness tasks beside this file (aml_typology.yaml, arithmetic_chat.yaml):
the task file's test split, and each task's grader scored as py_trainer's Evaluate scores it."""

from py_trainer.core.rewards import build_scorer


def test_split(dataset):
    """The rows of the task file's "test" split (the file holds every split)."""
    return dataset.filter(lambda row: row["split"] == "test")


def _graded_by(name: str):
    """process_results for one greedy completion graded by py_trainer's reward `name` (None -> 0)."""
    score = build_scorer({"name": name})

    def process_results(doc, results):
        value = score(results[0], list(doc["answers"]))
        return {name: 0.0 if value is None else float(value)}

    return process_results


exact_match = _graded_by("exact_match")
final_number_match = _graded_by("final_number_match")
