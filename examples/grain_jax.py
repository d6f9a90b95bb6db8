"""Grain feeding JAX: tfspark.grain_dataset is a Grain IterDataset (Grain's maps and prefetch
apply), and its iterator's get_state()/set_state() resume it exactly (Grain and orbax
checkpoints save them).

    pip install 'pyspark-tfrecord[grain]' jax
    python examples/grain_jax.py out/sample_tfrecords
"""

import _sample as sample
import jax
import jax.numpy as jnp
import numpy as np
from jax.example_libraries import optimizers

import tfspark

path = sample.data_path()
mean, std, countries = sample.scaling(path)


def arrays(batch: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = sample.numbers(batch, mean, std)
    return x, batch[sample.CATEGORY], batch[sample.LABEL].astype(np.float32)


def logits(p, x, c):
    return x @ p["w"] + p["country"][c] + p["b"]


def loss(p, x, c, y):
    z = logits(p, x, c)
    return jnp.mean(jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z))))


init, update, get_params = optimizers.adam(sample.LEARNING_RATE)
state = init({"w": jnp.zeros(3), "country": jnp.zeros(countries), "b": jnp.zeros(())})


@jax.jit
def step(i, state, x, c, y):
    return update(i, jax.grad(loss)(get_params(state), x, c, y), state)


train = tfspark.grain_dataset(path, sample.BATCH, split="train", columns=sample.COLUMNS,
                              strings="ids", vocabulary="train", epochs=sample.EPOCHS,
                              seed=sample.SEED, label_cols=[]).map(arrays)
batches = iter(train)
for i, (x, c, y) in enumerate(batches):
    state = step(i, state, x, c, y)
    if i == 10:
        saved = batches.get_state()  # what a checkpoint keeps: JSON-serializable
assert saved["epoch"] == 0, saved  # (set_state(saved) on a new iterator resumes after batch 10)

p = get_params(state)
scores, labels = [], []
for x, c, y in tfspark.grain_dataset(path, 4096, split="validation", columns=sample.COLUMNS,
                                     strings="ids", vocabulary="train",
                                     label_cols=[]).map(arrays):
    scores.append(np.asarray(logits(p, x, c)))
    labels.append(y)
print(f"grain: validation AUC {sample.auc(np.concatenate(labels), np.concatenate(scores)):.4f}")
