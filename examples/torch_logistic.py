"""PyTorch, no TensorFlow: tfspark.torch_dataset in a DataLoader (its workers split the rows:
each row once per epoch), tensors straight from the reader's arrays.

    pip install 'tfspark[torch]'
    python examples/torch_logistic.py out/sample_tfrecords
"""

import numpy as np
import torch
from _sample import (
    BATCH,
    CATEGORY,
    COLUMNS,
    EPOCHS,
    LABEL,
    LEARNING_RATE,
    SEED,
    auc,
    data_path,
    numbers,
    scaling,
)
from torch.utils.data import DataLoader

import tfspark

path = data_path()
mean, std, countries = scaling(path)
torch.manual_seed(SEED)


class Logistic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(3, 1)
        self.country = torch.nn.Embedding(countries, 1)
        torch.nn.init.zeros_(self.w.weight)
        torch.nn.init.zeros_(self.w.bias)
        torch.nn.init.zeros_(self.country.weight)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (self.w(x) + self.country(c)).squeeze(1)


def tensors(batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.as_tensor(numbers({n: batch[n].numpy() for n in batch}, mean, std))
    return x, batch[CATEGORY].long(), batch[LABEL].float()


model = Logistic()
optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
# epochs=EPOCHS: one pass of the loader is every epoch, each shuffled anew
train = tfspark.torch_dataset(path, BATCH, split="train", columns=COLUMNS, strings="ids",
                              vocabulary="train", epochs=EPOCHS, seed=SEED, label_cols=[])
for batch in DataLoader(train, batch_size=None, num_workers=2):
    x, c, y = tensors(batch)
    optimizer.zero_grad()
    torch.nn.functional.binary_cross_entropy_with_logits(model(x, c), y).backward()
    optimizer.step()

scores, labels = [], []
with torch.no_grad():
    for batch in DataLoader(tfspark.torch_dataset(path, 4096, split="validation",
                                                  columns=COLUMNS, strings="ids",
                                                  vocabulary="train", label_cols=[]),
                            batch_size=None):
        x, c, y = tensors(batch)
        scores.append(model(x, c).numpy())
        labels.append(y.numpy())
print(f"torch: validation AUC {auc(np.concatenate(labels), np.concatenate(scores)):.4f}")
