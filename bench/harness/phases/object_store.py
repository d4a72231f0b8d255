"""Phase object_store: the seed table downloaded from a real S3 server on this machine
(SeaweedFS through scripts/s3-server.sh, data on the work directory, signatures checked):
`embstore pull` against boto3's download_file and runai-model-streamer's S3 reader
(harness.contenders.object_store), each in a fresh process, best of 3 (1 with --quick). Then
`embstore export s3://bench/seed.emb --rows 0:1000`: how many of the table's bytes a partial
read of an object moves (only the blocks of the rows asked for, and the header)."""
import os
import re
import subprocess

from harness.contenders.object_store import CASES
from harness.processes import environment, run_json_child
from harness.s3_server import SCRIPT, s3_server
from harness.timing import log

KEY, SECRET = "embstore-bench-key", "embstore-bench-secret"


def run(ctx):
    build = subprocess.run(["bash", str(SCRIPT), "--build"], capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"scripts/s3-server.sh --build failed: {build.stderr[-2000:]}")
    with s3_server(ctx.work / "s3", KEY, SECRET) as endpoint:
        return _measure(ctx, endpoint)


def _measure(ctx, endpoint):
    import boto3
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint, "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
           "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0", "AWS_ENDPOINT_URL_S3": endpoint}
    with environment(env):
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="bench")
        s3.upload_file(str(ctx.seed_table), "bench", "seed.emb")
        url = "s3://bench/seed.emb"
        out = ctx.work / "s3-download.emb"
        res = {"bytes": os.path.getsize(ctx.seed_table), "server": "SeaweedFS on 127.0.0.1",
               "contenders": {}}
        for case in CASES:
            log(f"  {case}")
            best = None
            for _ in range(1 if ctx.quick else 3):
                r = run_json_child("object-store", case, ctx.build / "cli" / "embstore", url,
                                   out, **env)
                if out.exists():
                    out.unlink()
                if best is None or r["seconds"] < best["seconds"]:
                    best = r
            res["contenders"][case] = best
        res["partial"] = _partial_export(ctx, url, env)
        return res


PARTIAL_ROWS = (0, 1000)


def _partial_export(ctx, url, env):
    """`embstore export URL OUT.npy --rows 0:1000`: the bytes it reports having transferred."""
    out = ctx.work / "s3-partial.npy"
    begin, end = PARTIAL_ROWS
    log(f"  embstore export --rows {begin}:{end}")
    cmd = [str(ctx.build / "cli" / "embstore"), "export", url, str(out), "--rows",
           f"{begin}:{end}", "--force"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    m = re.search(r"\(([0-9.]+) MB transferred\)", r.stdout + r.stderr)
    if not m:
        raise RuntimeError(f"{' '.join(cmd)} did not say how much it transferred: "
                           f"{(r.stdout + r.stderr)[-2000:]}")
    exported = os.path.getsize(out)
    out.unlink()
    return {"rows": end - begin, "transferred_bytes": float(m.group(1)) * 1e6,
            "exported_bytes": exported}
