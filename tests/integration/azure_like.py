"""A filesystem of the user's own (fsspec's, as filesystem= takes it) that fails as pyarrow's
Azure filesystem does with a SAS token (test_secrets_in_errors.py); a module of its own so that
Spark's executors can import it (SparkContext.addPyFile)."""

from __future__ import annotations

import re

from fsspec.implementations.local import LocalFileSystem

ACCOUNT = "devstoreaccount1"
SECRET = "S3CR3T-SIGNATURE"


class AzureLike(LocalFileSystem):
    """The local filesystem, failing as pyarrow's Azure filesystem does with a SAS token: a
    file whose path matches `fail` does not open, the error naming the request's URL with the
    token. Once one has failed, asking what is under `then_listing` fails too (as the
    clean-up of a write whose token expired does)."""

    def __init__(self, fail: str = "", then_listing: str = "", **kwargs):
        super().__init__(**kwargs)
        self.fail, self.then_listing = fail, then_listing

    def _refuse(self, path: str) -> OSError:
        if self.then_listing:
            open(f"{self.then_listing}.failed", "w").close()  # (seen by every process)
        return OSError(f"GetProperties failed for 'https://{ACCOUNT}.blob.core.windows"
                       f".net/c{path}?sv=2021-08-06&sp=r&sig={SECRET}'. Azure Error: "
                       f"[AuthorizationFailure] 403 This request is not authorized.")

    def _open(self, path, mode="rb", **kwargs):
        if self.fail and re.search(self.fail, path):
            raise self._refuse(path)
        return super()._open(path, mode, **kwargs)

    def info(self, path, **kwargs):
        if self.then_listing and path.startswith(self.then_listing) and \
                LocalFileSystem().exists(f"{self.then_listing}.failed"):
            raise self._refuse(path)
        return super().info(path, **kwargs)
