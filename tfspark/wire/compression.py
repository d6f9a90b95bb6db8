"""TFRecord compression names, apart from the framing kernels (tfrecord.py): write options and
read plans on the driver check them without importing numba (about 0.2 s of a first write)."""

from __future__ import annotations

from tfspark.errors import OptionError

GZIP_MAGIC = b"\x1f\x8b"
GZIP_LEVELS = range(1, 10)  # zlib's 1 (fastest) .. 9 (smallest); TensorFlow's default is 6


def normalize_compression(value: str | None) -> str | None:
    """None, "", "none" (any case) -> None; "gzip" (any case) -> "gzip"; else OptionError."""
    if value is None:
        return None
    if isinstance(value, str):
        low = value.lower()
        if low in ("", "none"):
            return None
        if low == "gzip":
            return "gzip"
    raise OptionError(
        f"option 'compression' got {value!r}; allowed values are None, '', 'none' "
        "(no compression) and 'gzip' (any case)"
    )


def file_suffix(compression: str | None) -> str:
    """The file name suffix for a compression setting: ".tfrecord" or ".tfrecord.gz"."""
    return ".tfrecord.gz" if normalize_compression(compression) == "gzip" else ".tfrecord"
