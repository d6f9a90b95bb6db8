"""A reader's arguments checked before anything is read (the readers' table of options): one
line naming the argument, and what to give instead."""

from __future__ import annotations

import pytest

from tfspark.errors import OptionError
from tfspark.store.options import ReadOptions


def check_io_args(io_threads, cache_dir):
    return ReadOptions.checked("read_batches", io_threads=io_threads, cache_dir=cache_dir).cache_dir


@pytest.mark.parametrize("threads", [0, -1, True, 2.0])
def test_io_threads_must_be_a_positive_int(threads):
    with pytest.raises(OptionError, match=r"^io_threads must be a positive int or None, got "):
        check_io_args(threads, None)


def test_a_cache_dir_is_a_local_directory_this_process_can_write(tmp_path):
    with pytest.raises(OptionError, match=r"^cache_dir 's3://K:\*\*\*@b/c\?\.\.\.': the cache is "
                                          r"kept on this machine's disk, so give a local path$"):
        check_io_args(None, "s3://K:S3CR3T@b/c?endpoint_override=h:1")
    with pytest.raises(OptionError, match=r"^cache_dir must be a local path, got int$"):
        check_io_args(None, 3)
    # a file:// URI is a local directory: its path is the one to use
    assert check_io_args(None, f"file://{tmp_path}/kept") == f"{tmp_path}/kept"
    assert (tmp_path / "kept").is_dir()
    (tmp_path / "f").write_text("")
    with pytest.raises(OptionError, match=r"is a file, not a directory"):
        check_io_args(None, tmp_path / "f")
    # found at once, not when a reading thread keeps its first file
    with pytest.raises(OptionError, match=r"^cache_dir '.*f/sub' cannot be written here "
                                          r"\(Not a directory\): give a directory"):
        check_io_args(None, str(tmp_path / "f" / "sub"))
    check_io_args(4, tmp_path / "new" / "cache")
    assert (tmp_path / "new" / "cache").is_dir()


@pytest.mark.parametrize("read", ["read_batches", "verify"])
@pytest.mark.parametrize("given", ["", "  ", None])
def test_no_path_is_named_as_a_path_not_as_a_writers_output(read, given):
    """They said "output path ... pass save(path)" (the data source's words), or raised
    Python's own TypeError (verify(None)), or named make_dataset for read_batches."""
    import tfspark

    call = {"read_batches": lambda: tfspark.read_batches(given, 10),
            "verify": lambda: tfspark.verify(given)}[read]
    with pytest.raises(OptionError) as info:
        call()
    said = str(info.value)
    assert "output" not in said and "save(path)" not in said and "make_dataset" not in said
    assert said.startswith(("a path must be a non-empty string", "path_or_files must be")), said


def test_an_empty_list_of_files_is_named_as_such():
    import tfspark

    with pytest.raises(OptionError, match=r"^path_or_files is an empty list: give a data set's "
                                          r"directory, or at least one TFRecord file$"):
        tfspark.read_batches([], 10, spec={"features": []})
