"""pyarrow's Azure client, when it signs in with a token (Azure's default credential chain, a
service principal, a managed identity) and gets none, ends the whole process as it opens a
file: the Azure SDK's AuthenticationException escapes pyarrow there ("terminate called after
throwing an instance of 'Azure::Core::Credentials::AuthenticationException'", pyarrow 26),
where asking about a file raises it (a plain ArrowException, "Unknown error"). So the first
file a process opens through such a filesystem is asked about first (once per sign-in: one
request per process), and what is asked raises an OSError, as any failed request does: missing
credentials are then an error that says what to set (errors.store_hint), not a crash."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pyarrow as pa

_SIGNED_IN: set[tuple[str, ...]] = set()  # the token sign-ins that got a token
_LOCK = threading.Lock()


def signed_in(fs: Any, path: str) -> None:
    """Raise the store's error as an OSError when fs, an AzureFileSystem signing in with a
    token, gets no token; ask about `path` to find out, once per sign-in."""
    if fs.type_name != "abfs":
        return
    try:
        args = fs.__reduce__()[1][0]
    except Exception:  # noqa: BLE001 - not pyarrow's own: nothing known to guard
        return
    if args.get("account_key") or args.get("sas_token"):  # signs requests: no token to get
        return
    key = tuple(str(args.get(k, "")) for k in (
        "account_name", "blob_storage_authority", "client_id", "tenant_id")) + (
        hashlib.sha256(str(args.get("client_secret", "")).encode()).hexdigest(),)
    with _LOCK:
        if key in _SIGNED_IN:
            return
    file_info(fs, path)  # raises where opening it would abort
    with _LOCK:
        _SIGNED_IN.add(key)


def file_info(fs: Any, what: Any) -> Any:
    """fs.get_file_info(what), a store's plain ArrowException (Azure's "Unknown error" for a
    token it could not get) raised as the OSError of a failed request, as the others are:
    what catches those then names the file and what to check."""
    try:
        return fs.get_file_info(what)
    except pa.ArrowException as e:
        if isinstance(e, (OSError, ValueError)):
            raise
        raise OSError(str(e)) from None
