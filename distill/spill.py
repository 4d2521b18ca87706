"""Disk-backed sequences, so that a transfer set grown by ``--augment N`` does not grow memory with N.

kd's synthetic examples and the teacher's logits of its transfer set are written once, as they are
made, to unnamed temporary files (in ``$TMPDIR``; the system removes them when the process ends, however
it ends) and read back one record at a time with `os.pread`: memory holds each record's end offset,
8 bytes, not the record. `scripts/augment_memory.py` measures the peak memory of kd as N grows.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import os
import tempfile
from array import array
from typing import Any, Iterable, Iterator, Sequence

import torch

from distill.errors import DistillError
from distill.inference import ExampleLogits, padded_words


@contextlib.contextmanager
def _temp_disk() -> Iterator[None]:
    """An error of the temporary files (a full temp disk) in one line naming the temp folder and TMPDIR: the
    output's disk may have room, and the fix is to free the temp folder or point TMPDIR elsewhere."""
    try:
        yield
    except OSError as error:
        raise DistillError(f"{tempfile.gettempdir()}: cannot write the spilled transfer set to this temporary folder "
                           f"({error.strerror or error}); free space there, or set TMPDIR to a folder on a disk with "
                           "room") from None


class Records:
    """Byte strings appended to an unnamed temporary file, read back by position."""

    def __init__(self) -> None:
        with _temp_disk():
            self._file = tempfile.TemporaryFile()
        self._ends = array("q")
        self._unflushed = False

    def append(self, record: bytes) -> None:
        with _temp_disk():
            self._file.write(record)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(record))
        self._unflushed = True

    def __len__(self) -> int:
        return len(self._ends)

    def read(self, index: int) -> bytes:
        if self._unflushed:
            with _temp_disk():
                self._file.flush()
            self._unflushed = False
        start = self._ends[index - 1] if index > 0 else 0
        if hasattr(os, "pread"):
            return os.pread(self._file.fileno(), self._ends[index] - start, start)
        self._file.seek(start)  # Windows has no pread: read there, then go back to where appends write
        record = self._file.read(self._ends[index] - start)
        self._file.seek(0, os.SEEK_END)
        return record


def _positions(index: int | slice, length: int) -> Iterable[int] | int:
    """A sequence index as `list` reads it: a slice's positions, or one position (negative: from the end)."""
    if isinstance(index, slice):
        return range(*index.indices(length))
    if not -length <= index < length:
        raise IndexError(f"index {index} out of range for {length} records")
    return index % length


class SpilledExamples(Sequence):
    """Examples (texts, or token lists) kept on disk as JSON, in the order appended."""

    def __init__(self, examples: Iterable = ()) -> None:
        self._records = Records()
        for example in examples:
            self.append(example)

    def append(self, example: str | list[str]) -> None:
        self._records.append(json.dumps(example, ensure_ascii=False).encode())

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, index: Any) -> Any:
        where = _positions(index, len(self))
        if isinstance(where, int):
            return json.loads(self._records.read(where))
        return [self[position] for position in where]


class Concatenated(Sequence):
    """Several sequences read as one, without copying them (a list of labelled examples and a spilled one)."""

    def __init__(self, parts: Sequence[Sequence]) -> None:
        self.parts = [part for part in parts if len(part)]
        self._starts = [0]
        for part in self.parts:
            self._starts.append(self._starts[-1] + len(part))

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: Any) -> Any:
        where = _positions(index, len(self))
        if isinstance(where, int):
            part = bisect.bisect_right(self._starts, where) - 1
            return self.parts[part][where - self._starts[part]]
        return [self[position] for position in where]


class SpilledLogits:
    """`ExampleLogits` kept on disk: each example's float32 logits (and, for a tagger, the mask of the words
    scored) as one record. Read like `ExampleLogits` (`example`, `batch`); `digest` is a checksum of all of
    it in order, computed as it is written, which a resumed run compares as it does the in-memory logits'."""

    def __init__(self) -> None:
        self._records = Records()
        self._labels: int | None = None
        self._tagging: bool | None = None
        self._digest = hashlib.sha256()

    def extend(self, results: ExampleLogits) -> None:
        """Append the logits of `results`' examples, in order."""
        tagging = results.offsets is not None
        if self._labels is None:
            self._labels, self._tagging = results.logits.size(-1), tagging
        if (self._labels, self._tagging) != (results.logits.size(-1), tagging):
            raise ValueError("logits of another shape than those spilled before")
        for index in range(len(results)):
            values, scored = results.example(index)
            record = values.float().contiguous().numpy().tobytes()
            if tagging:
                record += scored.to(torch.bool).contiguous().numpy().tobytes()
            self._digest.update(len(record).to_bytes(8, "little") + record)
            self._records.append(record)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def digest(self) -> str:
        return self._digest.hexdigest()

    def example(self, index: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        record = bytearray(self._records.read(index))  # writable: torch shares its memory
        if not self._tagging:
            return torch.frombuffer(record, dtype=torch.float32), None
        words = len(record) // (4 * self._labels + 1)
        logits = torch.frombuffer(record, dtype=torch.float32, count=words * self._labels)
        scored = torch.frombuffer(record, dtype=torch.bool, offset=4 * words * self._labels)
        return logits.view(words, self._labels), scored

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Padded (batch[, words], labels) logits and (batch, words) scored mask, as `ExampleLogits.batch`."""
        rows = [self.example(index) for index in indices]
        if not self._tagging:
            return torch.stack([values for values, _ in rows]), None
        return padded_words(rows)
