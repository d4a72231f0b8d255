"""Keras: Initializer(source, table) as an embeddings_initializer, registered so that saved
models load back without the source."""
import importlib
import os

import numpy as np

from .._core import LoadArgs, Source, load as _load
from ..errors import InvalidArgumentError
from ._common import _rows_arg, _table_rows, tf

try:
    _KerasInitializer = tf.keras.initializers.Initializer
    _register_keras = tf.keras.utils.register_keras_serializable(package="embstore",
                                                                  name="Initializer")
    _keras_custom_objects = tf.keras.utils.get_custom_objects
except AttributeError:  # pragma: no cover
    _KerasInitializer = object

    def _register_keras(cls):
        return cls

    def _keras_custom_objects():
        return {}


def _keras_loading():
    """True while keras.models.load_model rebuilds a model from its file. It loads the saved
    weights right after, so initial values would only be overwritten.

    Keras 3 holds an ObjectSharingScope open exactly then (and while saving, when no initializer
    runs). Keras 2 (tf.keras of TensorFlow 2.15 and earlier, or tf_keras) does the same for
    `.keras` files, and loads `.h5` files and SavedModel directories inside its
    `in_tf_saved_model_scope`. Any other Keras: False, and load_model loads the table, then
    overwrites it with the saved weights."""
    root = _KerasInitializer.__module__.split(".")[0]  # "keras" or "tf_keras"
    try:
        global_state = importlib.import_module(root + ".src.backend.common.global_state")
    except ImportError:
        global_state = None
    if global_state is not None:  # Keras 3
        return global_state.get_global_attribute("shared_objects/id_to_obj_map") is not None
    try:  # Keras 2
        serialization = importlib.import_module(root + ".src.saving.serialization_lib")
        legacy = importlib.import_module(root + ".src.saving.legacy.saved_model.utils")
    except ImportError:  # pragma: no cover - a Keras laid out differently
        return False
    return bool(getattr(serialization.SHARED_OBJECTS, "enabled", False)
                or legacy.in_tf_saved_model_scope())


@_register_keras
class EmbstoreInitializer(_KerasInitializer):
    """Keras initializer that loads a table: `Embedding(..., embeddings_initializer=
    embstore.tf.Initializer("localhost:7070", "item_mat"))`.

    get_config() holds only (source, table, rows), so saved models and their configs stay small;
    the values live in the weights, where they belong. It is registered as "embstore>Initializer",
    so keras.models.load_model needs only `import embstore.tf`; while load_model rebuilds the
    model, the initializer returns zeros instead of loading (the saved weights replace them), so
    a saved model loads without its source.

    Its class name, which Keras writes into configs beside the registered name, is
    EmbstoreInitializer: Keras 2 loads `.h5` files and SavedModels by that bare class name, and
    "Initializer" would find Keras's own base class. embstore.tf.Initializer is the same class.
    """

    def __init__(self, source, table=None, rows=None, **load_kwargs):
        self.source = os.fspath(source) if isinstance(source, os.PathLike) else source
        self.table = table
        rows = _rows_arg(rows)
        if isinstance(rows, slice):
            raise InvalidArgumentError("Initializer takes rows=(begin, end), not a slice")
        self.rows = rows
        self.load_kwargs = load_kwargs

    def __call__(self, shape, dtype=None, partition_shape=None, partition_offset=None,
                 **kwargs):
        """The weight of `shape`; with partition_shape and partition_offset (TensorFlow's
        partitioned initialization: ParameterServerStrategy asks for each shard that way), only
        that block of rows."""
        dtype = tf.as_dtype(dtype or tf.float32)
        if _keras_loading():
            return tf.zeros(partition_shape or shape, dtype)
        args = LoadArgs(self.load_kwargs, "embstore.tf")
        src = args.resolve(self.source)
        desc = src.describe(self.table)
        begin, end = _table_rows(src, desc, self.rows)
        want = [end - begin, desc["dim"]]
        if [int(d) for d in shape] != want:
            raise InvalidArgumentError(
                f"layer asks for a {list(shape)} weight, but {src.where(desc)} rows "
                f"[{begin}, {end}) are {want}")
        if partition_shape is not None:
            first = begin + int((partition_offset or [0])[0])
            begin, end = first, first + int(partition_shape[0])
        load_dtype = {tf.float32: "float32", tf.float16: "float16",
                      tf.bfloat16: "bfloat16"}.get(dtype, "float32")
        arr = _load(src, self.table, rows=(begin, end), dtype=load_dtype, **args.read)
        return _tensor_sharing(arr, dtype)

    def get_config(self):
        source = self.source.location if isinstance(self.source, Source) else self.source
        return {"source": source, "table": self.table,
                "rows": list(self.rows) if self.rows is not None else None}

    @classmethod
    def from_config(cls, config):
        return cls(config["source"], config.get("table"), config.get("rows"))


# Saved configs and pickles name the class where users import it from, as before this module
# was split out.
EmbstoreInitializer.__module__ = "embstore.tf"
Initializer = EmbstoreInitializer
# Keras 2's legacy loader looks classes up by their bare name among the custom objects.
_keras_custom_objects()["EmbstoreInitializer"] = EmbstoreInitializer


def _tensor_sharing(arr, dtype):
    """A tensor over `arr`'s memory (DLPack, no copy; the tensor keeps the array alive), so the
    weight Keras makes from it is the one copy of the table. Falls back to a copy where DLPack
    cannot carry the dtype (numpy has no DLPack bfloat16)."""
    if arr.dtype == dtype.as_numpy_dtype and arr.dtype != np.dtype(tf.bfloat16.as_numpy_dtype):
        try:
            return tf.experimental.dlpack.from_dlpack(arr.__dlpack__())
        except (AttributeError, TypeError, ValueError, tf.errors.OpError):
            pass
    return tf.convert_to_tensor(arr, dtype=dtype)
