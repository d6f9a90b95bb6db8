"""JAX, no TensorFlow and no Keras: read_batches feeds a jitted training step.

    pip install pyspark-tfrecord jax
    python examples/jax_logistic.py out/sample_tfrecords
"""

import _sample as sample
import jax
import jax.numpy as jnp
import numpy as np
from jax.example_libraries import optimizers

import tfspark

path = sample.data_path()
mean, std, countries = sample.scaling(path)
params = {"w": jnp.zeros(3), "country": jnp.zeros(countries), "b": jnp.zeros(())}


def logits(p, x, c):
    return x @ p["w"] + p["country"][c] + p["b"]


def loss(p, x, c, y):
    z = logits(p, x, c)  # binary cross-entropy on logits
    return jnp.mean(jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z))))


init, update, get_params = optimizers.adam(sample.LEARNING_RATE)
state = init(params)


@jax.jit
def step(i, state, x, c, y):
    return update(i, jax.grad(loss)(get_params(state), x, c, y), state)


# strings="ids": countries arrive as int ids of the train split's vocabulary (0: any other)
train = tfspark.read_batches(path, sample.BATCH, split="train", columns=sample.COLUMNS,
                             strings="ids", vocabulary="train", epochs=sample.EPOCHS,
                             seed=sample.SEED, label_cols=[])
for i, batch in enumerate(train):
    state = step(i, state, sample.numbers(batch, mean, std), batch[sample.CATEGORY],
                 batch[sample.LABEL].astype(np.float32))

p = get_params(state)
scores, labels = [], []
for batch in tfspark.read_batches(path, 4096, split="validation", columns=sample.COLUMNS,
                                  strings="ids", vocabulary="train", label_cols=[]):
    scores.append(np.asarray(logits(p, sample.numbers(batch, mean, std), batch[sample.CATEGORY])))
    labels.append(batch[sample.LABEL])
print(f"jax: validation AUC {sample.auc(np.concatenate(labels), np.concatenate(scores)):.4f}")
