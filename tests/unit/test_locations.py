"""Where paths lead (store/fs.py): what a path or URI may show, and the one-line refusals of
paths tfspark cannot open."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from tfspark.errors import OptionError
from tfspark.store.fs import locate, store_filesystem
from tfspark.store.uris import redact, redact_text


@pytest.mark.parametrize("uri,shown", [
    ("s3://b/k?endpoint_override=h:1&secret_key=S", "s3://b/k?..."),
    ("s3://AKIA:S3CR3T@b/k", "s3://AKIA:***@b/k"),
    ("s3://AKIA:S3CR3T@b/k?region=x", "s3://AKIA:***@b/k?..."),
    ("abfs://c@acct.dfs.core.windows.net/k", "abfs://c@acct.dfs.core.windows.net/k"),
    ("/tmp/a?b", "/tmp/a?b"),  # a local name may hold '?'
])
def test_redact_hides_query_and_password(uri, shown):
    assert redact(uri) == shown


def test_redact_text_hides_every_uris_secrets_in_a_message():
    text = ("Error while looking for metadata in the path: s3://AKIA:S3CR3T@b/k?"
            "endpoint_override=h:1&region=r. Also 'gs://b/x?token=T0K', and s3://b/plain.")
    shown = redact_text(text)
    assert "S3CR3T" not in shown and "T0K" not in shown and "endpoint" not in shown, shown
    assert "s3://AKIA:***@b/k?..." in shown and "'gs://b/x?...'" in shown, shown
    assert shown.endswith("and s3://b/plain."), shown  # nothing to hide: as it was
    assert redact_text("no uri here: /tmp/a?b=1") == "no uri here: /tmp/a?b=1"
    assert redact_text("in s3://b/k?x=1; its splits") == "in s3://b/k?...; its splits"


def test_the_clis_error_line_redacts_what_others_repeat():
    """Spark's and the stores' messages repeat a path as the user gave it: the CLI's one
    line shows it redacted, whatever raised it."""
    from tfspark.cli.errors import describe_error

    message, hint = describe_error(ValueError("cannot open s3://K:S3CR3T@b/x?secret=y"))
    assert "S3CR3T" not in message and "secret=y" not in message, message
    assert "s3://K:***@b/x?..." in message, message


@pytest.mark.parametrize("scheme,use", [("s3a", "s3"), ("wasbs", "abfs")])
def test_hadoop_schemes_are_refused_naming_pyarrows(scheme, use):
    with pytest.raises(OptionError, match=f"use {use}://") as info:
        locate(f"{scheme}://KEY:SECRET@bucket/data?x=1")
    assert "SECRET" not in str(info.value) and "x=1" not in str(info.value)


def test_a_filesystem_takes_paths_inside_it(tmp_path):
    loc = locate("s3://bucket/data", pafs.SubTreeFileSystem(str(tmp_path),
                                                            pafs.LocalFileSystem()))
    assert loc.base == "bucket/data" and loc.child("x").uri == "s3://bucket/data/x"
    with pytest.raises(OptionError, match="starts with '/' but filesystem="):
        locate("/abs/path", pafs.S3FileSystem(anonymous=True, region="us-east-1"))


# ---------------------------------------------------------------- the CLI's [store] table

def store_file(tmp_path, body: str):
    path = tmp_path / "store.toml"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize("path,kind", [("s3://b/ds", "s3"), ("gs://b/ds", "gcs"),
                                       ("abfs://c@acct.dfs.core.windows.net/ds", "abfs")])
def test_a_store_table_makes_the_filesystem_of_the_paths_scheme(tmp_path, path, kind):
    from tfspark.cli.config import filesystem_of

    conf = store_file(tmp_path, '[store]\nendpoint_override = "127.0.0.1:1"\n' if kind != "abfs"
                      else '[store]\naccount_key = "a2V5"\n')
    fs = filesystem_of(path, conf)
    assert fs.type_name == kind
    loc = locate(path, fs)
    assert loc.base == ("c/ds" if kind == "abfs" else "b/ds") and loc.uri == path
    assert filesystem_of(path, None) is None  # no table: the path opens as it is


@pytest.mark.parametrize("token", ["sv=2024&sig=S3CR3T", "?sv=2024&sig=S3CR3T"])
def test_a_store_tables_sas_token_reaches_pyarrow_with_its_question_mark(token):
    """Azure's portal gives the token with a "?", Hadoop's settings often without: pyarrow puts
    it right after the account's URL, so without one it became a path segment."""
    from tfspark.store.fs import store_filesystem

    fs = store_filesystem("abfs://c@acct.dfs.core.windows.net/d", {"sas_token": token}, "t")
    assert fs.__reduce__()[1][0]["sas_token"] == "?sv=2024&sig=S3CR3T"


def test_store_table_errors_name_the_key_and_file_never_a_value(tmp_path):
    from tfspark.cli.config import filesystem_of

    bad_key = store_file(tmp_path, '[store]\nsecret_key = "S3CR3T"\nendpont = "x"\n')
    with pytest.raises(OptionError, match="endpont") as info:
        filesystem_of("s3://b/ds", bad_key)
    assert "store.toml" in str(info.value) and "S3CR3T" not in str(info.value)
    with pytest.raises(OptionError, match="not one"):
        filesystem_of("/tmp/local", store_file(tmp_path, '[store]\nregion = "x"\n'))
    with pytest.raises(OptionError, match=r"no \[store\] table"):
        filesystem_of("s3://b/ds", store_file(tmp_path, 'region = "x"\n'))
    with pytest.raises(OptionError, match="'region'.*string, number"):
        filesystem_of("s3://b/ds", store_file(tmp_path, '[store]\nregion = ["x"]\n'))


def test_a_config_file_carries_a_store_table(tmp_path):
    from tfspark.cli.config import load_config, load_train_config

    body = '[store]\nanonymous = true\n'
    assert load_config(store_file(tmp_path, 'output = "gs://b/o"\n' + body)).store == \
        {"anonymous": True}
    cfg = load_train_config(store_file(tmp_path, 'data = "gs://b/o"\n' + body))
    assert cfg.store == {"anonymous": True}
    with pytest.raises(OptionError, match="'store'.*must be a table"):
        load_config(store_file(tmp_path, 'store = "x"\n'))


@pytest.mark.parametrize("given, shown", [
    # Azure's forms of a URI, each with a filesystem=: the container was taken from what
    # stood before "@" (a password too: c:S3CR3T was the container, and shown), and the
    # account was left out of what is shown (abfs://c/p, which opens nothing)
    ("abfs://c@acct.dfs.core.windows.net/p/q", "abfs://c@acct.dfs.core.windows.net/p"),
    # a national cloud's domain, and the blob endpoint's: pyarrow read "p" as the container
    ("abfss://c@acct.dfs.core.chinacloudapi.cn/p/q", "abfss://c@acct.dfs.core.chinacloudapi.cn/p"),
    ("abfs://c@acct.blob.core.windows.net/p/q", "abfs://c@acct.blob.core.windows.net/p"),
    ("abfss://c:S3CR3T@acct.dfs.core.windows.net/p/q",
     "abfss://c:***@acct.dfs.core.windows.net/p"),
    ("abfs://acct:S3CR3T@c/p/q", "abfs://acct:***@c/p"),
    ("abfs://acct@127.0.0.1:10000/c/p/q", "abfs://acct@127.0.0.1:10000/c/p"),
    ("abfs://c/p/q", "abfs://c/p"),  # the account is filesystem='s
])
def test_an_azure_uri_names_its_container_and_shows_its_account(given, shown):
    fs = pafs.AzureFileSystem("acct", account_key="eA==")  # (no request is made)
    at = locate(given, fs)
    assert at.base == "c/p/q"
    assert at.parent().uri == shown and "S3CR3T" not in at.uri
    assert at.child("r").uri == redact(given) + "/r"


@pytest.mark.parametrize("typed, key", [
    # pyarrow parses only URIs: a space or a letter beyond ASCII was "Cannot parse URI", and
    # a "#" cut the rest off as a fragment, query options (the endpoint) with it
    ("my data/ds", "my data/ds"), ("ünï/ds", "ünï/ds"), ("hash#1/ds", "hash#1/ds"),
    ("100%/ds", "100%/ds"), ("a+b/ds", "a+b/ds"),
    ("my%20data/ds", "my data/ds"),  # an escape is one, as in any URI
])
def test_a_uri_names_the_path_typed_in_it(typed, key):
    loc = locate(f"s3://K:S3CR3T@bucket/{typed}?endpoint_override=127.0.0.1:9&scheme=http"
                 f"&region=us-east-1")  # (no request is made)
    assert loc.base == f"bucket/{key}"
    assert loc.fs.region == "us-east-1" and loc.uri == f"s3://K:***@bucket/{typed}"


@pytest.mark.parametrize("fs", [pafs.S3FileSystem(anonymous=True, region="us-east-1"),
                                pafs.GcsFileSystem(anonymous=True)], ids=["s3", "gcs"])
def test_a_uri_with_a_filesystem_names_the_same_object_and_keeps_no_secret(fs):
    """With filesystem= a URI's user, password and query stayed in the path inside the store
    (testing:S3CR3T@bucket/...?endpoint_override=...), which pyarrow's errors then showed; a
    backup recorded as a URI on the same store was not found (its "#" cut it short)."""
    scheme = "s3" if fs.type_name == "s3" else "gs"
    at = locate(f"{scheme}://K:S3CR3T@bucket/my data #1/ü%20x?endpoint_override=h:1", fs)
    assert at.base == "bucket/my data #1/ü x" and "S3CR3T" not in at.uri
    assert locate(f"{scheme}://bucket/d", fs).resolve(
        f"{scheme}://K:***@bucket/my data #1/b").base == "bucket/my data #1/b"
    assert locate("bucket/plain%20key", fs).base == "bucket/plain%20key"  # no URI: as given


def test_s3_opens_files_for_writing_on_their_first_write():
    """A file smaller than a part (a manifest, a marker) is then one PUT, not a multipart
    upload of three requests; a URI or [store] table saying otherwise is obeyed."""
    def delayed(fs):
        return fs.__reduce__()[1][0]["allow_delayed_open"]

    assert delayed(locate("s3://b/x?region=us-east-1").fs)
    assert not delayed(locate("s3://b/x?region=us-east-1&allow_delayed_open=false").fs)
    assert delayed(store_filesystem("s3://b/x", {"region": "us-east-1"}, "t.toml"))
    assert not delayed(store_filesystem("s3://b/x", {"region": "us-east-1",
                                                     "allow_delayed_open": False}, "t.toml"))


def test_gcs_gives_up_on_a_failing_request_after_a_minute_not_fifteen():
    """pyarrow's GCS client retries a failing request for 15 minutes unless told: a missing
    credential or a wrong endpoint said nothing for that long. The clients tfspark makes (a
    gs:// URI, a [store] table, Spark's settings) retry for GCS_RETRY unless told otherwise."""
    import datetime

    from tfspark.spark.hadoop_stores import SessionConf, gcs_filesystem
    from tfspark.store.uris import GCS_RETRY

    def limit(fs):
        return fs.__reduce__()[1][0]["retry_time_limit"]

    assert GCS_RETRY == datetime.timedelta(seconds=60)
    for scheme in ("gs", "gcs"):
        assert limit(locate(f"{scheme}://b/x").fs) == GCS_RETRY
        assert limit(locate(f"{scheme}://b/x?retry_limit_seconds=5").fs) == \
            datetime.timedelta(seconds=5)
    assert limit(store_filesystem("gs://b/x", {"anonymous": True}, "t.toml")) == GCS_RETRY
    for given in (300, 2.5):  # seconds: TOML has no durations
        assert limit(store_filesystem("gs://b/x", {"retry_time_limit": given}, "t.toml")) == \
            datetime.timedelta(seconds=given)
    emulator = SessionConf({"fs.gs.storage.root.url": "http://127.0.0.1:4443",
                            "fs.gs.auth.type": "UNAUTHENTICATED"})  # (as a session's)
    assert limit(gcs_filesystem(emulator, "gs://b/x")) == GCS_RETRY
    assert limit(locate("gs://b/x", pafs.GcsFileSystem(anonymous=True)).fs) is None  # yours


def test_a_gcs_error_is_said_without_its_metadata_and_with_what_to_do():
    """GCS's errors end in error_info={...metadata={...original-message=<the message again>}}:
    left out, so the line stays readable; no credentials is said so, not "no server"."""
    from tfspark.errors import store_hint
    from tfspark.store.uris import error_line

    words = ("Could not create a OAuth2 access token to authenticate the request. The "
             "underlying error message was: PerformWork() - CURL error [7]=Could not connect")
    error = OSError(f"google::cloud::Status(UNAVAILABLE: Retry policy exhausted, with a last "
                    f"message of {words} error_info={{reason=, domain=, metadata={{gcloud-cpp."
                    f"retry.function=ReadObject, gcloud-cpp.retry.original-message={words}}}}})")
    assert error_line(error) == ("google::cloud::Status(UNAVAILABLE: Retry policy exhausted, "
                                 f"with a last message of {words})")
    assert store_hint(error).startswith("Cloud Storage got no access token")  # type: ignore
    assert store_hint(OSError("Could not connect to server")).startswith("no server answered")
    assert error_line(OSError("no error_info={ closed")) == "no"  # (an unclosed one: cut off)
    # Azure's client names C++ classes mangled
    mangled = "failed: N5Azure4Core11Credentials23AuthenticationExceptionE: Failed"
    assert error_line(OSError(mangled)) == \
        "failed: Azure::Core::Credentials::AuthenticationException: Failed"
    assert error_line(OSError("N5E N3abE AN2abE")) == "N5E N3abE AN2abE"  # not one: as it was


def test_a_uri_pyarrow_refuses_is_named_without_its_secret():
    for uri in ("nosuch://K:S3CR3T@b/x y", "s3://K:S3CR3T@b/my data?region=us-east-1&nosuch=1"):
        with pytest.raises(OptionError, match="^cannot open path") as info:
            locate(uri)
        assert "S3CR3T" not in str(info.value), info.value


def test_at_once_tries_every_item_then_raises_the_first_error(tmp_path):
    """Location.at_once: a sweep that meets a file it cannot delete still deletes the others,
    and says so (the first error, in the items' order); results come back in that order."""

    loc = locate(str(tmp_path))
    for name in "abcd":
        (tmp_path / name).write_bytes(b"x")
    tried = []

    def delete(rel):
        tried.append(rel)
        if rel in ("b", "c"):
            raise PermissionError(f"cannot delete {rel}")
        loc.delete(rel)
        return rel.upper()

    with pytest.raises(PermissionError, match="cannot delete b"):
        loc.at_once(delete, "abcd")
    assert sorted(tried) == list("abcd") and sorted(p.name for p in tmp_path.iterdir()) == ["b",
                                                                                          "c"]
    assert loc.at_once(str.upper, "xy") == ["X", "Y"] and loc.at_once(str.upper, "") == []


@pytest.mark.parametrize("path,scheme,base,query", [
    ("/x/a?b/ds", "", "/x/a?b/ds", ""),  # a local path is a path, "?" and all
    ("we ird %20 ü#?x", "", "we ird %20 ü#?x", ""),
    ("file:///x/a?b", "file", "file:///x/a?b", ""),
    ("s3://b/k?region=r", "s3", "s3://b/k", "?region=r"),
    ("GS://b/k", "gs", "GS://b/k", ""),
    ("C:\\data?x", "", "C:\\data?x", ""),  # a drive letter is no scheme
    ("/tmp/a://b?c", "", "/tmp/a://b?c", ""),  # "://" inside a local name
])
def test_one_definition_of_a_path_or_uri(path, scheme, base, query):
    from tfspark import paths

    assert paths.scheme(path) == scheme
    assert paths.split_query(path) == (base, query)
    assert paths.redact(path) == (path if not query else f"{base}?...")


@pytest.mark.parametrize("name", ["a?b", "we ird %20 ü#?x", "[1]{2}*"])
def test_a_local_path_keeps_every_character_of_its_name(tmp_path, name):
    loc = locate(str(tmp_path / name / "ds"))
    assert loc.uri == loc.base == str(tmp_path / name / "ds")
    assert loc.child("_backup").uri == str(tmp_path / name / "ds" / "_backup")
    assert locate(str(tmp_path / name), pafs.LocalFileSystem()).uri == str(tmp_path / name)
