"""Bytes on disk: TFRecord framing (tfrecord.py, stream.py) and the tf.train.Example protobuf
wire (example_write.py, example_index.py, example_read.py, and the pure-Python example_py.py).
numpy, numba and crc32c only."""
