"""The benchmark harness behind bench/run.py, one job per module.

Measurement:
    procfs       a process's memory from /proc: resident, peak, the peak's reset, a sampler
    timing       the log line, best of N repetitions
    processes    a command's time and peak RSS, contenders in fresh interpreters, `embstore serve`
    child        `python -m harness.child PROGRAM ARGS`: the entry point of those interpreters
    data         the build dir, the seed's sizes, generated text files, the word2vec form
    machine      what a run is measured on: CPU, memory, versions, commit
What is measured and how:
    contenders/  the programs that run in child processes, one module per kind of contender
    phases/      the phases of bench/run.py, one module each: which contenders, what sizes
What it becomes:
    report/      ratios, plots, benchmarks.md, results.json

Modules a child process imports (procfs, timing, child, contenders) import nothing heavy at the
top, so a child's peak RSS is its contender's.
"""
