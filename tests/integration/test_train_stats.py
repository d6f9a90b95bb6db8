"""`tfspark train` with preprocessing from the export's statistics against the job before them
(use_stats = false: Normalization and vocabularies adapted on a sample, scalars only), on a data
set with nulls, skew, a high-cardinality string and a variable-length id list."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tfspark
from tfspark.cli.config import TrainConfig
from tfspark.cli.train import train
from tfspark.errors import OptionError

pytestmark = [pytest.mark.spark, pytest.mark.tf]
N = 12_000


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    """Rows whose label follows the user (3,000 of them, Zipf-skewed, some null; 25% flipped)
    and the ids of the items in the basket (0-5 of them, drawn from the label's range);
    amount is skewed noise with nulls."""
    rng = np.random.default_rng(11)
    users = (3000 ** rng.random(N)).astype(int)  # skewed: small numbers are frequent
    rows = []
    for i in range(N):
        u = int(users[i])
        good = (u * 7919) % 2 == 0
        y = int(good) if rng.random() > 0.25 else int(not good)
        n = int(rng.integers(0, 6))  # items follow the label: ids 0-39 or 40-79, some random
        items = None if i % 17 == 0 else [
            int(rng.integers(0, 80)) if rng.random() < 0.3 else int(40 * (1 - y) +
                                                                   rng.integers(0, 40))
            for _ in range(n)]
        amount = None if i % 9 == 0 else float(rng.lognormal(2, 1.5))
        rows.append((i, None if i % 23 == 0 else f"user{u}", items, amount, y))
    df = spark.createDataFrame(rows, "id long, user string, items array<int>, amount double, "
                                     "y int")
    out = str(tmp_path_factory.mktemp("shop") / "ds")
    tfspark.write_tfrecords(df, out, label_cols=["y"], split={"train": 0.8, "validation": 0.2},
                            split_key="id", backup_path=out + "_backup")
    return out


def _run(path, model_dir, use_stats):
    cfg = TrainConfig(data=path, epochs=3, batch_size=128, model_out=f"{model_dir}/m.keras",
                      exclude=("id",), use_stats=use_stats, bench_batches=0, verbose=0,
                      seed=0)
    lines: list[str] = []
    return train(cfg, echo=lines.append), lines


def test_statistics_preprocessing_beats_the_sampled_job(shop, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    before, _ = _run(shop, tmp_path / "old", use_stats=False)
    keras.utils.set_random_seed(0)
    after, lines = _run(shop, tmp_path / "new", use_stats=True)
    assert before["preprocessing"] == "sample" and after["preprocessing"] == "statistics"
    # The sampled job takes the users its sample saw, and cannot use the items.
    assert "items" in before["ignored"]
    assert after["categorical"] == ["user"] and after["arrays"] == ["items"]
    assert any("user (1000 values, embed)" in line for line in lines)
    # bench_batches = 0: the input pipeline is not measured, and no line or figure says nan
    assert after["input_examples_per_s"] is None and after["train_examples_per_s"] > 0
    assert not any("input pipeline" in line or "nan" in line for line in lines), lines
    assert not any(line.startswith("no validation split") for line in lines), lines
    old, new = before["final"]["val_auc"], after["final"]["val_auc"]
    print(f"validation AUC: sampled job {old:.4f}, statistics {new:.4f}")
    assert new > old + 0.05, (old, new)  # the items carry what the user does not
    # The saved model loads (its pooling layers are registered with Keras) and predicts.
    model = keras.saving.load_model(after["model_path"])
    x, _ = next(iter(tfspark.make_dataset(shop, 64, split="validation", label_cols=["y"],
                                          shuffle_buffer=0)))
    pred = model.predict({k: x[k] for k in ("user", "items", "amount")}, verbose=0)
    assert pred.shape == (64, 1) and np.isfinite(pred).all()


def test_an_id_like_string_is_left_out(spark, tmp_path):
    rows = [(i, f"order-{i}", float(i % 5), i % 2) for i in range(3000)]
    out = str(tmp_path / "ids")
    tfspark.write_tfrecords(spark.createDataFrame(rows, "id long, order string, x double, y int"),
                            out, label_cols=["y"], backup_path=out + "_backup")
    cfg = TrainConfig(data=out, epochs=1, model_out=str(tmp_path / "m.keras"), verbose=0,
                      bench_batches=0, exclude=("id",), max_vocab=100)
    lines: list[str] = []
    result = train(cfg, echo=lines.append)
    assert "an id or free text, not a category" in result["ignored"]["order"]
    assert result["categorical"] == [] and result["numeric"] == ["x"]
    # the kinds the model takes are listed; none says "(0):" with nothing after it
    assert "numeric features (1): x" in lines and not any("(0)" in ln for ln in lines), lines
    # written without split=: the job says its metrics are not of held-out rows
    assert f"no validation split in {out} (splits: none): the metrics are of the training " \
           "data" in lines, lines
    assert "val_auc" not in result["final"]
    # a split named to validate on that the data set lacks is refused, not skipped
    with pytest.raises(OptionError, match=r"has no splits, so no 'val' to validate on: set "
                                          r"validation_split \(--validation-split\)"):
        train(dataclasses.replace(cfg, validation_split="val"), echo=lines.append)


def test_a_val_split_is_validated_on_and_a_named_one_must_exist(spark, tmp_path):
    """With no validation_split the job validates on "validation" or, lacking it, "val" (as
    many data sets name it); one named that the data set lacks (a typo) is one line."""
    rows = [(i, float(i % 7), i % 2) for i in range(2000)]
    out = str(tmp_path / "val")
    tfspark.write_tfrecords(spark.createDataFrame(rows, "id long, x double, y int"), out,
                            label_cols=["y"], split={"train": 0.8, "val": 0.1, "test": 0.1},
                            split_key="id", backup_path=out + "_backup")
    cfg = TrainConfig(data=out, epochs=1, model_out=str(tmp_path / "m.keras"), verbose=0,
                      bench_batches=0, exclude=("id",))
    lines: list[str] = []
    result = train(cfg, echo=lines.append)
    assert "val_auc" in result["final"], result["final"]
    assert not any("no validation split" in ln for ln in lines), lines
    for named in ("validation", "tset"):
        with pytest.raises(OptionError) as e:
            train(dataclasses.replace(cfg, validation_split=named), echo=lines.append)
        assert str(e.value) == (f"{out!r} has splits ['test', 'train', 'val'] but no "
                                f"{named!r} to validate on: set validation_split "
                                f"(--validation-split) to one it has, or leave it out"), e.value
    result = train(dataclasses.replace(cfg, validation_split="test"), echo=lines.append)
    assert "val_auc" in result["final"]
    # a data set written without label_cols: the line names the flag that picks one
    from tfspark.cli.train_features import pick_label

    spec = tfspark.read_manifest(out).spec
    unlabelled = dataclasses.replace(
        spec, features=[dataclasses.replace(f, label=False) for f in spec.features])
    with pytest.raises(OptionError, match=r"^the data set's spec names no label column "
                                          r"\(written without label_cols\): give --label NAME"):
        pick_label(unlabelled, None)
    assert pick_label(unlabelled, "y").name == "y"
