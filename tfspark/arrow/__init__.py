"""Arrow RecordBatches <-> serialized records: encode.py and its mirror decode.py."""
