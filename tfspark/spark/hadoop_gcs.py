"""A gs:// path as the cluster's Spark reaches it through Google's Cloud Storage connector: its
endpoint (an emulator's), unauthenticated access and the service account it impersonates,
made into pyarrow's GcsFileSystem for tfspark's driver and tasks (hadoop_stores.py). A key
file pyarrow can take only from GOOGLE_APPLICATION_CREDENTIALS."""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark.errors import OptionError
from tfspark.spark.hadoop_conf import Settings
from tfspark.store.redaction import redact
from tfspark.store.uris import GCS_RETRY

_GOOGLE = "storage.googleapis.com"
_KEYFILE = ("fs.gs.auth.service.account.json.keyfile",
            "google.cloud.auth.service.account.json.keyfile")  # (connector 3.x, then 1.x-2.x)
_TOKEN_PROVIDER = ("fs.gs.auth.access.token.provider", "fs.gs.auth.access.token.provider.impl")


def gcs_filesystem(conf: Settings, path: str) -> pafs.GcsFileSystem | None:
    """pyarrow's GcsFileSystem with what Spark's Hadoop settings `conf` set; None where they
    set nothing pyarrow's defaults lack (its Application Default Credentials, which on
    Dataproc and GCE are the VM's service account, as the connector's default is). Raises
    OptionError, naming the setting, for a way of signing in pyarrow cannot follow."""

    def refuse(what: str, do: str) -> OptionError:
        return OptionError(f"{redact(path)}: Spark's Hadoop settings sign in to Cloud Storage "
                           f"with {what}, which pyarrow (how tfspark's tasks reach the store) "
                           f"cannot use: {do}, or pass filesystem=pyarrow.fs."
                           f"GcsFileSystem(...) (the CLI: a [store] table)")

    kwargs: dict[str, Any] = {}
    root = conf.get("fs.gs.storage.root.url")
    if root:
        url = urllib.parse.urlsplit(root if "://" in root else f"https://{root}")
        if url.netloc and url.netloc.lower() != _GOOGLE:
            kwargs.update(endpoint_override=url.netloc, scheme=url.scheme or "https")
    auth = (conf.get("fs.gs.auth.type", defaults=False) or "").upper()
    keyfile = conf.get(*_KEYFILE)
    if auth == "UNAUTHENTICATED":
        kwargs["anonymous"] = True
    elif auth == "SERVICE_ACCOUNT_JSON_KEYFILE" or (not auth and keyfile):
        if not keyfile:
            raise refuse("a key file but names none (fs.gs.auth.service.account.json.keyfile)",
                         "name it there")
        given = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if not given or os.path.realpath(given) != os.path.realpath(keyfile):
            raise refuse(f"the key file {keyfile} ({_KEYFILE[0]})",
                         f"set GOOGLE_APPLICATION_CREDENTIALS={keyfile} for the driver and "
                         f"the executors (spark.executorEnv.GOOGLE_APPLICATION_CREDENTIALS)")
    elif auth in ("", "APPLICATION_DEFAULT", "COMPUTE_ENGINE"):
        provider = conf.get(*_TOKEN_PROVIDER)
        if provider and not auth:  # (connector 2.x: a token provider comes before all else)
            raise refuse(f"the access token provider {provider} ({_TOKEN_PROVIDER[0]})",
                         "use the VM's service account or GOOGLE_APPLICATION_CREDENTIALS")
    else:
        raise refuse(f"auth type {auth} (fs.gs.auth.type)",
                     "use APPLICATION_DEFAULT, COMPUTE_ENGINE or GOOGLE_APPLICATION_CREDENTIALS")
    target = conf.get("fs.gs.auth.impersonation.service.account")
    if target and not kwargs.get("anonymous"):  # (an anonymous client impersonates no one)
        kwargs["target_service_account"] = target
    if not kwargs:
        return None
    project = conf.get("fs.gs.project.id")
    if project:
        kwargs["project_id"] = project
    return pafs.GcsFileSystem(**kwargs, retry_time_limit=GCS_RETRY)
