"""The phases of bench/run.py, one module each, in run order: micro, conversion, scaling, local,
serving, seed, lookup, trainer, distributed, object_store, hdfs. Each module's run(ctx) measures
its contenders (harness.contenders, or a C++ benchmark) side by side and returns the dict that
becomes its section of results.json."""
import dataclasses
import pathlib


@dataclasses.dataclass
class RunContext:
    """What every phase is given."""
    quick: bool           # small sizes: a smoke test
    repeat: int           # conversion rounds (best time of each contender kept)
    tf_large: bool        # the seed scenario also on a table over 2 GB
    build: pathlib.Path   # the build dir with cli/embstore and the bench binaries
    rows: int             # rows of the seed table
    dim: int
    out: pathlib.Path     # results.json and plots; phases park their tools' JSON here
    work: pathlib.Path = None    # generated data (a tmpfs when it has room)
    store: pathlib.Path = None   # work/store: what `embstore serve` serves, seed.emb included
    text: dict = dataclasses.field(default_factory=dict)  # "e18", "g8", "w2v": text files
    w2v_rows: int = 0            # rows of the word2vec-form file
    seed_table: pathlib.Path = None  # store/seed.emb once converted
