"""Statistics for the eval harness and the report: the port of ts_agent/src/agent/core/stats/.

The TypeScript files are the source of truth; index.ts documents the methods' conventions, the PRNG
and the percentile rule once. This package mirrors them file for file (errors, elementary,
distributions, rng, descriptive, paired, resampling, power, multiplicity, agreement, trend); every
function has the same name in snake_case and returns the same numbers bit for bit (``make parity``
checks it on the checked-in vectors and on random inputs). Importers use the package
(``from py_trainer import stats``), which re-exports the public names.

Conventions (as in index.ts)
- Scores, rewards and proportions are fractions (0.37), never percentage points.
- "sd" is always the sample standard deviation (Bessel, n - 1); se = sd / sqrt(n).
- Paired differences are d_i = b_i - a_i: ``a`` is the baseline, ``b`` the candidate.
- Intervals are two-sided at ``confidence`` (default 0.95).
- Bad input raises StatsInputError with the same ``kind`` as the TS code, in the same order of checks.
- Missing values: most functions refuse NaN, None and infinities; the nan_* functions and the
  held-out bootstraps (bootstrap_mean_ci, relative_change_ci) skip them (None, NaN, +-inf) and
  return NaN where too few values are left.

Why this code avoids ``sum``, ``**``, ``math.exp``/``log``/``atan`` and numpy: each op must be the
same IEEE-754 operation as in the TS code (sums left to right, x * x for squares, and exp/log/atan
built from + - * / sqrt), so the two languages agree to the last bit. Results are frozen
dataclasses whose field names are the snake_case of the TS result fields.
"""

from __future__ import annotations

from py_trainer.core.stats.agreement import (  # noqa: F401
                                             CohenKappa,
                                             FleissKappa,
                                             KendallW,
                                             cohen_kappa,
                                             fleiss_kappa,
                                             kendall_tau_b,
                                             kendall_w,
                                             )
from py_trainer.core.stats.descriptive import (  # noqa: F401
                                               RunsInterval,
                                               interval_over_runs,
                                               NO_SPREAD_ULPS,
                                               no_spread,
                                               ProportionInterval,
                                               mean,
                                               nan_mean,
                                               nan_sample_sd,
                                               sample_sd,
                                               standard_error,
                                               wilson_interval,
                                               )
from py_trainer.core.stats.distributions import (  # noqa: F401
                                                 normal_cdf,
                                                 normal_quantile,
                                                 student_t_quantile,
                                                 )
from py_trainer.core.stats.elementary import (  # noqa: F401
                                              atan,
                                              erfc,
                                              exp,
                                              log,
                                              )
from py_trainer.core.stats.errors import (  # noqa: F401
                                          StatsInputError,
                                          )
from py_trainer.core.stats.multiplicity import (  # noqa: F401
                                                ClusteredMean,
                                                clustered_mean_se,
                                                holm_adjust,
                                                pass_at_k,
                                                )
from py_trainer.core.stats.paired import (  # noqa: F401
                                          BootstrapInterval,
                                          Discordant,
                                          PairedComparison,
                                          PairedProportionInterval,
                                          mcnemar_exact_p,
                                          paired_bootstrap_ci,
                                          paired_comparison,
                                          tango_score_interval,
                                          )
from py_trainer.core.stats.power import (  # noqa: F401
                                         GATE_SIMULATION_DRAWS,
                                         GATE_SIMULATION_SEED,
                                         OperatingCharacteristic,
                                         PairedProportionGate,
                                         PlannedPairedSd,
                                         SimulatedOperatingCharacteristic,
                                         minimum_detectable_effect,
                                         operating_characteristic,
                                         paired_proportion_gate,
                                         planned_paired_sd,
                                         required_n_for_delta,
                                         simulated_operating_characteristic,
                                         )
from py_trainer.core.stats.resampling import (  # noqa: F401
                                              RelativeChange,
                                              bootstrap_mean_ci,
                                              relative_change_ci,
                                              )
from py_trainer.core.stats.rng import (  # noqa: F401
                                       Interval,
                                       Rng,
                                       )
from py_trainer.core.stats.trend import (  # noqa: F401
                                         HamedRaoTrend,
                                         START_VS_END_MAX_AUTOCORRELATION,
                                         START_VS_END_MIN_DF,
                                         StartVsEnd,
                                         Trend,
                                         hamed_rao_trend,
                                         start_vs_end,
                                         trend,
                                         )

__all__ = [
    "StatsInputError",
    "Interval",
    "ProportionInterval",
    "Discordant",
    "PairedComparison",
    "BootstrapInterval",
    "CohenKappa",
    "FleissKappa",
    "StartVsEnd",
    "Trend",
    "RelativeChange",
    "PairedProportionInterval",
    "OperatingCharacteristic",
    "ClusteredMean",
    "HamedRaoTrend",
    "PlannedPairedSd",
    "KendallW",
    "Rng",
    "normal_cdf",
    "normal_quantile",
    "student_t_quantile",
    "NO_SPREAD_ULPS",
    "no_spread",
    "mean",
    "sample_sd",
    "standard_error",
    "nan_mean",
    "nan_sample_sd",
    "wilson_interval",
    "mcnemar_exact_p",
    "paired_comparison",
    "paired_bootstrap_ci",
    "bootstrap_mean_ci",
    "relative_change_ci",
    "required_n_for_delta",
    "minimum_detectable_effect",
    "cohen_kappa",
    "kendall_tau_b",
    "fleiss_kappa",
    "start_vs_end",
    "trend",
    "tango_score_interval",
    "operating_characteristic",
    "pass_at_k",
    "holm_adjust",
    "clustered_mean_se",
    "hamed_rao_trend",
    "planned_paired_sd",
    "kendall_w",
    "RunsInterval",
    "interval_over_runs",
]

elementary = {"exp": exp, "log": log, "atan": atan, "erfc": erfc}
