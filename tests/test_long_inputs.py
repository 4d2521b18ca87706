"""Students cover every word of a long input: training, evaluate, predict and kd never cut one."""

import json

import pytest
import torch

from distill.distillation import CachedTeacherLogits, DistillObjective, TeacherStudentDistill
from distill.inference import decode_labels, predict_logits
from distill.labels import LabelHierarchy
from distill.losses import kl_distill
from distill.models import load_model
from distill.models.students import build_student
from distill.training import make_batch
from tests.conftest import SAMPLES, cli, config_for

TAGGERS = [("lstm-tagger", ["--hidden-dim", "8"]), ("lstm-tagger", ["--hidden-dim", "8", "--crf"]),
           ("idcnn-tagger", ["--filters", "8"])]
TINY = ["--embedding-dim", "8", "--epochs", "1", "--quiet"]


def long_sentence(words: int = 450) -> list[list[str]]:
    """CoNLL lines of sample training sentences joined into one sentence of at least `words` tokens."""
    blocks = [block.splitlines() for block in (SAMPLES / "ner_train.conll").read_text().split("\n\n")]
    lines: list[list[str]] = []
    for block in blocks:
        lines += [line.split() for line in block if line.strip() and not line.startswith("-DOCSTART-")]
        if len(lines) >= words:
            return lines
    raise AssertionError("the sample training file is too short")


def write_conll(path, sentences: list[list[list[str]]]) -> None:
    path.write_text("".join("".join(" ".join(fields) + "\n" for fields in s) + "\n" for s in sentences))


@pytest.fixture(scope="module")
def long_files(tmp_path_factory):
    """A training file holding the samples plus one long sentence, and a test file of that sentence alone."""
    folder = tmp_path_factory.mktemp("long")
    sentence = long_sentence()
    write_conll(folder / "long.conll", [sentence])
    (folder / "train.conll").write_text((SAMPLES / "ner_train.conll").read_text() + "\n"
                                        + (folder / "long.conll").read_text())
    (folder / "long.txt").write_text(" ".join(fields[0] for fields in sentence) + "\n")
    return folder, [fields[0] for fields in sentence]


@pytest.mark.parametrize("model, extra", TAGGERS, ids=["lstm-tagger", "lstm-tagger-crf", "idcnn-tagger"])
def test_tagger_trains_evaluates_and_predicts_every_word(long_files, tmp_path, capsys, model, extra):
    folder, tokens = long_files
    out = tmp_path / model
    cli("student", "--model", model, *extra, "--train", folder / "train.conll", "--dev", SAMPLES / "ner_dev.conll",
        "--output", out, *TINY)
    cli("evaluate", out, folder / "long.conll", "--quiet")
    assert json.loads((out / "eval_metrics.json").read_text())["examples"] == 1
    tagger = load_model(out)
    assert [len(tags) for tags in decode_labels(tagger, predict_logits(tagger, [tokens]))] == [len(tokens)]
    capsys.readouterr()
    cli("predict", out, folder / "long.txt")
    record, = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(record["tokens"]) == len(record["tags"]) == len(record["confidences"]) == len(tokens) >= 450


def test_kd_distils_every_word_of_a_long_sentence(tiny_tagging_teacher, long_files, tmp_path):
    """The teacher scores a long sentence window by window; the student's logits line up with all of it."""
    folder, tokens = long_files
    teacher = load_model(tiny_tagging_teacher)
    examples = [tokens, tokens[:7]]
    results = predict_logits(teacher, examples)
    torch.manual_seed(0)
    student = build_student(config_for("lstm-tagger", embedding_dim=8, hidden_dim=6, dropout=0.0),
                            teacher.hierarchy, examples).eval()
    batch = make_batch(student, examples, [None, None], [0, 1])
    logits = student(**batch["inputs"])
    assert logits.shape[1] == len(tokens)
    teacher_grid, scored = results.batch([0, 1])
    mask = batch["mask"] & scored
    assert mask[0].sum() == scored[0].sum() > 400  # windows of 16 sub-tokens cover the whole sentence
    loss = TeacherStudentDistill(student_weight=0.0, distill_weight=1.0)
    distiller = DistillObjective(loss, CachedTeacherLogits(results))
    expected = kl_distill(logits[mask], teacher_grid[mask], loss.temperature)
    assert distiller(student, logits, batch).item() == pytest.approx(expected.item(), rel=1e-6)
    cli("kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", "--crf", "--train", folder / "train.conll",
        "--dev", SAMPLES / "ner_dev.conll", "--unlabeled", folder / "long.txt", "--cache-dir", tmp_path / "cache",
        "--output", tmp_path / "kd", "--hidden-dim", "8", *TINY)
    cli("evaluate", tmp_path / "kd", folder / "long.conll", "--quiet")


@pytest.mark.parametrize("name, extra", [("lstm", {}), ("lstm", {"pooling": "max"}), ("cnn", {})])
def test_classifier_reads_the_tail_of_a_long_text(name, extra):
    filler = " ".join(["plain"] * 250)
    texts = [f"{filler} superb", f"{filler} dreadful"]
    torch.manual_seed(0)
    model = build_student(config_for(name, embedding_dim=8, hidden_dim=6, filters=5, dropout=0.0, **extra),
                          LabelHierarchy(["neg", "pos"]), texts).eval()
    logits = predict_logits(model, texts).logits
    assert not torch.allclose(logits[0], logits[1])  # the only difference is word 251


def test_old_student_directory_with_max_words_loads_and_tags_every_word(long_files, tmp_path):
    """Checkpoints saved while students cut inputs at `max_words` still load, and now read it all."""
    _, tokens = long_files
    model = build_student(config_for("idcnn-tagger", embedding_dim=8, filters=5),
                          LabelHierarchy(["O", "B-PER"]), [tokens])
    model.save_pretrained(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    # format 1: one config for every student and the run: other models' settings, training settings
    config["config"].update(max_words=200, hidden_dim=7, pooling="last", lr=0.002, epochs=15, seed=42)
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    card = json.loads((tmp_path / "old" / "distill.json").read_text())
    card["sha256"] = {"model.safetensors": card["sha256"]["model.safetensors"]}  # cards then covered weights only
    del card["format_version"], card["class"]
    card["model"] = "IDCNNTagger"  # the class name, as cards then named it
    (tmp_path / "old" / "distill.json").write_text(json.dumps(card))
    loaded = load_model(tmp_path / "old", expect="student")
    assert [len(tags) for tags in decode_labels(loaded, predict_logits(loaded, [tokens]))] == [len(tokens)]
