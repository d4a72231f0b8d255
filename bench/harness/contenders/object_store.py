"""Downloading the seed table from a local S3 server (SeaweedFS, scripts/s3-server.sh): `embstore
pull` (parallel ranged GETs, every block verified, written to a .emb file) against boto3's
download_file (its multi-threaded transfer manager, defaults) and runai-model-streamer's S3 reader
(the table is a safetensors file; its tensor lands in the streamer's memory).

Each contender runs in a fresh process and reports its wall time; the S3 settings come from the
AWS_* variables the phase sets."""
import os
import subprocess
import time

CASES = ["embstore pull", "boto3 download_file", "runai-model-streamer (s3)"]


def run_case(case, embstore_bin, url, out):
    """Downloads s3:// `url` the way `case` does (to `out` where it writes a file)."""
    bucket, key = url[len("s3://"):].split("/", 1)
    t0 = time.perf_counter()
    if case == "embstore pull":
        subprocess.run([embstore_bin, "pull", "--from", url, "--out", out, "--force"], check=True,
                       stdout=subprocess.DEVNULL)
        size = os.path.getsize(out)
    elif case == "boto3 download_file":
        import boto3
        s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        s3.download_file(bucket, key, out)
        size = os.path.getsize(out)
    else:
        os.environ.setdefault("RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING", "0")
        from runai_model_streamer import SafetensorsStreamer
        size = 0
        with SafetensorsStreamer() as streamer:
            streamer.stream_file(url)
            for name, tensor in streamer.get_tensors():
                size += tensor.numel() * tensor.element_size()
    return {"case": case, "seconds": time.perf_counter() - t0, "bytes": size}
