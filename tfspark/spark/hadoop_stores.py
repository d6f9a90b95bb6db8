"""The paths a Spark user already writes (s3a://, abfss://, gs://), reached as the cluster's
Spark reaches them: a pyarrow filesystem made from the endpoint and credentials that Spark's
Hadoop settings hold for the store, for write_tfrecords, make_converter and tfspark export.

Spark's Hadoop settings are read as Spark's own readers and writers see them: the session's
(`spark.conf.set("fs.azure.account.key...", ...)`, as Databricks' and Azure's guides set them)
over the context's (`spark.hadoop.*`, core-site.xml), through Spark Connect too. Per store:

    s3a://    the endpoint, keys and region set for the bucket (fs.s3a.bucket.<bucket>.<key>
              over fs.s3a.<key>): pyarrow's S3FileSystem
    gs://     the Cloud Storage connector's endpoint (an emulator's), unauthenticated access
              and the service account it impersonates: pyarrow's GcsFileSystem (a key file
              pyarrow takes only from GOOGLE_APPLICATION_CREDENTIALS)
    abfs[s]:// the account key, SAS token or service principal set for the account
              (fs.azure.<key>.<account host> over fs.azure.<key>), and an emulator's
              endpoint: pyarrow's AzureFileSystem

The data source cannot: Spark plans it in a Python process without the session, so there an
s3a:// path is refused in one line (the store's location) and abfss:// and gs:// take pyarrow's
own credentials."""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark import paths
from tfspark.errors import OptionError, scrubbed
from tfspark.store.fs import sas_query
from tfspark.store.uris import (
    GCS_RETRY,
    azure_account_host,
    redact,
    uri_to_path,  # (s3a://b/k as s3://b/k)
)

# Hadoop's schemes taken here, by store; pyarrow's own for the same stores (a backup_path's)
_KIND = {"s3a": "s3", "s3n": "s3", "abfs": "abfs", "abfss": "abfs", "gs": "gs"}
_SAME_STORE = {**_KIND, "s3": "s3", "gcs": "gs", "az": "abfs"}
_SETTINGS = ("backup_path",)  # path settings that name the same store as the output


def _kind(path: Any, kinds: dict[str, str] = _KIND) -> str | None:
    return kinds.get(paths.scheme(path)) if isinstance(path, str) else None


def hadoop_store(spark: Any, path: str, settings: dict[str, Any]
                 ) -> tuple[str, Any, dict[str, Any]]:
    """(path, filesystem, settings) for a write to `path` with Spark's Hadoop settings: the
    path as pyarrow names it (s3a:// as s3://), the filesystem they make (None where they add
    nothing to pyarrow's defaults; through Spark Connect from the session's settings), and the
    settings with a backup_path made the same way. Raises OptionError for a backup_path the same
    filesystem cannot reach, and for credentials pyarrow cannot use (naming the setting)."""
    kind = _kind(path)
    if kind != "s3" and paths.split_query(path)[1]:  # pyarrow's options in the URI: those hold
        kind = None
    conf = hadoop_conf(spark) if kind else None
    if conf is None:
        return path, None, settings
    if kind == "s3":
        fs: Any = s3a_filesystem(conf, path)
    elif kind == "abfs":
        fs = azure_filesystem(conf, path)
    else:
        fs = gcs_filesystem(conf, path)
    if fs is None:
        return path, None, settings
    out = dict(settings)
    for key in _SETTINGS:
        other = out.get(key)
        if isinstance(other, str) and paths.is_store_uri(other):
            if _kind(other, _SAME_STORE) != kind or (kind == "abfs" and azure_account_host(other)
                                                     != azure_account_host(path)):
                raise OptionError(f"{key} {redact(other)!r} is in another store than the path "
                                  f"{redact(path)!r}, and one filesystem made from Spark's "
                                  f"Hadoop settings serves both: put the backup beside it, or "
                                  f"pass filesystem=")
            out[key] = uri_to_path(other) if kind == "s3" else other
    return (uri_to_path(path) if kind == "s3" else path), fs, out


@scrubbed
def spark_filesystem(spark: Any, path: str) -> Any:
    """The pyarrow filesystem that Spark's Hadoop settings in `spark`'s session make for `path`
    (s3a://, abfs[s]://, gs://): the one write_tfrecords writes such a path with, for reading
    it back, `make_dataset(path, 1024, filesystem=spark_filesystem(spark, path))`. None where
    those settings add nothing to pyarrow's own defaults (the path alone then reads the same
    data). Raises OptionError, naming the setting, for a way of signing in that pyarrow cannot
    follow."""
    return hadoop_store(spark, path, {})[1]


# ---------------------------------------------------------------- Spark's Hadoop settings

class HadoopConf:
    """Read-only view of one Hadoop Configuration on the JVM."""

    def __init__(self, jconf: Any) -> None:
        self._conf = jconf

    def get(self, *names: str, secret: bool = False, defaults: bool = True) -> str | None:
        """The first of `names` that is set (stripped), or None. A secret is looked up as
        Hadoop's connectors do: a credential provider's store first, then the plain setting.
        defaults=False leaves out what only Hadoop's core-default.xml sets (Hadoop 3.4's
        fs.gs.auth.type=COMPUTE_ENGINE, say): what the user chose."""
        for name in names:
            if not defaults and list(self._conf.getPropertySources(name) or []) == [
                    "core-default.xml"]:
                continue
            if secret:
                chars = self._conf.getPassword(name)
                value = "".join(chars) if chars is not None else None
            else:
                value = self._conf.get(name)
            if value is not None and str(value).strip():
                return str(value).strip()
        return None


class SessionConf:
    """The same view through Spark Connect, where no JVM is in this process: the session's
    settings (spark.conf.set) and the cluster's spark.hadoop.* ones, as the server's readers
    see them; core-site.xml and credential providers stay on the server."""

    def __init__(self, runtime_conf: Any) -> None:
        self._conf = runtime_conf

    def get(self, *names: str, secret: bool = False, defaults: bool = True) -> str | None:
        """The first of `names` set in the session (or as spark.hadoop.<name>), or None."""
        for name in names:
            for key in (name, f"spark.hadoop.{name}"):
                value = self._conf.get(key, None)
                if value is not None and str(value).strip():
                    return str(value).strip()
        return None


Settings = HadoopConf | SessionConf  # (what the store modules read)


def hadoop_conf(spark: Any) -> Settings | None:
    """The Hadoop settings Spark's DataFrame readers use in `spark`'s session (its
    sessionState's newHadoopConf: the session's settings over the context's); the context's
    alone where that is out of reach; under Spark Connect the session's (SessionConf), None
    without either."""
    jsc = getattr(spark, "_jsc", None)
    if jsc is None:
        conf = getattr(spark, "conf", None)
        return SessionConf(conf) if conf is not None else None
    try:
        return HadoopConf(spark._jsparkSession.sessionState().newHadoopConf())
    except Exception:  # noqa: BLE001 - a Spark without it: the context's settings still hold
        return HadoopConf(jsc.hadoopConfiguration())


# ---------------------------------------------------------------- s3a://

def s3a_filesystem(conf: Settings, path: str) -> pafs.S3FileSystem:
    """pyarrow's S3FileSystem with what Spark's Hadoop settings `conf` set for the bucket of
    the s3a:// `path`. Keys they do not set are left to pyarrow's defaults and credential
    chain (an instance profile, the AWS_* variables)."""
    bucket = urllib.parse.urlsplit(path).netloc.rpartition("@")[2]

    def get(key: str, secret: bool = False) -> str | None:
        return conf.get(f"fs.s3a.bucket.{bucket}.{key}", f"fs.s3a.{key}", secret=secret)

    kwargs: dict[str, Any] = {"allow_delayed_open": True}  # (uris.store_defaults)
    endpoint = get("endpoint")
    scheme, _, host = (endpoint or "").rpartition("://")
    host = host.rstrip("/")
    aws = host.endswith("amazonaws.com")  # (s3.<region>.amazonaws.com: AWS's own, not a server)
    if host and not aws:
        ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
        kwargs["endpoint_override"] = host
        kwargs["scheme"] = scheme or ("https" if ssl else "http")
    region = get("endpoint.region") or get("region") or (
        host.split(".")[1] if aws and host.count(".") == 3 else None)
    if region:
        kwargs["region"] = region
    access, secret = get("access.key", True), get("secret.key", True)
    if access and secret:
        kwargs.update(access_key=access, secret_key=secret)
        token = get("session.token", True)
        if token:
            kwargs["session_token"] = token
    return pafs.S3FileSystem(**kwargs)


# ---------------------------------------------------------------- gs://

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


# ---------------------------------------------------------------- abfs:// and abfss://

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
