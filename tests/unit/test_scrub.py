"""What a traceback shows of a store's error (errors.scrub): a store client's error may name a
request URL whose query holds a credential (Azure's do: a SAS token's signature), and a
traceback prints every error of the chain, not only the one tfspark raised."""

from __future__ import annotations

import inspect
import traceback

import pytest

from tfspark.errors import CorruptRecordError, OptionError, scrub, scrubbed

URL = "'https://acct.blob.core.windows.net/c/ds/part-0.tfrecord?sv=2021-08-06&sig=S3CR3T'"


def store_error() -> OSError:
    return OSError(f"GetProperties failed for {URL}. Azure Error: [AuthorizationFailure] 403")


def shown(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def test_a_tfspark_error_raised_from_a_store_error_scrubs_it():
    """The usual `raise ... from error`: the store's error is printed above tfspark's, and was
    printed with its signature (tfspark's own message was redacted already)."""
    with pytest.raises(CorruptRecordError) as info:
        try:
            raise store_error()
        except OSError as e:
            raise CorruptRecordError(f"ds/part-0.tfrecord: read error ({e})") from e
    text = shown(info.value)
    assert "S3CR3T" not in text and "sig=" not in text, text
    assert "https://acct.blob.core.windows.net/c/ds/part-0.tfrecord?..." in text, text
    assert "403" in text  # the rest of the store's words stay


def test_scrub_walks_causes_and_contexts_and_os_errors_own_fields():
    try:
        try:
            raise store_error()
        except OSError:
            raise FileNotFoundError(2, f"missing {URL}", URL) from ValueError(URL)
    except FileNotFoundError as e:
        error = e
    error.__cause__.add_note(f"while reading {URL}")
    assert scrub(error) is error
    text = shown(error)
    assert "S3CR3T" not in text, text
    assert error.filename == "'https://acct.blob.core.windows.net/c/ds/part-0.tfrecord?...'"
    assert error.errno == 2  # (what is not text is kept)


@pytest.mark.parametrize("kind", ["function", "generator"])
def test_a_scrubbed_boundary_scrubs_what_leaves_it(kind):
    """A public function, a Spark task or a generator TensorFlow iterates: an error that
    leaves it raw (no tfspark error around it) leaves scrubbed, its traceback kept."""
    if kind == "function":
        @scrubbed
        def boundary():
            raise store_error()
        call = boundary
    else:
        @scrubbed
        def rows():
            yield 1
            raise store_error()
        assert inspect.isgeneratorfunction(rows)

        def call():
            return list(rows())
    with pytest.raises(OSError) as info:
        call()
    text = shown(info.value)
    assert "S3CR3T" not in text and "raise store_error()" in text, text


def test_a_scrubbed_generator_gives_what_it_gives_and_returns():
    @scrubbed
    def rows():
        got = yield 1
        yield got
        return "done"

    it = rows()
    assert next(it) == 1 and it.send(5) == 5
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == "done"


def test_an_error_raised_apart_from_any_other_is_as_it_was():
    error = OptionError("batch_size must be positive, got 0")
    assert error.__context__ is None and str(error) == "batch_size must be positive, got 0"


def test_the_clis_debug_traceback_shows_no_secret(capsys):
    """--debug prints the whole traceback: Spark's and the stores' words in it are redacted
    too, whatever raised them."""
    from tfspark.cli.main import _print_traceback

    try:
        try:
            raise store_error()
        except OSError as e:
            raise RuntimeError(f"Spark: cannot list {URL}") from e
    except RuntimeError:
        _print_traceback()
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: Spark: cannot list" in err, err
    assert "S3CR3T" not in err, err


def test_an_error_scrub_cannot_change_still_goes_on_as_itself():
    """An error class whose message cannot be set (a C extension's, say) is left as it is:
    scrubbing must never put an error of its own in the place of the one raised."""
    class Fixed(Exception):
        @property
        def args(self):
            return ("fixed",)

    with pytest.raises(Fixed):
        try:
            raise Fixed()
        except Fixed as e:
            scrub(e)
            raise
