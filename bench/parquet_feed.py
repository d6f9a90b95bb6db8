"""The parquet copy fed to PyTorch the way its users would: an IterableDataset of pyarrow's
batches as tensors (bench_vs_parquet.py --frameworks). A module of its own: a DataLoader's
forkserver workers import it by name."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import torch
from torch.utils.data import IterableDataset, get_worker_info


class CopyBatches(IterableDataset):
    """Parquet files' batches of `batch` rows as tensors (strings as object arrays), split
    among a DataLoader's workers by file."""

    def __init__(self, files: list[str], batch: int):
        self.files, self.batch = files, batch

    def __iter__(self):
        info = get_worker_info()
        mine = self.files if info is None else self.files[info.id::info.num_workers]
        for b in ds.dataset(mine, format="parquet").to_batches(batch_size=self.batch):
            yield {n: (c.to_numpy(zero_copy_only=False) if pa.types.is_string(c.type)
                       else torch.from_numpy(c.to_numpy()))
                   for n, c in zip(b.schema.names, b.columns)}


def same(batch):
    """The loader's collate_fn: the batch as the dataset made it."""
    return batch
