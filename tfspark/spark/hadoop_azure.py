"""An abfs:// or abfss:// path as the cluster's Spark reaches it through Hadoop's ABFS
connector: the account key, SAS token or service principal its settings hold for the account
(fs.azure.<key>.<account host> over fs.azure.<key>), and an emulator's endpoint, made into
pyarrow's AzureFileSystem for tfspark's driver and tasks (hadoop_stores.py)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark.errors import OptionError
from tfspark.spark.hadoop_conf import Settings
from tfspark.store.redaction import redact
from tfspark.store.store_options import sas_query
from tfspark.store.uris import azure_account_host

_DEFAULT_CLOUD = "core.windows.net"


def azure_filesystem(conf: Settings, path: str) -> pafs.AzureFileSystem | None:
    """pyarrow's AzureFileSystem with what Spark's Hadoop settings `conf` hold for the account
    of `path`; None where they hold nothing for it (pyarrow's default credential then
    applies, as for any abfs:// URI). Raises OptionError for a way of signing in that pyarrow
    has no counterpart for, naming the setting."""
    host = azure_account_host(path)
    if host is None:
        return None
    account, _, suffix = host.partition(".")

    def get(key: str, secret: bool = False) -> str | None:
        return conf.get(f"{key}.{host}", key, secret=secret)

    def refuse(what: str) -> OptionError:
        return OptionError(
            f"{redact(path)}: Spark's Hadoop settings sign in to {host} with {what}, which "
            f"pyarrow (how tfspark's tasks reach the store) cannot use: set an account key, "
            f"a fixed SAS token or a service principal's client credentials there, or pass "
            f"filesystem=pyarrow.fs.AzureFileSystem(...) (the CLI: a [store] table); with Unity "
            f"Catalog's credentials use a /Volumes path")

    kwargs: dict[str, Any] = {}
    endpoint = get("fs.azure.abfs.endpoint")
    if endpoint and ":" in endpoint.split("://")[-1]:  # (Hadoop: host:port, account in path)
        kwargs["blob_storage_authority"] = kwargs["dfs_storage_authority"] = \
            endpoint.split("://")[-1].strip("/")
    elif suffix.partition(".")[2] != _DEFAULT_CLOUD:  # a national cloud's own domain
        cloud = suffix.partition(".")[2]
        kwargs.update(blob_storage_authority=f".blob.{cloud}",
                      dfs_storage_authority=f".dfs.{cloud}")
    secure = urllib.parse.urlsplit(path).scheme.lower() == "abfss" or \
        (get("fs.azure.always.use.https") or "true").lower() != "false"
    if not secure:
        kwargs.update(blob_storage_scheme="http", dfs_storage_scheme="http")

    auth = get("fs.azure.account.auth.type") or "SharedKey"
    if auth.lower() == "sharedkey":
        if get("fs.azure.account.keyprovider"):
            raise refuse("a key provider class (fs.azure.account.keyprovider)")
        key = get("fs.azure.account.key", secret=True)
        if key:
            kwargs["account_key"] = key
    elif auth.lower() == "sas":
        provider = get("fs.azure.sas.token.provider.type")
        if provider and not provider.endswith(".FixedSASTokenProvider"):
            raise refuse(f"the SAS token provider {provider} (fs.azure.sas.token.provider.type)")
        token = get("fs.azure.sas.fixed.token", secret=True)
        if not token:
            raise refuse("SAS but no fixed token (fs.azure.sas.fixed.token)")
        kwargs["sas_token"] = sas_query(token)
    elif auth.lower() == "oauth":
        kwargs.update(_oauth(get, refuse))
    else:
        raise refuse(f"auth type {auth} (fs.azure.account.auth.type)")
    return pafs.AzureFileSystem(account, **kwargs) if kwargs else None


def _oauth(get: Any, refuse: Any) -> dict[str, str]:
    """AzureFileSystem's credential arguments for Hadoop's OAuth token providers."""
    provider = get("fs.azure.account.oauth.provider.type") or ""
    name = provider.rpartition(".")[2]
    client = get("fs.azure.account.oauth2.client.id")
    if name == "ClientCredsTokenProvider":
        secret = get("fs.azure.account.oauth2.client.secret", secret=True)
        endpoint = get("fs.azure.account.oauth2.client.endpoint") or ""
        # https://login.microsoftonline.com/<tenant>/oauth2[/v2.0]/token
        tenant = urllib.parse.urlsplit(endpoint).path.strip("/").partition("/")[0]
        if not (client and secret and tenant):
            raise refuse("client credentials missing a setting (fs.azure.account.oauth2."
                         "client.id, .client.secret and .client.endpoint are all needed)")
        return {"client_id": client, "client_secret": secret, "tenant_id": tenant}
    if name == "MsiTokenProvider":  # a user-assigned identity is named by its client id
        return {"client_id": client} if client else {}
    if name == "WorkloadIdentityTokenProvider":  # pyarrow's default credential reads it
        return {}
    raise refuse(f"the OAuth provider {provider or '(none)'} "
                 f"(fs.azure.account.oauth.provider.type)")
