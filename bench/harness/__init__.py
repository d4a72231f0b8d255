"""The benchmark harness behind bench/run.py, one job per module.

    report/      what a run's results become: ratios, plots, benchmarks.md, results.json
"""
