"""What the framework examples share: the sample data set's columns (`tfspark export` on the
embedded sample, or `make demo`), the scaling of its numbers from the statistics the export
stored, and the validation AUC. Each example trains the same model: a logistic regression on
the standardized numbers and a learned weight per country (convex, so every framework reaches
the same optimum, and the same AUC)."""

from __future__ import annotations

import sys

import numpy as np

import tfspark

NUMBERS = ["age", "income", "score"]
CATEGORY = "country"
LABEL = "label"
COLUMNS = [*NUMBERS, CATEGORY, LABEL]
BATCH, EPOCHS, LEARNING_RATE, SEED = 256, 3, 0.01, 0


def data_path() -> str:
    """The data set named on the command line (default: where `make demo` writes it)."""
    return sys.argv[1] if len(sys.argv) > 1 else "out/sample_tfrecords"


def scaling(path: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Means and standard deviations of NUMBERS over the train split, and the country ids'
    count (its top values + 1 for the rest), from the manifest's statistics: no pass over
    the data."""
    stats = tfspark.read_manifest(path).feature_stats("train")
    mean = np.array([stats[n]["mean"] for n in NUMBERS], np.float32)
    std = np.sqrt(np.array([stats[n]["variance"] for n in NUMBERS], np.float32))
    return mean, std, len(stats[CATEGORY]["top"]) + 1


def numbers(features: dict, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """A batch's NUMBERS as one standardized float32 array [batch, 3]."""
    return (np.stack([features[n] for n in NUMBERS], 1).astype(np.float32) - mean) / std


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the chance a positive scores above a negative (ties half)."""
    labels = np.asarray(labels).ravel().astype(bool)
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(order))
    sorted_scores = np.asarray(scores).ravel()[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)
    pos = labels.sum()
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * (len(labels) - pos)))
