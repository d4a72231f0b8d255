"""The child-process entry point: `python -m harness.child PROGRAM ARGS...` runs one contender
program in a fresh interpreter and prints the dict it returns as one JSON line, the last line of
its output (harness.processes.run_json_child reads it). A program that returns None prints
nothing (a server, a rank that does not report).

bench/ must be on PYTHONPATH (harness.processes.child_env puts it there). Only the chosen
program's module is imported, so a child's memory is its contender's.
"""
import importlib
import json
import sys

# PROGRAM: (module, function). Every argument reaches the function as a string.
PROGRAMS = {
    "parse-text": ("harness.contenders.text_parsers", "parse"),
    "local-load": ("harness.contenders.local_load", "best_load_time"),
    "client-load": ("harness.contenders.client_load", "best_load_time"),
    "flight-server": ("harness.contenders.arrow_flight", "serve"),
    "flight-get": ("harness.contenders.arrow_flight", "best_get_time"),
    "lookup": ("harness.contenders.lookups", "lookup_times"),
    "trainer-case": ("harness.contenders.trainer_cases", "run_case"),
    "distributed-rank": ("harness.contenders.distributed_ranks", "run_rank"),
    "object-store": ("harness.contenders.object_store", "run_case"),
    "hdfs-download": ("harness.contenders.hdfs", "download"),
    "hdfs-load": ("harness.contenders.hdfs", "load"),
    "writer": ("harness.contenders.writers", "save"),
    "sync": ("harness.contenders.sync", "run_case"),
}


def main(argv):
    if not argv or argv[0] not in PROGRAMS:
        sys.exit(f"usage: python -m harness.child {{{','.join(PROGRAMS)}}} ARGS...")
    module, function = PROGRAMS[argv[0]]
    result = getattr(importlib.import_module(module), function)(*argv[1:])
    if result is not None:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
