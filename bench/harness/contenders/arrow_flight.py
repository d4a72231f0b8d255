"""Arrow Flight, the peer for serving: a Flight server of the same matrix, and a do_get client
that gathers it into one numpy array, as embstore.load returns."""
from harness.timing import best_of


def serve(path):
    """Serves the table at `path` as one Flight stream on a free loopback port; prints the port,
    then serves until killed."""
    import embstore
    import pyarrow as pa
    import pyarrow.flight as fl
    matrix = embstore.load(path)
    dim = matrix.shape[1]
    # One FixedSizeList<float32>[dim] column: each batch is one contiguous buffer of rows, the
    # layout embstore streams. 8192 rows (4 MiB at dim 128) per batch, about embstore's chunk
    # size.
    flat = pa.array(matrix.reshape(-1))
    column = pa.FixedSizeListArray.from_arrays(flat, dim)
    table = pa.Table.from_arrays([column], names=["embedding"]).combine_chunks()
    batches = table.to_batches(max_chunksize=8192)

    class Server(fl.FlightServerBase):
        def do_get(self, context, ticket):
            return fl.GeneratorStream(table.schema, iter(batches))

    server = Server("grpc://127.0.0.1:0")
    print(server.port, flush=True)
    server.serve()


def best_get_time(port, repeats, dim):
    """The best of `repeats` do_get calls of the whole matrix, each gathered into one contiguous
    (rows, dim) float32 array."""
    import pyarrow.flight as fl
    dim = int(dim)
    client = fl.connect(f"grpc://127.0.0.1:{int(port)}")

    def get():
        table = client.do_get(fl.Ticket(b"seed")).read_all()
        matrix = table.column(0).combine_chunks().values.to_numpy(
            zero_copy_only=False).reshape(-1, dim)
        return matrix, table  # both freed after the clock stops

    return {"seconds": best_of(int(repeats), get)}
