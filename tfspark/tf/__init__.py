"""Everything that needs TensorFlow: make_dataset (dataset.py), the tf.io parsing spec
(parsing.py) and Keras inputs (keras.py). Never imports pyspark."""

from tfspark.errors import require

require("tensorflow", "tfspark.tf (make_dataset, keras_inputs)", "tf",
        "; on a GPU box that gives TensorFlow's GPU build, tensorflow-cpu works too")
