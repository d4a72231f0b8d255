"""Command-line arguments shared by the examples: where the table comes from."""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(description, default_table="sample", extra=None):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--source", required=True,
                    help="server target (host:port or unix:PATH), store directory or table file; "
                         "scripts/demo.sh serves demo/store on unix:demo/embstore.sock")
    ap.add_argument("--table", default=default_table, help=f"table name (default {default_table})")
    if extra:
        extra(ap)
    return ap.parse_args()
