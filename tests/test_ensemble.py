"""Teacher ensembles: the mixture functions, kd and pseudo-label with several teachers, their refusals and records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from distill import DistillError, Distiller, Runtime, TeacherStudentDistill, TrainSettings
from distill.ensemble import EnsembleTeacherLogits, ensemble_logits, ensemble_mixtures, ensemble_weights
from distill.inference import ExampleLogits, predict_logits
from distill.labels import LabelHierarchy
from distill.losses import kl_distill, mean_logits, mixture_logits
from distill.models import load_model
from distill.models.students import build_student
from distill.pseudo_label import pseudo_label
from tests.conftest import SAMPLES, cli, config_for, copy_of, interrupted_cli_run

QUIET = Runtime(device="cpu", threads=1, progress=False)
TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
NER_TRAIN, NER_DEV = SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll"
SMALL_LSTM = ["--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--dropout", "0", "--quiet"]


@pytest.fixture(scope="module")
def other_classifier_teacher(tiny_other_encoder_dir, tmp_path_factory) -> str:
    """A second sentiment teacher: another encoder (a cased BERT, another tokenizer) and labels in the same set."""
    out = tmp_path_factory.mktemp("teacher-other-cls") / "teacher"
    cli("teacher", "--task", "classification", "--encoder", tiny_other_encoder_dir, "--epochs", "1",
        "--encoder-lr", "1e-3", "--train", TRAIN, "--dev", DEV, "--output", out, "--quiet", "--max-length", "64")
    return str(out)


@pytest.fixture(scope="module")
def other_tagging_teacher(tiny_other_encoder_dir, tmp_path_factory) -> str:
    """A second NER teacher on the other encoder: its words split into other sub-tokens."""
    out = tmp_path_factory.mktemp("teacher-other-tag") / "teacher"
    cli("teacher", "--task", "tagging", "--encoder", tiny_other_encoder_dir, "--epochs", "1", "--encoder-lr", "1e-3",
        "--train", NER_TRAIN, "--dev", NER_DEV, "--output", out, "--quiet", "--max-length", "16")
    return str(out)


def probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    return torch.softmax(logits.double() / temperature, -1)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0, 1e3, 1e6])
def test_mixture_logits_are_the_weighted_mean_of_the_distributions(temperature):
    torch.manual_seed(0)
    a, b = torch.randn(50, 4) * 3, torch.randn(50, 4) * 3
    mixed = mixture_logits([a, b], [0.7, 0.3], temperature)
    expected = 0.7 * probabilities(a, temperature) + 0.3 * probabilities(b, temperature)
    assert torch.allclose(probabilities(mixed, temperature), expected, atol=1e-6)
    # a teacher with itself, or alone by its weight, is that teacher (up to a shift per row, which no softmax sees)
    for same in (mixture_logits([a, a], [0.5, 0.5], temperature), mixture_logits([a, b], [1.0, 0.0], temperature)):
        assert torch.allclose(probabilities(same, temperature), probabilities(a, temperature), atol=1e-6)
        assert torch.allclose(kl_distill(b, same, temperature), kl_distill(b, a, temperature), rtol=1e-5)


def test_mixture_at_a_large_temperature_keeps_the_kl_term_exact():
    """At T = 1e6 the plain formula is off by tenths of a logit; the kl term against the mixture then reaches the
    high-T limit, that against the weighted mean of the centred logits."""
    torch.manual_seed(1)
    a, b, student = torch.randn(30, 5) * 3, torch.randn(30, 5) * 3, torch.randn(30, 5)
    limit = kl_distill(student, mean_logits([a, b], [0.7, 0.3]), 1e9)
    assert kl_distill(student, mixture_logits([a, b], [0.7, 0.3], 1e6), 1e6).item() == pytest.approx(limit.item(),
                                                                                                      rel=1e-5)


def test_mean_logits_and_ensemble_logits_per_word():
    a = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    b = torch.tensor([[3.0, 2.0, 1.0], [4.0, 5.0, 6.0]])
    assert torch.equal(mean_logits([a, b], [0.25, 0.75]), 0.25 * a + 0.75 * b)
    # b's labels in another order: put in a's order before they are mixed; a word is scored where both scored it
    first = ExampleLogits(a, torch.tensor([0, 2]), torch.tensor([True, True]))
    second = ExampleLogits(b[:, [2, 0, 1]], torch.tensor([0, 2]), torch.tensor([True, False]))
    combined = ensemble_logits([first, second], [["O", "B-PER", "I-PER"], ["I-PER", "O", "B-PER"]], [0.5, 0.5], None)
    assert torch.equal(combined.logits, 0.5 * a + 0.5 * b) and combined.scored.tolist() == [True, False]
    assert torch.equal(combined.offsets, first.offsets)


def test_one_logit_teacher_joins_as_two_logits():
    """A --binary student as a teacher gives z; it joins as [0, z], whose softmax is its sigmoid."""
    z, two = torch.tensor([[1.5], [-2.0]]), torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    combined = ensemble_logits([ExampleLogits(z), ExampleLogits(two)], [["neg", "pos"], ["neg", "pos"]],
                               [0.5, 0.5], 1.0)
    expected = 0.5 * torch.stack([1 - torch.sigmoid(z[:, 0]), torch.sigmoid(z[:, 0])], -1) + 0.5 * two.softmax(-1)
    assert torch.allclose(combined.logits.softmax(-1), expected)


def test_pseudo_targets_come_from_the_mixture_at_t_1():
    """The hard target of an unlabeled row: the argmax and confidence of the mixture at T = 1, not at the kd T."""
    a, b = torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    both, labels = [ExampleLogits(a), ExampleLogits(b)], [["x", "y"], ["x", "y"]]
    source = EnsembleTeacherLogits(*ensemble_mixtures(both, labels, [0.5, 0.5], TeacherStudentDistill(temperature=8.0)))
    mixture = 0.5 * a.softmax(-1) + 0.5 * b.softmax(-1)
    assert torch.allclose(source.target_logits([0]).softmax(-1), mixture)
    assert torch.allclose(source.logits([0])[0].div(8.0).softmax(-1),
                          0.5 * (a / 8).softmax(-1) + 0.5 * (b / 8).softmax(-1))
    mse = EnsembleTeacherLogits(*ensemble_mixtures(both, labels, [0.5, 0.5], TeacherStudentDistill("mse")))
    assert torch.equal(mse.logits([0])[0], 0.5 * a + 0.5 * b)


@pytest.mark.parametrize("weights, teachers, message", [
    ([1.0, 2.0, 3.0], 2, "teacher_weights gives 3 weights for 2 teachers: give one per teacher"),
    ([0.7, -0.3], 2, r"teacher_weights: give one positive number per teacher, got \[0.7, -0.3\]"),
    ([1.0, 0.0], 2, "give one positive number per teacher"),
    ([1.0, float("nan")], 2, "give one positive number per teacher"),
    ("0.7,0.3", 2, "give one positive number per teacher"),
    ([True, 1.0], 2, "give one positive number per teacher"),
    ([1.0], 1, "teacher_weights weight the teachers of an ensemble, and one teacher was given"),
])
def test_teacher_weights_are_refused_in_one_line(weights, teachers, message):
    with pytest.raises(DistillError, match=message):
        ensemble_weights(weights, teachers)


def test_teacher_weights_are_normalised():
    assert ensemble_weights([3, 1], 2) == [0.75, 0.25] and ensemble_weights(None, 4) == [0.25] * 4
    assert ensemble_weights(None, 1) is None


def test_teacher_weights_too_large_to_sum_keep_their_ratio():
    """Two weights of 1e308 summed to inf, and each normalised to 0: the mixture of no teacher labelled every
    example with the first label at confidence 1/K."""
    assert ensemble_weights([1e308, 1e308], 2) == [0.5, 0.5]
    assert ensemble_weights([1.5e308, 0.5e308, 1e308], 3) == pytest.approx([0.5, 1 / 6, 1 / 3])


def test_what_an_ensemble_cannot_do_is_refused(tiny_classifier_teacher, tmp_path):
    teachers = [tiny_classifier_teacher, str(copy_of(tiny_classifier_teacher, tmp_path, "copy"))]
    for settings, message in [({"online_teacher": True}, "drop online_teacher=True, or give one teacher"),
                              ({"loss": TeacherStudentDistill(hidden_weight=1.0)}, "drop a layer term"),
                              ({"head": "sentiment"}, "drop head, or give one teacher")]:
        with pytest.raises(DistillError, match=message):
            Distiller(teachers, "lstm", **settings)
    with pytest.raises(DistillError, match="not an empty list"):
        Distiller([], "lstm")
    with pytest.raises(DistillError, match="teacher: give a model .* or a list of them .*, not int"):
        Distiller([tiny_classifier_teacher, 3], "lstm")


def test_teachers_with_different_label_sets_are_refused_naming_both(tiny_classifier_teacher):
    other = build_student(config_for("lstm", embedding_dim=4, hidden_dim=4), LabelHierarchy(["bad", "good"]),
                          ["a fine film"])
    with pytest.raises(DistillError, match=r"teachers \S+teacher and 2 \(in memory\) have different label sets, "
                                           r"\['negative', 'positive'\] and \['bad', 'good'\]"):
        Distiller([tiny_classifier_teacher, other], config_for("lstm", embedding_dim=4, hidden_dim=4),
                  settings=TrainSettings(epochs=1), env=QUIET).fit(str(TRAIN), str(DEV))


def test_a_teacher_twice_teaches_what_it_teaches_alone(tiny_classifier_teacher, other_classifier_teacher, tmp_path):
    """[A, copy of A] mixes A with itself: the same student as A alone, seed for seed; [A, B] another one."""
    config = config_for("lstm", embedding_dim=8, hidden_dim=8, dropout=0.0)

    def student(teacher, **settings):
        return Distiller(teacher, config, settings=TrainSettings(epochs=2, seed=3), cache_dir=tmp_path / "cache",
                         env=QUIET, **settings).fit(str(TRAIN), str(DEV)).model.state_dict()

    alone, twice = student(tiny_classifier_teacher), student([tiny_classifier_teacher, str(copy_of(tiny_classifier_teacher, tmp_path, "copy"))])
    for name in alone:
        assert torch.allclose(alone[name], twice[name], atol=1e-5), name
    mixed = student([tiny_classifier_teacher, other_classifier_teacher], teacher_weights=[0.7, 0.3])
    assert any(not torch.allclose(alone[name], mixed[name], atol=1e-3) for name in alone)


def test_one_teacher_given_twice_is_refused_by_kd_and_pseudo_label(tiny_classifier_teacher, tmp_path, capsys):
    """--teacher A --teacher ./A (or a link to A, or one model in memory twice) was taken as a two-teacher ensemble:
    A mixed with itself, A alone at twice the cost, most likely another teacher mistyped. Refused in one line before
    anything is loaded or written, by kd and pseudo-label alike."""
    from tests.conftest import run_main
    teacher = Path(tiny_classifier_teacher)
    (tmp_path / "link").symlink_to(teacher)
    for again in (f"{teacher.parent}/./{teacher.name}", tmp_path / "link"):
        for args in (["kd", "--teacher", teacher, "--teacher", again, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV,
                      "--output", tmp_path / "run"],
                     ["pseudo-label", "--teacher", teacher, "--teacher", again, "--input", TRAIN, "--output",
                      tmp_path / "out.jsonl"]):
            status, err = run_main(capsys, *args)
            assert status == 2 and len(err.strip().splitlines()) == 1, err
            assert f"teachers {teacher} and {again} are one teacher given twice" in err and "--teacher-weights" in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.jsonl").exists()
    model = load_model(tiny_classifier_teacher)
    with pytest.raises(DistillError, match=r"teachers 1 \(in memory\) and 2 \(in memory\) are one teacher given "
                                           r"twice: .* give each teacher once, and teacher_weights to weight one more"):
        Distiller([model, model], "lstm")


def test_kd_with_two_teachers_from_the_command_line(tiny_classifier_teacher, other_classifier_teacher, tmp_path,
                                                   capsys, monkeypatch, tiny_hf_classifier):
    """Both teachers' logits cached, each in its own folder; the summary, the card and run_config.yaml name both
    with their weights; a resume with another teacher list or weights is refused; the output never replaces a
    teacher."""
    from procedures.cli import main
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = ["kd", "--teacher", tiny_classifier_teacher, "--teacher", other_classifier_teacher, "--teacher-weights",
            "3,1", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", out, "--epochs", "3", "--cache-dir", cache]
    interrupted_cli_run(monkeypatch, args, out)
    capsys.readouterr()
    changes = [(["--teacher", other_classifier_teacher, "--teacher-weights", "1,1"], "kd.teacher_weights)"),
               (["--teacher", tiny_hf_classifier, "--teacher-weights", "3,1"], "inputs.teacher:2)")]
    for teachers, changed in changes:
        with pytest.raises(SystemExit) as refused:
            main([str(a) for a in ["kd", "--teacher", tiny_classifier_teacher, *teachers, *args[7:], "--resume"]])
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"cannot resume with different settings or data ({changed}" in err, err
    cli(*args, "--resume")
    summary = json.loads((out / "train_summary.json").read_text())
    assert [(t["teacher"], t["weight"]) for t in summary["teachers"]] == [(tiny_classifier_teacher, 0.75),
                                                                          (other_classifier_teacher, 0.25)]
    assert summary["kd"]["teacher_weights"] == [0.75, 0.25] and set(summary["inputs"]) >= {"teacher", "teacher:2"}
    folders = [t["cache_dir"] for t in summary["teachers"]]
    assert len(set(folders)) == 2 and all(str(cache) in folder for folder in folders)
    assert summary["cached_examples"] == sum(t["cached_examples"] for t in summary["teachers"]) > 0  # on resume
    import yaml
    assert yaml.safe_load((out / "run_config.yaml").read_text())["teacher"] == [tiny_classifier_teacher,
                                                                                other_classifier_teacher]
    readme = (out / "README.md").read_text()
    assert tiny_classifier_teacher in readme and other_classifier_teacher in readme and "weight 0.25" in readme
    with pytest.raises(SystemExit) as refused:  # the second teacher is an input: never overwritten
        main([str(a) for a in [*args[:-6], "--output", other_classifier_teacher, "--overwrite"]])
    assert refused.value.code == 2 and (load_model(other_classifier_teacher).task == "classification")


def test_kd_tagging_ensemble_across_tokenizers(tiny_tagging_teacher, other_tagging_teacher, tmp_path):
    """Two taggers whose tokenizers split words differently: their logits line up per word, and kd trains on the
    mixture of the words both scored."""
    a, b = load_model(tiny_tagging_teacher), load_model(other_tagging_teacher)
    sentences = [["Karl", "Weber", "visited", "\u200b", "Port", "Halden"], ["Unbelievably", "good"]]
    first, second = predict_logits(a, sentences), predict_logits(b, sentences)
    combined = ensemble_logits([first, second], [a.hierarchy.labels, b.hierarchy.labels], [0.5, 0.5], 1.0)
    words = len(sentences[0]) + len(sentences[1])
    assert combined.logits.shape == (words, len(a.hierarchy)) and combined.scored.tolist()[3] is False
    order = [b.hierarchy.labels.index(label) for label in a.hierarchy.labels]
    mixture = 0.5 * first.logits.softmax(-1) + 0.5 * second.logits[:, order].softmax(-1)
    assert torch.allclose(combined.logits.softmax(-1)[combined.scored], mixture[combined.scored], atol=1e-6)
    out = tmp_path / "tagger"
    cli("kd", "--teacher", tiny_tagging_teacher, "--teacher", other_tagging_teacher, "--model", "lstm-tagger",
        "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1", "--quiet", "--train", NER_TRAIN, "--dev",
        NER_DEV, "--output", out, "--cache-dir", tmp_path / "cache")
    summary = json.loads((out / "train_summary.json").read_text())
    assert [t["weight"] for t in summary["teachers"]] == [0.5, 0.5] and summary["best"]["dev"]["f1"] >= 0


def test_pseudo_label_by_the_ensemble(tiny_classifier_teacher, other_classifier_teacher, tmp_path):
    """Labels and confidences of the mixture at T = 1; each teacher's logits cached, which kd then finds."""
    texts = (SAMPLES / "unlabeled_movies.txt").read_text(encoding="utf-8").splitlines()[:40]
    source = tmp_path / "movies.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out, cache = tmp_path / "movies.jsonl", tmp_path / "cache"
    cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--teacher", other_classifier_teacher,
        "--teacher-weights", "0.7,0.3", "--input", source, "--output", out, "--cache-dir", cache, "--quiet")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    a, b = load_model(tiny_classifier_teacher), load_model(other_classifier_teacher)
    order = [b.hierarchy.labels.index(label) for label in a.hierarchy.labels]
    mixture = 0.7 * predict_logits(a, texts).logits.softmax(-1) + \
        0.3 * predict_logits(b, texts).logits[:, order].softmax(-1)
    assert [r["label"] for r in records] == [a.hierarchy.labels[i] for i in mixture.argmax(-1).tolist()]
    assert [r["confidence"] for r in records] == pytest.approx(mixture.max(-1).values.tolist(), abs=1e-5)
    assert len(list(cache.iterdir())) == 2  # a folder per teacher
    summary = Distiller([tiny_classifier_teacher, other_classifier_teacher],
                        config_for("lstm", embedding_dim=8, hidden_dim=8), settings=TrainSettings(epochs=1),
                        teacher_weights=[0.7, 0.3], cache_dir=cache, env=QUIET).fit(str(TRAIN), str(DEV),
                                                                                   str(out)).summary
    assert [t["cached_examples"] for t in summary["teachers"]] == [len(records)] * 2


def test_pseudo_label_ensemble_resume_signature_names_every_teacher(tiny_classifier_teacher, other_classifier_teacher,
                                                                    tmp_path):
    from distill.pseudo_label import run_signature
    one = run_signature(tiny_classifier_teacher, str(TRAIN))
    both = run_signature([tiny_classifier_teacher, other_classifier_teacher], str(TRAIN), teacher_weights=[0.5, 0.5])
    assert set(one["inputs"]) == {"teacher", "input"} and set(both["inputs"]) == {"teacher", "teacher:2", "input"}
    with pytest.raises(DistillError, match="drop use_export, or give one teacher"):
        pseudo_label([tiny_classifier_teacher, other_classifier_teacher], str(TRAIN), str(tmp_path / "x.jsonl"),
                     use_export=str(tmp_path))
    with pytest.raises(DistillError, match="teacher_weights weight the teachers of an ensemble"):
        pseudo_label(tiny_classifier_teacher, str(TRAIN), str(tmp_path / "x.jsonl"), teacher_weights=[1.0])


def test_mask_augmentation_needs_one_mask_token_across_the_ensemble(tiny_classifier_teacher, tmp_path):
    """The synthetic examples are made once, with the first teacher's mask token, and every teacher scores them: a
    teacher whose tokenizer masks otherwise (a word student reads `[MASK]` as three words) is refused with `mask`,
    and taught the examples of the other methods."""
    config = config_for("lstm", embedding_dim=4, hidden_dim=4)
    word_teacher = build_student(config, LabelHierarchy(["negative", "positive"]), ["a fine film"])

    def fit(**settings):
        return Distiller([tiny_classifier_teacher, word_teacher], config, settings=TrainSettings(epochs=1),
                         env=QUIET, cache_dir=tmp_path / "cache", augment=1, **settings).fit(str(TRAIN), str(DEV))
    refusal = "([MASK], <unk>): each teacher would read another's as plain text; use augment_methods=['replace', "
    with pytest.raises(DistillError, match=re.escape(refusal)):
        fit()
    assert fit(augment_methods=["replace", "ngram"]).summary["synthetic_examples"] > 0
