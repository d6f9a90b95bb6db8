"""Whatever fails, no credential shows. Azure's errors name the request's URL, and with a SAS
token its query holds the signature; a traceback prints every error of a chain, and Spark and
TensorFlow pass an error on as the text of its traceback. So the errors a reader, verify, a
write's Spark tasks or its clean-up meet are shown scrubbed, as tfspark's own messages are:
against Azurite with a SAS token that expires mid-read, and deterministically with a
filesystem of the user's own (fsspec's, as filesystem= takes it) that fails as Azure does."""

from __future__ import annotations

import datetime
import logging
import time
import traceback

import azure_like
import pyarrow.fs as pafs
import pytest
from azure_like import SECRET, AzureLike
from stores import AZURITE_ACCOUNT, AZURITE_KEY
from test_hadoop_settings import account_sas
from test_store_writes import frame

import tfspark

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module", autouse=True)
def _on_executors(spark):
    """Spark's executors import the filesystem's module."""
    spark.sparkContext.addPyFile(azure_like.__file__)


def shown(error: BaseException) -> str:
    """What a traceback shows of `error` (as a notebook prints it)."""
    return "".join(traceback.format_exception(error))


def clean(text: str) -> bool:
    return SECRET not in text and "sig=" not in text


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("secrets") / "ds")
    tfspark.write_tfrecords(frame(spark, 0, 300), path, label_cols=["y"])
    return path


def test_readers_meeting_a_store_error_show_no_secret(written, tf):
    """The manifest reads; the data files are refused (a token without rights to them).
    verify reports each file as refused, not as damaged."""
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(AzureLike(fail=r"\.tfrecord$")))
    with pytest.raises(OSError) as read:
        list(tfspark.read_batches(written, 100, filesystem=fs))
    with pytest.raises(tf.errors.OpError) as dataset:
        list(tfspark.make_dataset(written, 100, filesystem=fs, label_cols=["y"]))
    report = tfspark.verify(written, filesystem=fs)
    # one line per file, naming the refusal (no "holds 0 readable records" after it)
    assert report.problems and all(": access denied (" in p and "403" in p
                                   for p in report.problems), report.problems
    for text in (shown(read.value), dataset.value.message, report.render()):
        assert "403" in text and clean(text), text


def test_a_write_whose_tasks_and_clean_up_fail_shows_no_secret(spark, tmp_path, caplog):
    """The Spark tasks cannot write their files; then the clean-up cannot list what they left.
    The error raised is the tasks' (the clean-up's had taken its place), and neither it, the
    errors it came from, nor the clean-up's warnings show the token."""
    out = str(tmp_path / "ds")
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(AzureLike(fail=r"/part-[^/]*\.tfrecord$",
                                                        then_listing=out)))
    with caplog.at_level(logging.WARNING, logger="tfspark"):
        with pytest.raises(Exception) as info:
            tfspark.write_tfrecords(frame(spark, 0, 100), out, label_cols=["y"],
                                    filesystem=fs, backup_path=str(tmp_path / "backup"))
    text = shown(info.value)
    assert "Python worker" in str(info.value) and "403" in str(info.value), text
    assert "could not remove" in caplog.text, caplog.text
    assert clean(text) and clean(caplog.text), (text, caplog.text)


def test_a_sas_token_that_expires_mid_read_shows_in_no_error(written, azurite, tf):
    """Against Azurite: the token signs the manifest's read, then expires before the data's
    (Azure says 403 and names each request's URL, the token in its query)."""
    container = azurite.bucket()
    store = azurite.filesystem()
    pafs.copy_files(written, f"{container}/ds", destination_filesystem=store)
    for read in ("read_batches", "make_dataset"):
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
        sas = account_sas(AZURITE_KEY, expiry=expiry)
        endpoint = {k: v for k, v in azurite.store_options().items() if k != "account_key"}
        fs = pafs.AzureFileSystem(AZURITE_ACCOUNT, sas_token=f"?{sas}", **endpoint)
        # (on a machine so slow that the token expires first, the manifest's read fails:
        # that must not show it either)
        with pytest.raises((OSError, tfspark.TfsparkError, tf.errors.OpError)) as info:
            reader = getattr(tfspark, read)(f"{container}/ds", 100, filesystem=fs)
            time.sleep(max(0.0, (expiry - datetime.datetime.now(datetime.timezone.utc))
                           .total_seconds()) + 1.5)
            list(reader)
        text = getattr(info.value, "message", "") + shown(info.value)
        assert "403" in text and clean(text) and sas.split("sig=")[1] not in text, text


def test_the_clis_commands_on_an_expired_token_say_so_in_one_line(written, azurite, tmp_path,
                                                                   capsys):
    """inspect asked whether the path is a lone file first, and the store's refusal of that
    was raised raw (its words, no hint); now the manifest's read says it, as verify's and
    stats' do, with what to do in the command line's terms. With --debug, the traceback shows
    no signature either."""
    from tfspark.cli.main import main

    container = azurite.bucket()
    pafs.copy_files(written, f"{container}/ds", destination_filesystem=azurite.filesystem())
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    sas = account_sas(AZURITE_KEY, expiry=past)
    table = {k: v for k, v in azurite.store_options().items() if k != "account_key"}
    store = tmp_path / "store.toml"
    store.write_text("[store]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items())
                     + f'sas_token = "{sas}"\n')
    uri = f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/ds"
    for command in (["inspect"], ["stats"], ["inspect", "--debug"]):
        assert main([*command, uri, "--store", str(store)]) == 2
        err = capsys.readouterr().err
        line = err.splitlines()[-1]
        assert line.startswith(f"error: cannot read {uri}/_tfspark.json (") and "403" in line, err
        # what to do in the command line's terms (it named a Python argument)
        assert line.endswith("check that it is a file you may read (permissions, credentials)"
                             "; give the store's endpoint and credentials with --store FILE, "
                             "a TOML file whose [store] table holds them") and \
            len(line) <= 607, line  # (the store's words cut)
        assert clean(err) and sas.split("sig=")[1] not in err, err
