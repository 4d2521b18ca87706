"""Disk-backed transfer sets (distill.spill): examples and logits read back as written, in order, and kd with
--augment trains on spilled examples whose spilled logits are the teacher's for those very examples."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distill.inference import ExampleLogits
from distill.spill import Concatenated, SpilledExamples, SpilledLogits
from tests.conftest import SAMPLES, config_for, copy_of

NER_TRAIN, NER_DEV = SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll"
TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"


def test_spilled_examples_read_back_as_written():
    written = ["plain", "ünïcode — and a\nnewline", ["token", "list", "\"quoted\""], ["x"]]
    spilled = SpilledExamples(written[:2])
    for example in written[2:]:
        spilled.append(example)
    assert len(spilled) == 4 and list(spilled) == written
    assert spilled[-1] == ["x"] and spilled[1:3] == written[1:3] and spilled[::-2] == written[::-2]
    with pytest.raises(IndexError):
        spilled[4]
    assert len(SpilledExamples()) == 0 and not SpilledExamples()


def test_concatenated_reads_its_parts_as_one_sequence():
    joined = Concatenated([["a", "b"], [], SpilledExamples(["c"]), ("d", "e")])
    assert len(joined) == 5 and list(joined) == ["a", "b", "c", "d", "e"]
    assert joined[2] == "c" and joined[-1] == "e" and joined[1:4] == ["b", "c", "d"]
    with pytest.raises(IndexError):
        joined[-6]


@pytest.mark.parametrize("labels", [1, 3])
def test_spilled_classification_logits_batch_as_in_memory(labels):
    results = ExampleLogits(torch.randn(7, labels))
    spilled = SpilledLogits()
    spilled.extend(ExampleLogits(results.logits[:3]))
    spilled.extend(ExampleLogits(results.logits[3:]))
    indices = [6, 0, 3, 3]
    assert len(spilled) == 7 and torch.equal(spilled.batch(indices)[0], results.batch(indices)[0])
    assert spilled.batch(indices)[1] is None


def tagging_logits(lengths: list[int], labels: int = 5) -> ExampleLogits:
    offsets = torch.cumsum(torch.tensor([0, *lengths]), 0)
    scored = torch.rand(sum(lengths)) > 0.3
    return ExampleLogits(torch.randn(sum(lengths), labels), offsets, scored)


def test_spilled_tagging_logits_batch_as_in_memory_and_their_digest_follows_every_value():
    first, second = tagging_logits([3, 1, 6]), tagging_logits([2, 9])
    whole = ExampleLogits.from_examples([first.example(i) for i in range(3)] + [second.example(i) for i in range(2)])
    spilled = SpilledLogits()
    spilled.extend(first)
    spilled.extend(second)
    indices = [4, 1, 0, 3]
    for got, expected in zip(spilled.batch(indices), whole.batch(indices)):
        assert torch.equal(got, expected)
    same = SpilledLogits()
    same.extend(whole)
    assert same.digest == spilled.digest
    changed = ExampleLogits(whole.logits.clone(), whole.offsets, whole.scored)
    changed.logits[7, 2] += 1e-6
    other = SpilledLogits()
    other.extend(changed)
    assert other.digest != spilled.digest
    with pytest.raises(ValueError):
        spilled.extend(tagging_logits([2], labels=4))


def spilled_and_in_memory(teachers: list[str], student, train: Path, dev: Path, task: str, tmp_path: Path,
                          loss=None, **distill) -> tuple:
    """kd with --augment 1 (its synthetic examples and their teacher logits kept on disk), then kd with the same
    synthetic examples given in memory as unlabeled text, whose logits are those the first run stored in the
    logit cache: the two results."""
    from distill.augment import synthetic_examples
    from distill.data import DataOptions, labelled_examples
    from distill.distiller import Distiller, DistillSettings
    from distill.models import load_teacher
    from distill.trainers import Runtime, TrainSettings
    common = {"settings": TrainSettings(epochs=1), "env": Runtime(progress=False)}
    teacher = teachers if len(teachers) > 1 else teachers[0]
    spilled = Distiller(teacher, student, loss, distill=DistillSettings(augment=1, cache_dir=tmp_path / "cache",
                                                                        **distill), **common).fit(str(train), str(dev))
    first = load_teacher(teachers[0])
    made = list(synthetic_examples(labelled_examples(str(train), task, DataOptions(), "train"),
                                   labelled_examples(str(dev), task, DataOptions(), "dev"), 1,
                                   spilled.summary["kd"]["augment_methods"], spilled.summary["settings"]["seed"],
                                   first, first.hierarchy.scheme))
    assert len(made) == spilled.summary["synthetic_examples"] > 14
    in_memory = Distiller(teacher, student, loss, distill=DistillSettings(cache_dir=tmp_path / "cache", **distill),
                          **common).fit(str(train), str(dev), made)
    assert in_memory.summary["unlabeled_examples"] == len(made)
    return spilled, in_memory


def assert_same_weights(first: torch.nn.Module, second: torch.nn.Module) -> None:
    one, other = first.state_dict(), second.state_dict()
    assert one.keys() == other.keys() and all(torch.equal(one[name], other[name]) for name in one)


def test_kd_augment_learns_each_spilled_example_from_its_own_logits(tiny_tagging_teacher, monkeypatch, tmp_path):
    """A tagger's transfer set scored in chunks of 7 (several chunks, the last one short) and kept on disk trains
    the student as the same examples held in memory do, with the teacher's logits for each: every position's
    spilled logits are the teacher's for the spilled example at that position."""
    import distill.cache
    monkeypatch.setattr(distill.cache, "SPILL_CHUNK", 7)
    student = config_for("lstm-tagger", embedding_dim=8, hidden_dim=8)
    spilled, in_memory = spilled_and_in_memory([tiny_tagging_teacher], student, NER_TRAIN, NER_DEV, "tagging",
                                               tmp_path)
    assert in_memory.summary["cached_examples"] == spilled.summary["train_examples"]  # the logits the first stored
    assert_same_weights(spilled.model, in_memory.model)


def test_an_ensemble_with_augment_spills_both_of_its_mixtures(tiny_classifier_teacher, monkeypatch, tmp_path):
    """Two teachers (one and its copy, weighted 3:1): the spilled mixture and the T = 1 targets are those of
    their logits for each example, as the same examples held in memory get."""
    import distill.cache
    from distill.distillation import TeacherStudentDistill
    monkeypatch.setattr(distill.cache, "SPILL_CHUNK", 16)
    copy = str(copy_of(tiny_classifier_teacher, tmp_path, "copy"))
    spilled, in_memory = spilled_and_in_memory(
        [tiny_classifier_teacher, copy], config_for("lstm", embedding_dim=8, hidden_dim=8), TRAIN, DEV, "classification",
        tmp_path, TeacherStudentDistill(temperature=3.0), teacher_weights=[3, 1])
    assert in_memory.summary["cached_examples"] == 2 * spilled.summary["train_examples"]  # each teacher's, stored
    assert_same_weights(spilled.model, in_memory.model)


def test_records_are_read_back_without_pread(monkeypatch):
    """Where the system has no os.pread (Windows), reading between appends leaves the appends in order."""
    import distill.spill
    monkeypatch.delattr(distill.spill.os, "pread")
    spilled = SpilledExamples(["one", "two"])
    assert spilled[0] == "one"
    spilled.append("three")
    assert list(spilled) == ["one", "two", "three"]


def test_a_full_temp_disk_is_named_as_the_temp_folder_not_the_output(tiny_classifier_teacher, monkeypatch, tmp_path,
                                                                    capsys):
    """ENOSPC while spilling the augmented transfer set: one line naming the temporary folder and TMPDIR (the
    output's disk was not the full one), and no output left behind."""
    import errno
    import tempfile

    import distill.spill
    from procedures.cli import main

    real = tempfile.TemporaryFile

    class FullDisk:
        def __init__(self) -> None:
            self.file = real(dir=tmp_path)

        def write(self, record: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name: str):
            return getattr(self.file, name)

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(distill.spill.tempfile, "TemporaryFile", FullDisk)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in ("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--embedding-dim", "8",
                               "--hidden-dim", "8", "--train", TRAIN, "--dev", DEV, "--output", out, "--epochs", "1",
                               "--augment", "1", "--cache-dir", tmp_path / "cache", "--quiet")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert err == (f"error: {temp}: cannot write the spilled transfer set to this temporary folder (No space left on "
                   "device); free space there, or set TMPDIR to a folder on a disk with room")
    assert not out.exists()
