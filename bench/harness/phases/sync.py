"""Phase sync: the seed table's next version, where training changed 1% of the rows, brought to a
copy of the old one (harness.contenders.sync): from a server (`embstore serve`, streamed, not its
file) and from the local S3 server, with the changed rows at random ids (as a fine-tune's sparse
updates spread them) and clustered in 1% of the blocks. Each case in a fresh process, best of 3
(1 with --quick): the delta's time and bytes moved against a full fetch of the same version. In
the bucket each new version is saved over the old one with embstore.save, as a trainer publishes
it, which uploads the changed rows beside it (docs/FORMAT.md, "Deltas")."""
import os
import pathlib
import subprocess

from harness.contenders.sync import CASES, spare_of
from harness.processes import embstore_server, environment, run_json_child
from harness.s3_server import SCRIPT, s3_server
from harness.timing import log

KEY, SECRET = "embstore-bench-key", "embstore-bench-secret"


def _versions(ctx):
    """The old version (the seed table as converted, with row hashes added by a save), the one
    before it (1% of the rows different at random ids: what a copy's spare holds after a sync),
    and the two new ones, written with embstore.save (row hashes stored)."""
    import numpy as np
    import embstore
    folder = ctx.work / "sync"
    store = folder / "store"
    store.mkdir(parents=True, exist_ok=True)
    old = embstore.load(ctx.seed_table)
    embstore.save(old, folder / "old.emb", force=True, durable=False)
    rng = np.random.default_rng(30)
    n = max(1, len(old) // 100)
    previous = old.copy()
    ids = rng.choice(len(old), n, replace=False)
    previous[ids] += rng.standard_normal((n, old.shape[1])).astype(np.float32)
    embstore.save(previous, folder / "previous.emb", force=True, durable=False)
    del previous
    scattered = old.copy()
    ids = rng.choice(len(old), n, replace=False)
    scattered[ids] += rng.standard_normal((n, old.shape[1])).astype(np.float32)
    embstore.save(scattered, store / "random.emb", force=True, durable=False)
    clustered = old.copy()
    start = int(rng.integers(0, len(old) - n))
    clustered[start:start + n] += rng.standard_normal((n, old.shape[1])).astype(np.float32)
    embstore.save(clustered, store / "clustered.emb", force=True, durable=False)
    return folder, store, n


def _publish(url, old, new, env):
    """Saves the old version as `url`, then the new one over it (the delta written beside it);
    returns what the second save said of the delta."""
    import embstore
    with environment(env):
        embstore.save(embstore.load(old), url, force=True, durable=False)
        saved = embstore.save(embstore.load(new), url, force=True, durable=False)
    return {k: saved[k] for k in ("delta_rows", "delta_bytes", "delta_skipped")}


def _best(ctx, args, env):
    res = {}
    for case in CASES:
        best = None
        for _ in range(1 if ctx.quick else 3):
            r = run_json_child("sync", case, *args, **env)
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        res[case] = best
    return res


def run(ctx):
    folder, store, changed = _versions(ctx)
    out = folder / "copy.emb"
    embstore_bin = ctx.build / "cli" / "embstore"
    res = {"rows": ctx.rows, "dim": ctx.dim, "changed_rows": changed,
           "table_bytes": os.path.getsize(folder / "old.emb"), "server": {}, "s3": {}}
    with embstore_server(ctx.build, store) as server:
        for name in ("random", "clustered"):
            log(f"  server, {name}")
            res["server"][name] = _best(
                ctx, [embstore_bin, server.target, name, folder / "old.emb", out,
                      folder / "previous.emb"], {})
    build = subprocess.run(["bash", str(SCRIPT), "--build"], capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"scripts/s3-server.sh --build failed: {build.stderr[-2000:]}")
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_CONFIG_FILE": "/nonexistent"}
    with s3_server(ctx.work / "s3-sync", KEY, SECRET) as endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
        subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{KEY}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        f"{endpoint}/sync"], check=True)
        res["s3_published"] = {}
        for name in ("random", "clustered"):
            url = f"s3://sync/{name}.emb"
            res["s3_published"][name] = _publish(url, folder / "old.emb", store / f"{name}.emb",
                                                 env)
            log(f"  S3, {name}")
            res["s3"][name] = _best(ctx, [embstore_bin, url, "", folder / "old.emb", out,
                                           folder / "previous.emb"], env)
    out.unlink(missing_ok=True)
    pathlib.Path(spare_of(out)).unlink(missing_ok=True)
    return res
