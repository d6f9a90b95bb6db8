"""Keras 3 on any backend (KERAS_BACKEND=jax, torch or tensorflow): the same model from
keras_inputs and keras_preprocessing (normalization from the statistics, no adapt() pass),
fit on read_batches. On JAX and PyTorch it needs no TensorFlow.

    pip install 'pyspark-tfrecord[keras]' jax        # or torch, or tensorflow
    KERAS_BACKEND=jax python examples/keras_logistic.py out/sample_tfrecords
"""

import _sample as sample
import keras
import numpy as np

import tfspark

path = sample.data_path()
keras.utils.set_random_seed(sample.SEED)
others = [f.name for f in tfspark.read_manifest(path).spec.features
          if f.name not in sample.COLUMNS]
layers = tfspark.keras_preprocessing(path, split="train", strings="ids", skip=others,
                                     impute=False)
inputs = tfspark.keras_inputs(path, names=sample.COLUMNS[:-1], strings="ids")
numbers = keras.ops.concatenate(  # each [batch] -> [batch, 1], normalized
    [layers[n](keras.ops.cast(keras.ops.reshape(inputs[n], (-1, 1)), "float32"))
     for n in sample.NUMBERS], axis=1)
countries = layers[sample.CATEGORY]
weight = keras.layers.Embedding(countries.vocabulary_size(), 1, embeddings_initializer="zeros")
logit = keras.layers.Dense(1, kernel_initializer="zeros")(numbers) + \
    keras.ops.reshape(weight(countries(inputs[sample.CATEGORY])), (-1, 1))
model = keras.Model(inputs, logit)
model.compile(optimizer=keras.optimizers.Adam(sample.LEARNING_RATE),
              loss=keras.losses.BinaryCrossentropy(from_logits=True))

train = tfspark.read_batches(path, sample.BATCH, split="train", columns=sample.COLUMNS,
                             strings="ids", vocabulary="train", epochs=None, seed=sample.SEED,
                             label_cols=[sample.LABEL])
model.fit(iter(train), steps_per_epoch=train.steps_per_epoch(), epochs=sample.EPOCHS, verbose=0,
          shuffle=False)  # the reader shuffles (Keras would warn it cannot)

scores, labels = [], []
validation = tfspark.read_batches(path, 4096, split="validation", columns=sample.COLUMNS,
                                  strings="ids", vocabulary="train", label_cols=[sample.LABEL])
for features, y in validation:
    scores.append(model.predict_on_batch(features).ravel())
    labels.append(y)
print(f"keras-{keras.backend.backend()}: validation AUC "
      f"{sample.auc(np.concatenate(labels), np.concatenate(scores)):.4f}")
