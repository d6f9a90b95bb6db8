"""The paths a Spark user already writes (s3a://, abfs[s]://, gs://), with the endpoint and
credentials in Spark's Hadoop settings as for Spark's own connectors (spark/hadoop_*.py):
written to moto's S3 server, Azurite and the GCS emulator through write_tfrecords,
make_converter and tfspark export, and read back with the store's own filesystem. Ways of
signing in that pyarrow cannot follow are refused in one line naming the setting, before
anything is written."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import hmac
import urllib.parse

import pyarrow.fs as pafs
import pytest
from stores import AZURITE_ACCOUNT, AZURITE_KEY
from test_store_writes import backup_ids, frame, ids

import tfspark
from tfspark.errors import OptionError
from tfspark.spark.hadoop_stores import hadoop_store

pytestmark = [pytest.mark.spark]
AZ_HOST = f"{AZURITE_ACCOUNT}.dfs.core.windows.net"


@contextlib.contextmanager
def hadoop_settings(spark, settings: dict[str, str], session: bool = True):
    """`settings` in the session (spark.conf.set, as Databricks' guides set them) or in the
    context's Hadoop configuration (spark.hadoop.*, core-site.xml), taken out after."""
    conf = spark.conf if session else spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            conf.unset(key)


def kwargs_of(fs: pafs.FileSystem) -> dict:
    return fs.__reduce__()[1][0]  # (pyarrow pickles a filesystem by its arguments)


def manifest_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(f"{path}/_tfspark.json") as f:
        return f.read()


def test_an_s3a_path_is_written_with_sparks_own_s3a_settings(spark, s3):
    """A Spark user's s3a:// path, its endpoint and keys in Spark's Hadoop configuration (as
    for Spark's own S3A connector), was refused ("s3a:// is a Hadoop connector's scheme")."""
    from tfspark.cli.config import ExportConfig
    from tfspark.cli.session import run_export

    bucket = s3.bucket()
    settings = {"fs.s3a.endpoint": f"http://{s3.endpoint()}", "fs.s3a.endpoint.region":
                "us-east-1", f"fs.s3a.bucket.{bucket}.access.key": "testing",
                f"fs.s3a.bucket.{bucket}.secret.key": "S3CR3T-of-the-bucket"}
    with hadoop_settings(spark, settings, session=False):
        result = tfspark.write_tfrecords(frame(spark, 0, 120), f"s3a://{bucket}/ds",
                                         label_cols=["y"])
        assert result.rows == 120 and result.backup_rows == 120
        with tfspark.make_converter(frame(spark, 0, 50), f"s3a://{bucket}/tmp") as conv:
            assert sorted(int(i) for b in conv.read_batches(10) for i in b["id"]) == \
                list(range(50))
        exported = run_export(spark, ExportConfig(output=f"s3a://{bucket}/cli", sample_rows=30,
                                                  backup_path=f"s3a://{bucket}/cli_backup"))
        assert exported.rows == 30 and exported.backup_rows == 30  # (tfspark export's)
    fs = s3.filesystem()
    assert ids(f"{bucket}/ds", fs) == list(range(120))
    assert backup_ids(fs, f"{bucket}/ds/_backup") == list(range(120))
    kept = manifest_bytes(fs, f"{bucket}/ds")
    assert b"S3CR3T" not in kept and b"s3a" not in kept
    assert len(ids(f"{bucket}/cli", fs)) == 30 and len(backup_ids(fs, f"{bucket}/cli_backup")) == 30
    with pytest.raises(Exception, match="s3a:// is a Hadoop connector's scheme"):  # noqa: PT011
        frame(spark, 0, 5).write.format("tfrecord").mode("append").save(f"s3a://{bucket}/x")


def test_an_abfs_path_is_written_with_sparks_own_azure_settings(spark, azurite):
    """Azure's and Databricks' guides put the account key in the session (spark.conf.set);
    tfspark took none of it, so an abfs[s]:// write signed in with pyarrow's default
    credential, and an emulator's endpoint (fs.azure.abfs.endpoint) was not reached at all."""
    from tfspark.cli.config import ExportConfig
    from tfspark.cli.session import run_export

    container = azurite.bucket()
    root = f"abfs://{container}@{AZ_HOST}"
    settings = {"fs.azure.abfs.endpoint": f"127.0.0.1:{azurite.port}",
                "fs.azure.always.use.https": "false",
                f"fs.azure.account.auth.type.{AZ_HOST}": "SharedKey",
                f"fs.azure.account.key.{AZ_HOST}": AZURITE_KEY,
                "fs.azure.account.key": "not-this-one"}  # (the account's own key wins)
    with hadoop_settings(spark, settings):
        result = tfspark.write_tfrecords(frame(spark, 0, 120), f"{root}/ds", label_cols=["y"],
                                         backup_path=f"{root}/ds_backup")
        assert result.rows == 120 and result.backup_rows == 120
        assert result.path == f"{root}/ds"
        with tfspark.make_converter(frame(spark, 0, 50), f"{root}/tmp") as conv:
            assert sorted(int(i) for b in conv.read_batches(10) for i in b["id"]) == \
                list(range(50))
        exported = run_export(spark, ExportConfig(output=f"{root}/cli", sample_rows=30))
        assert exported.rows == 30 and exported.backup_rows == 30
        with pytest.raises(OptionError, match="backup_path .* is in another store") as info:
            tfspark.write_tfrecords(frame(spark, 0, 5), f"{root}/other", label_cols=["y"],
                                    backup_path=f"abfs://{container}@elsewhere.dfs.core."
                                                f"windows.net/b")
        assert "\n" not in str(info.value)
    with hadoop_settings(spark, settings):  # read back as written: with Spark's settings
        assert ids(f"{root}/ds", tfspark.spark.spark_filesystem(spark, f"{root}/ds")) == \
            list(range(120))
    wrong_key = pafs.AzureFileSystem(AZURITE_ACCOUNT, account_key="eA==",
                                     **{k: v for k, v in azurite.store_options().items()
                                        if k != "account_key"})
    with pytest.raises(tfspark.ManifestError, match=r"403 .*; check that it is a file you may "
                       r"read \(permissions, credentials\); a data set written with the "
                       r"credentials in Spark's Hadoop settings reads with filesystem=tfspark"
                       r"\.spark\.spark_filesystem\(spark, path\)") as info:
        ids(f"{root}/ds", wrong_key)
    assert "eA==" not in str(info.value) and "\n" not in str(info.value)
    fs = azurite.filesystem()
    assert ids(f"{container}/ds", fs) == list(range(120))
    assert backup_ids(fs, f"{container}/ds_backup") == list(range(120))
    assert len(ids(f"{container}/cli", fs)) == 30
    assert fs.get_file_info(f"{container}/other").type == pafs.FileType.NotFound
    assert AZURITE_KEY.encode() not in manifest_bytes(fs, f"{container}/ds")


def account_sas(key: str, expiry: datetime.datetime | None = None) -> str:
    """An account SAS token for Azurite's account, signed with `key` (Azure's account SAS,
    version 2021-08-06: read, write, delete, list, add, create on blobs; until `expiry`, by
    default for an hour)."""
    expiry = (expiry or datetime.datetime.now(datetime.timezone.utc)
              + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fields = {"sv": "2021-08-06", "ss": "b", "srt": "sco", "sp": "rwdlacup", "se": expiry,
              "spr": "https,http"}
    to_sign = "\n".join([AZURITE_ACCOUNT, fields["sp"], fields["ss"], fields["srt"], "", expiry,
                         "", fields["spr"], fields["sv"], "", ""])
    sig = hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()
    return urllib.parse.urlencode({**fields, "sig": base64.b64encode(sig).decode()})


def test_an_abfs_path_is_read_with_a_fixed_sas_token(spark, azurite):
    """pyarrow puts the SAS token after the account's URL as given: without its "?" (as Azure's
    portal and Hadoop's FixedSASTokenProvider take it) the token became a path segment, and
    every request failed. Azure's errors name the request's URL, the token in its query: its
    signature is in no message now. (Written with the account key: Azurite answers a batch
    delete signed by a SAS token with 500, where Azure takes it.)"""
    container = azurite.bucket()
    root = f"abfs://{container}@{AZ_HOST}"
    tfspark.write_tfrecords(frame(spark, 0, 80), f"{container}/ds", label_cols=["y"],
                            filesystem=azurite.filesystem())
    sas = {"fs.azure.abfs.endpoint": f"127.0.0.1:{azurite.port}",
           "fs.azure.always.use.https": "false", "fs.azure.account.auth.type": "SAS",
           "fs.azure.sas.token.provider.type":
               "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider"}
    with hadoop_settings(spark, {**sas, "fs.azure.sas.fixed.token": account_sas(AZURITE_KEY)}):
        fs = tfspark.spark.spark_filesystem(spark, f"{root}/ds")
        assert ids(f"{root}/ds", fs) == list(range(80))
        assert tfspark.verify(f"{root}/ds", filesystem=fs).ok
        with fs.open_output_stream(f"{container}/by-sas") as f:  # (a write: one blob)
            f.write(b"x")
    forged = account_sas(base64.b64encode(b"not the account's key").decode())
    with hadoop_settings(spark, {**sas, "fs.azure.sas.fixed.token": forged}):
        with pytest.raises(tfspark.ManifestError,  # (in Python, what to do in its terms)
                           match=r"403.*filesystem=tfspark\.spark\.spark_filesystem\(spark, path\)"
                           ) as info:
            ids(f"{root}/ds", tfspark.spark.spark_filesystem(spark, f"{root}/ds"))
        with pytest.raises(tfspark.ManifestError, match="403") as refused:  # nothing to verify
            tfspark.verify(f"{root}/ds", filesystem=tfspark.spark.spark_filesystem(
                spark, f"{root}/ds"))
    signature = forged.rpartition("sig=")[2]
    for shown in (str(info.value), str(refused.value)):
        assert signature not in shown and "sig=" not in shown, shown
    assert ids(f"{container}/ds", azurite.filesystem()) == list(range(80))


def test_a_gs_path_is_written_with_sparks_own_gcs_settings(spark, gcs):
    """A gs:// URI could not reach an emulator (pyarrow's URI has no anonymous option); with
    the connector's own settings (its root URL, unauthenticated) it now does."""
    bucket = gcs.bucket()
    settings = {"fs.gs.storage.root.url": f"http://{gcs.endpoint()}/",
                "fs.gs.auth.type": "UNAUTHENTICATED", "fs.gs.project.id": "test"}
    with hadoop_settings(spark, settings):
        result = tfspark.write_tfrecords(frame(spark, 0, 120), f"gs://{bucket}/ds",
                                         label_cols=["x"], partition_by=["y"])
        assert result.rows == 120 and result.backup_rows == 120
        fs = tfspark.spark.spark_filesystem(spark, f"gs://{bucket}/ds")
        assert ids(f"gs://{bucket}/ds", fs) == list(range(120))
    fs = gcs.filesystem()
    assert ids(f"{bucket}/ds", fs) == list(range(120))
    assert backup_ids(fs, f"{bucket}/ds/_backup") == list(range(120))


@pytest.mark.parametrize("path, settings, expected", [
    # a service principal (Databricks' guide), its tenant from the token endpoint
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.auth.type": "OAuth",
      "fs.azure.account.oauth.provider.type":
          "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
      "fs.azure.account.oauth2.client.id.acct.dfs.core.windows.net": "app-id",
      "fs.azure.account.oauth2.client.secret.acct.dfs.core.windows.net": "S3CR3T",
      "fs.azure.account.oauth2.client.endpoint":
          "https://login.microsoftonline.com/tenant-id/oauth2/v2.0/token"},
     {"account_name": "acct", "client_id": "app-id", "client_secret": "S3CR3T",
      "tenant_id": "tenant-id", "blob_storage_scheme": "https"}),
    # a fixed SAS token, and a national cloud's own domain
    ("abfss://c@acct.dfs.core.chinacloudapi.cn/d",
     {"fs.azure.account.auth.type.acct.dfs.core.chinacloudapi.cn": "SAS",
      "fs.azure.sas.fixed.token": "sv=2024&sig=S3CR3T"},
     {"sas_token": "?sv=2024&sig=S3CR3T", "blob_storage_authority": ".blob.core.chinacloudapi.cn",
      "dfs_storage_authority": ".dfs.core.chinacloudapi.cn"}),
    # a user-assigned managed identity
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.auth.type": "OAuth",
      "fs.azure.account.oauth.provider.type":
          "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider",
      "fs.azure.account.oauth2.client.id": "identity-id"},
     {"client_id": "identity-id", "client_secret": ""}),
    # the S3A connector's settings in the session, not only in the context's configuration
    ("s3a://bkt/d", {"fs.s3a.endpoint": "https://minio.internal:9000",
                     "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "S3CR3T"},
     {"endpoint_override": "minio.internal:9000", "scheme": "https", "access_key": "AK"}),
    ("gs://bkt/d", {"fs.gs.auth.impersonation.service.account": "sa@p.iam.gserviceaccount.com",
                    "fs.gs.project.id": "p"},
     {"target_service_account": "sa@p.iam.gserviceaccount.com", "project_id": "p"}),
])
def test_sparks_settings_make_the_filesystem_spark_would_use(spark, path, settings, expected):
    with hadoop_settings(spark, settings):
        _, fs, _ = hadoop_store(spark, path, {})
    got = kwargs_of(fs)
    assert {k: got[k] for k in expected} == expected


def test_a_store_spark_has_no_settings_for_keeps_pyarrows_own_defaults(spark):
    """Nothing set: the URI as given, no filesystem (on Dataproc the backup then keeps
    Spark's own connector, and pyarrow signs in as the VM)."""
    for path in ("gs://bkt/d", "abfss://c@acct.dfs.core.windows.net/d"):
        assert hadoop_store(spark, path, {"backup_path": "x"}) == (path, None,
                                                                  {"backup_path": "x"})


def test_the_backup_beside_it_and_a_uris_own_options_are_kept(spark):
    """An s3:// backup_path beside an s3a:// path is the same store; a gs:// URI with pyarrow's
    own options keeps them, and pyarrow's own Azure form (account@host:port) its meaning,
    whatever Spark's settings say."""
    with hadoop_settings(spark, {"fs.azure.account.key": "eA=="}):
        azurite = "abfs://devstoreaccount1@127.0.0.1:10000/c/p"
        assert hadoop_store(spark, azurite, {}) == (azurite, None, {})
        fs = hadoop_store(spark, "abfs://c@acct.dfs.core.windows.net/p", {})[1]
        assert kwargs_of(fs)["account_key"] == "eA=="
    path, fs, kept = hadoop_store(spark, "s3a://bkt/d", {"backup_path": "s3://bkt/backup"})
    assert (path, kept) == ("s3://bkt/d", {"backup_path": "s3://bkt/backup"}) and fs
    with hadoop_settings(spark, {"fs.gs.auth.type": "UNAUTHENTICATED"}):
        assert kwargs_of(hadoop_store(spark, "gs://b/d", {})[1])["anonymous"]
        assert hadoop_store(spark, "gs://b/d?scheme=http", {})[1] is None


@pytest.mark.parametrize("path, settings, named", [
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.auth.type": "OAuth", "fs.azure.account.oauth.provider.type":
      "org.apache.hadoop.fs.azurebfs.oauth2.UserPasswordTokenProvider",
      "fs.azure.account.oauth2.user.password": "S3CR3T"},
     "OAuth provider org.apache.hadoop.fs.azurebfs.oauth2.UserPasswordTokenProvider"),
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.auth.type": "OAuth", "fs.azure.account.oauth.provider.type":
      "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
      "fs.azure.account.oauth2.client.id": "app", "fs.azure.account.oauth2.client.secret":
      "S3CR3T"},
     r"client credentials missing a setting \(fs.azure.account.oauth2.client.id, "),
    ("abfss://c@acct.dfs.core.windows.net/d", {"fs.azure.account.auth.type": "Custom"},
     r"auth type Custom \(fs.azure.account.auth.type\)"),
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.auth.type": "SAS", "fs.azure.sas.token.provider.type": "com.x.MySas",
      "fs.azure.sas.fixed.token": "S3CR3T"}, "SAS token provider com.x.MySas"),
    ("abfss://c@acct.dfs.core.windows.net/d",
     {"fs.azure.account.keyprovider": "org.apache.hadoop.fs.azure.ShellDecryptionKeyProvider",
      "fs.azure.account.key": "S3CR3T"}, r"key provider class \(fs.azure.account.keyprovider"),
    ("gs://bkt/d", {"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
                    "fs.gs.auth.service.account.json.keyfile": "/etc/keys/sa.json"},
     r"GOOGLE_APPLICATION_CREDENTIALS=/etc/keys/sa.json for the driver and the executors"),
    ("gs://bkt/d", {"google.cloud.auth.service.account.json.keyfile": "/etc/keys/sa.json"},
     r"the key file /etc/keys/sa.json"),  # (the 1.x-2.x connectors' key)
    ("gs://bkt/d", {"fs.gs.auth.type": "USER_CREDENTIALS"},
     r"auth type USER_CREDENTIALS \(fs.gs.auth.type\)"),
])
def test_a_sign_in_pyarrow_cannot_follow_is_named_before_anything_is_written(
        spark, tmp_path, monkeypatch, path, settings, named):
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    with hadoop_settings(spark, settings), pytest.raises(OptionError, match=named) as info:
        tfspark.write_tfrecords(frame(spark, 0, 5), path, label_cols=["y"])
    message = str(info.value)
    assert "\n" not in message and "S3CR3T" not in message
    assert "filesystem=pyarrow.fs." in message


def test_a_key_file_pyarrow_also_reads_is_used(spark, monkeypatch, tmp_path):
    """GOOGLE_APPLICATION_CREDENTIALS naming the connector's key file: pyarrow's default
    credential reads it, so nothing is refused and nothing needs making."""
    key = tmp_path / "sa.json"
    key.write_text("{}")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    with hadoop_settings(spark, {"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
                                 "fs.gs.auth.service.account.json.keyfile": str(key)}):
        assert hadoop_store(spark, "gs://bkt/d", {}) == ("gs://bkt/d", None, {})
