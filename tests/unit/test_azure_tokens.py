"""pyarrow's Azure client ends the whole process (std::terminate on the Azure SDK's
AuthenticationException) when it opens a file through a token sign-in that gets no token:
Azure's default credential with none configured, or any token over an http endpoint (an
emulator given without its key). tfspark asks about the first file before opening it
(store/azure_tokens.py), so every entry point raises an error that says what to give instead.
The token over http fails before any request: nothing here leaves this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HINT = ("Azure signs in with a token only over https: for an endpoint over http (an emulator "
        "such as Azurite) give account_key= or sas_token= (the CLI: in a [store] table)")
OPTIONS = dict(blob_storage_authority="127.0.0.1:9", dfs_storage_authority="127.0.0.1:9",
               blob_storage_scheme="http", dfs_storage_scheme="http")
CALLS = f"""
import pyarrow.fs as pafs, tfspark
fs = pafs.AzureFileSystem("acct", **{OPTIONS!r})
def error_line(call):
    try:
        call()
    except Exception as e:
        print(type(e).__name__, str(e).split("); ")[-1])
error_line(lambda: tfspark.read_batches("data/ds", 10, filesystem=fs))
error_line(lambda: tfspark.keras_preprocessing("data/ds", filesystem=fs))
error_line(lambda: tfspark.verify("data/ds", filesystem=fs))  # no store to reach: an error
spec = tfspark.FeatureSpec([tfspark.Feature("x", ("x",), "fixed", "int64", "int64", "bigint")])
error_line(lambda: list(tfspark.read_batches(["data/ds/part-0.tfrecord"], 10, filesystem=fs,
                                       spec=spec)))
print("alive")
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    return dict(env, HOME=str(tmp_path), PYTHONPATH=str(ROOT))


def test_a_token_that_cannot_be_had_is_an_error_not_a_crash(tmp_path):
    done = subprocess.run([sys.executable, "-c", CALLS], env=_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"ManifestError {HINT}"] * 3, done.stdout
    assert lines[3].startswith("OSError cannot look for the TFRecord files named for reading") \
        and lines[3].endswith(HINT), lines
    assert lines[-1] == "alive"


def test_the_command_line_says_it_in_one_line(tmp_path):
    store = tmp_path / "store.toml"
    store.write_text("[store]\n" + "".join(f'{k} = "{v}"\n' for k, v in OPTIONS.items()))
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect",
                           "abfs://data@acct.dfs.core.windows.net/ds", "--store", str(store)],
                          env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot read abfs://data@acct.dfs."
                                                   "core.windows.net/ds/_tfspark.json"), lines
    assert lines[0].endswith(HINT), lines
