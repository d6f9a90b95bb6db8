"""A filesystem of the user's own (fsspec's, as filesystem= takes it) that may not list the
output path, as a token without list rights (test_store_writes.py); a module of its own so
that Spark's executors can import it (SparkContext.addPyFile)."""

from __future__ import annotations

from fsspec.implementations.local import LocalFileSystem


class Unlisting(LocalFileSystem):
    """The local filesystem, refusing to say what is under `root`. fsspec's walk turns the
    refusal into an empty listing, so tfspark sees nothing there, not an error."""

    cachable = False

    def __init__(self, root: str = "", **kwargs):
        super().__init__(**kwargs)
        self.root = root

    def ls(self, path, detail=True, **kwargs):
        if self.root and self._strip_protocol(path).startswith(self.root):
            raise PermissionError(f"403 This request is not authorized to list {path}")
        return super().ls(path, detail=detail, **kwargs)
