"""PyTorch, no TensorFlow: tfspark.torch_dataset in a DataLoader (its workers split the rows:
each row once per epoch), tensors straight from the reader's arrays.

    pip install 'pyspark-tfrecord[torch]'
    python examples/torch_logistic.py out/sample_tfrecords
"""

import _sample as sample
import numpy as np
import torch
from torch.utils.data import DataLoader

import tfspark

path = sample.data_path()
mean, std, countries = sample.scaling(path)
torch.manual_seed(sample.SEED)


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
    x = torch.as_tensor(sample.numbers({n: batch[n].numpy() for n in batch}, mean, std))
    return x, batch[sample.CATEGORY].long(), batch[sample.LABEL].float()


model = Logistic()
optimizer = torch.optim.Adam(model.parameters(), lr=sample.LEARNING_RATE)
# epochs=: one pass of the loader is every epoch, each shuffled anew
train = tfspark.torch_dataset(path, sample.BATCH, split="train", columns=sample.COLUMNS,
                              strings="ids", vocabulary="train", epochs=sample.EPOCHS,
                              seed=sample.SEED, label_cols=[])
for batch in DataLoader(train, batch_size=None, num_workers=2):
    x, c, y = tensors(batch)
    optimizer.zero_grad()
    torch.nn.functional.binary_cross_entropy_with_logits(model(x, c), y).backward()
    optimizer.step()

scores, labels = [], []
with torch.no_grad():
    for batch in DataLoader(tfspark.torch_dataset(path, 4096, split="validation",
                                                  columns=sample.COLUMNS, strings="ids",
                                                  vocabulary="train", label_cols=[]),
                            batch_size=None):
        x, c, y = tensors(batch)
        scores.append(model(x, c).numpy())
        labels.append(y.numpy())
print(f"torch: validation AUC {sample.auc(np.concatenate(labels), np.concatenate(scores)):.4f}")
