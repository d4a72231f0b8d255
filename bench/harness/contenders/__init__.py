"""What is measured: each module holds contender programs that run in a child process of their
own (`python -m harness.child PROGRAM`, see harness/child.py), take their arguments as strings
and return a dict of what they measured. They import their libraries inside the program, so a
child holds only its own contender.

    text_parsers     np.loadtxt, pandas.read_csv, pyarrow.csv, gensim on the same text
    local_load       embstore.load, np.load, safetensors, runai-model-streamer, fastsafetensors
    client_load      the Python client, embstore.load(local=False), from a server
    arrow_flight     an Arrow Flight server and its do_get client, the peer for serving
    lookups          key lookups, verified and not, from a file and a server
    trainer_cases    the seed table into TF1, TF2, Keras and torch, and the TF1 workaround
    distributed_ranks  one rank of a torch.distributed job loading a table three ways
"""
