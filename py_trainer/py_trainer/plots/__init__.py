"""matplotlib figures written into a run or a comparison: the reward-vs-step curve and the
per-step CSV (`curves`), and `agent compare`'s forest plot (`compare_plot`).
"""
