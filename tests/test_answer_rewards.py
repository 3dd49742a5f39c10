"""The real-model rewards (issue 27): final_number_match reads the ANSWER where a chat model puts it
(the <answer> tag, else the number after the last "=", else a bare number), never the echoed
question; stops_after_answer pays a completion that is just an answer and ends there. The same
cases are in ts_agent/test/answer-rewards.test.ts; exact equality with TS is the parity vectors' job."""

from __future__ import annotations

import pytest

from py_trainer.core.task_rewards import (
                                          RewardInputError,
                                          build_reward,
                                          final_number_match_reward,
                                          reward_names,
                                          stops_after_answer_reward,
                                          )

GOLD = ["68"]


@pytest.mark.parametrize("completion, expected", [
    ("23 + 45 = 68", 1.0),                       # the echoed equation: its result is the answer
    ("23 + 45 = 68.", 1.0),
    ("68", 1.0),                                  # a bare number
    (" 68.\n", 1.0),
    ("<answer>68</answer>", 1.0),
    ("<answer> 68 </answer> because 23 + 45 = 70", 1.0),  # the tag wins over any "="
    ("<answer>70</answer> 23 + 45 = 68", 0.0),
    ("23 + 45 = 78", 0.0),                       # wrong result
    ("23 + 45 = 68\n\n10 + 3 = 13", 0.0),       # ran on: the last "=" is another sum's
    ("What is 23 + 45? 68 is it", 0.0),          # neither a tag, an "=" nor a bare number
    ("23 + 68", 0.0),                            # the first number (echo) never counts
    ("= 6.8", 0.0),                              # a decimal is not the integer 6
    ("x = 680", 0.0),
    ("23 + 45 = -68", 0.0),
    ("", 0.0),
])
def test_final_number_match_reads_the_answer_not_the_echo(completion, expected):
    assert final_number_match_reward(completion, GOLD) == expected


def test_final_number_match_negative_and_gold_normalisation():
    assert final_number_match_reward("19 - 20 = -1", ["-1"]) == 1.0
    assert final_number_match_reward("19 - 20 = 1", ["-1"]) == 0.0
    assert final_number_match_reward("-1", [" -1 "]) == 1.0
    with pytest.raises(RewardInputError) as e:
        final_number_match_reward("1", ["", "  "])
    assert e.value.kind == "empty"


@pytest.mark.parametrize("completion, expected", [
    ("68", 1.0),
    ("68.", 1.0),
    ("  -3\n", 1.0),
    ("<answer>68</answer>", 1.0),
    ("23 + 45 = 68", 1.0),
    ("23 + 45 = 78", 1.0),                       # stopping is paid whether or not it is right
    ("(2 + 3) * 4 = 20.", 1.0),
    ("23 + 45 = 68\n\n10 + 3 = 13", 0.0),       # ran on
    ("23 + 45 = 68. The answer is 68.", 0.0),
    ("The answer is 68", 0.0),
    ("23 + 45 =", 0.0),                          # cut before the result
    ("", 0.0),
    ("<answer>68</answer> done", 0.0),
])
def test_stops_after_answer_pays_only_a_completion_that_is_just_an_answer(completion, expected):
    assert stops_after_answer_reward(completion) == expected


def test_registry_has_both_with_their_params():
    assert {"final_number_match", "stops_after_answer"} <= set(reward_names())
    b = build_reward({"name": "final_number_match"})
    assert b.params == {"tag": "answer"}
    assert b.score("23 + 45 = 68", ["68"]) == 1.0
    assert b.score("23 + 45 = 68", [""]) is None  # no usable gold answer: unscorable
    s = build_reward({"name": "stops_after_answer", "weight": 0.5})
    assert s.params == {"tag": "answer"} and s.weight == 0.5
    assert s.score("23 + 45 = 68", ["1"]) == 1.0
    assert build_reward({"name": "final_number_match", "params": {"tag": "final"}}).score("<final>68</final>", ["68"]) == 1.0
    with pytest.raises(RewardInputError) as e:
        build_reward({"name": "stops_after_answer", "params": {"match": "exact"}})
    assert e.value.kind == "unknown_param"
