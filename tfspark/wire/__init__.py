"""Bytes on disk: TFRecord framing (wire.tfrecord, wire.stream) and the tf.train.Example
protobuf wire (wire.example_write, wire.example_index, wire.example_read, and the pure-Python
wire.example_py).
numpy, numba and crc32c only."""
