"""TFRecord compression: its names and the sniffing of gzip, apart from the framing kernels
(wire.tfrecord), so write options and read plans on the driver use them without importing numba
(about 0.2 s of a first write)."""

from __future__ import annotations

from typing import Any

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


def sniff_gzip(raw: Any) -> bool:
    """Whether a seekable binary file starts with the gzip magic bytes (it is rewound).

    Every reader decides compression this way when no manifest says: the content, not the
    file name, tells (a gzip file named .tfrecord is still gzip)."""
    head = raw.read(2)
    raw.seek(0)
    return bytes(head) == GZIP_MAGIC
