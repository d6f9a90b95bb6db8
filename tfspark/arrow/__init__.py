"""Arrow RecordBatches <-> serialized records: the encoders (encode_batch: a batch's rows as
serialized tf.train.Example records) and their mirror, the decoders. encode_batch is imported
on first use (the encoders load the compiled kernels)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfspark.arrow.encode import encode_batch

__all__ = ["encode_batch"]


def __getattr__(name: str) -> Any:
    if name == "encode_batch":
        from tfspark.arrow.encode import encode_batch

        return encode_batch
    raise AttributeError(f"module 'tfspark.arrow' has no attribute {name!r}")
