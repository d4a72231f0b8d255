"""embstore: load embedding tables into numpy, TensorFlow and PyTorch without graph constants.

    import embstore
    matrix = embstore.load("localhost:7070", "item_mat")
    embstore.save(trained, "s3://tables/item_mat.emb")

Sources are table files (.emb), store directories, and embstore servers ("host:port",
"unix:PATH"). The framework helpers live in embstore.tf and embstore.torch (imported on first
use, so importing embstore never imports TensorFlow or PyTorch).
"""
from . import errors
from ._core import ALIGNMENT, Source, aligned_empty, load, numpy_dtype, update
from ._native_import import _native
from ._save import convert, save

__version__ = _native.__version__
# Name of the SIMD kernel that converts F16/BF16 rows on this machine ("avx512", "avx2",
# "neon" or "scalar"); EMBSTORE_FORCE_KERNEL set before the import forces one.
active_kernel = _native.active_kernel()
from .errors import EmbstoreError, MissingKeysError

__all__ = ["ALIGNMENT", "EmbstoreError", "MissingKeysError", "Source", "aligned_empty",
           "active_kernel", "convert", "errors", "load", "numpy_dtype", "save", "tf", "torch", "update"]


def __getattr__(name):
    if name in ("tf", "torch"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'embstore' has no attribute {name!r}")
