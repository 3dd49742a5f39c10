"""A Python-only reward plugin for tests (loaded via PY_TRAINER_REWARD_PLUGINS): it raises."""


def rewards():
    def explode_factory(params):
        def score(completion, answers):
            raise ValueError("boom: this reward always raises")

        return score

    return {"explode": explode_factory}
