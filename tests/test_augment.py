"""Transfer-set augmentation (distill.augment): each method is seeded and deterministic, keeps what it promises
(word count, valid entity tags, mentions of the same type), the registry takes a user's augmenter and refuses an
unknown one, and kd trains on the synthetic examples, counts them and refuses to resume with other settings."""

from __future__ import annotations

import json

import pytest

from distill.augment import (DEFAULT_METHODS, Example, Resources, augmented, augmenters, check_methods, mentions_of,
                             register_augmenter)
from distill.data import DataOptions, labelled_examples
from distill.errors import DistillError
from distill.labels import split_tag
from tests.conftest import SAMPLES, SMALL_LSTM, cli, config_for, interrupted_cli_run

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
NER_TRAIN, NER_DEV = SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll"


@pytest.fixture(scope="module")
def texts():
    return labelled_examples(str(TRAIN), "classification", DataOptions(), "train")


@pytest.fixture(scope="module")
def sentences():
    return labelled_examples(str(NER_TRAIN), "tagging", DataOptions(), "train")


@pytest.fixture
def own_registry(monkeypatch):
    """A test's augmenters are gone after it."""
    import distill.augment
    monkeypatch.setattr(distill.augment, "_AUGMENTERS", distill.augment._AUGMENTERS.copy())


def valid_tags(tags) -> bool:
    """IOB2: every I- continues a mention of its type."""
    return all(not (split_tag(tag)[0] == "I" and (before == "O" or split_tag(before)[1] != split_tag(tag)[1]))
               for before, tag in zip(["O", *tags], tags))


def draw(examples, method: str, seed: int, n: int = 3) -> list:
    return list(augmented(examples.inputs[:40], examples.labels[:40], n, [method], seed))


@pytest.mark.parametrize("method", ["mask", "replace", "ngram"])
def test_text_methods_are_deterministic_per_seed(texts, method):
    first = draw(texts, method, 1)
    assert first and first == draw(texts, method, 1) and first != draw(texts, method, 2)
    assert all(isinstance(text, str) and text not in texts.inputs for text in first)


@pytest.mark.parametrize("method", ["mention", "token-replace", "mask"])
def test_tagging_methods_are_deterministic_per_seed(sentences, method):
    first = draw(sentences, method, 1)
    assert first and first == draw(sentences, method, 1) and first != draw(sentences, method, 2)


def test_the_same_example_gets_the_same_synthetic_ones_whatever_comes_before(texts):
    """Seeded per example index: a stream is the same however much of it was read before."""
    whole = list(augmented(texts.inputs[:10], texts.labels[:10], 2, DEFAULT_METHODS["classification"], 7))
    one = list(augmented(texts.inputs[:1], texts.labels[:1], 2, DEFAULT_METHODS["classification"], 7))
    assert whole[:len(one)] == one


def test_text_keeps_its_spacing_and_methods_do_what_they_say(texts):
    resources = Resources.build(texts.inputs, texts.labels, scheme=None)
    text = "  The remake, sadly, is dull!  "
    assert Example.of(text).value() == text
    masked = draw(texts, "mask", 3)
    assert all(resources.mask_token in text for text in masked)
    for text in draw(texts, "ngram", 3):  # a contiguous run of 1 to 5 words of a training text
        assert any(text in original for original in texts.inputs)
        assert 1 <= len([w for w in Example.of(text).words if w.isalnum()]) <= 5
    import random
    from distill.augment import replace_similar, word_class
    example = Example.of(texts.inputs[1])
    for seed in range(20):
        new = replace_similar(example, random.Random(seed), resources)
        assert len(new.words) == len(example.words)
        for old, word in zip(example.words, new.words):
            counts = resources.word_counts
            assert word == old or word_class(word, counts[word]) == word_class(old, counts[old])


def test_tagging_methods_keep_word_count_and_valid_tags(sentences):
    import random
    from distill.augment import mask, mention, token_replace
    resources = Resources.build(sentences.inputs, sentences.labels)
    training_mentions = {(kind, words) for kind, found in resources.mentions.items() for words in found}
    changed = 0
    for index, (words, tags) in enumerate(zip(sentences.inputs[:60], sentences.labels[:60])):
        example = Example.of(words, tags)
        for function in (mask, token_replace):
            new = function(example, random.Random(index), resources)
            assert len(new.words) == len(words) and new.tags == example.tags
        new = mention(example, random.Random(index), resources)
        assert len(new.words) == len(new.tags) and valid_tags(new.tags)
        for start, end, kind in mentions_of(new.tags):  # every mention, replaced or kept, is a training mention
            assert (kind, new.words[start:end]) in training_mentions
        changed += new != example
    assert changed > 10


def test_token_replace_draws_words_seen_with_the_same_tag(sentences):
    import random
    from distill.augment import token_replace
    resources = Resources.build(sentences.inputs, sentences.labels)
    for index, (words, tags) in enumerate(zip(sentences.inputs[:60], sentences.labels[:60])):
        new = token_replace(Example.of(words, tags), random.Random(index), resources)
        assert all(word in resources.words_by_tag[tag][0] for word, tag in zip(new.words, tags))


def test_mentions_are_read_in_every_scheme():
    assert mentions_of(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == [(0, 2, "PER"), (3, 4, "LOC"), (4, 5, "LOC")]
    assert mentions_of(["S-X", "B-Y", "E-Y", "U-Z", "B-Z", "L-Z"]) == [(0, 1, "X"), (1, 3, "Y"), (3, 4, "Z"),
                                                                      (4, 6, "Z")]


def test_mention_replacement_refuses_plain_tags(sentences):
    pos = [["NNP", "VBD"], ["DT", "NN"]]
    with pytest.raises(DistillError, match="mention replacement needs entity tags") as error:
        list(augmented([["A", "b"], ["c", "d"]], pos, 1, ["mention"], 0))
    assert "\n" not in str(error.value)


def test_registry_refuses_unknown_and_other_task_names_in_one_line():
    with pytest.raises(DistillError) as error:
        check_methods(["mask", "shuffle-all"], "classification")
    message = str(error.value)
    assert "unknown augmenter 'shuffle-all'" in message and "\n" not in message
    assert all(name in message for name in augmenters("classification"))
    with pytest.raises(DistillError, match="tagging-only augmenter 'mention' for classification"):
        check_methods(["mention"], "classification")
    with pytest.raises(DistillError, match="unknown task"):
        register_augmenter("x", task="parsing")


def test_neighbour_replaces_single_sub_token_words_by_their_teacher_neighbours(tiny_classifier_teacher, texts):
    from distill.models import load_teacher
    teacher = load_teacher(tiny_classifier_teacher)
    resources = Resources.build(texts.inputs, texts.labels, teacher)
    assert resources.mask_token == "[MASK]"
    near = resources.neighbours
    assert near and all(len(words) == 10 and word.lower() not in words for word, words in near.items())
    made = list(augmented(texts.inputs[:30], texts.labels[:30], 2, ["neighbour"], 1, resources))
    assert made and made == list(augmented(texts.inputs[:30], texts.labels[:30], 2, ["neighbour"], 1, resources))
    import random
    from distill.augment import neighbour
    for index, original in enumerate(texts.inputs[:30]):
        example = Example.of(original)
        new = neighbour(example, random.Random(index), resources)
        assert all(old == word or word.lower() in near[old] for old, word in zip(example.words, new.words))


def test_a_registered_augmenter_is_used_by_kd(tiny_classifier_teacher, texts, own_registry):
    from distill.distiller import Distiller
    from distill.trainers import Runtime, TrainSettings

    @register_augmenter("exclaim", task="classification")
    def exclaim(example, rng, resources):
        return example.with_words({0: "Zounds"})

    distiller = Distiller(tiny_classifier_teacher, config_for("lstm", embedding_dim=8, hidden_dim=8),
                          settings=TrainSettings(epochs=1), env=Runtime(progress=False), augment=1,
                          augment_methods=["exclaim"])
    result = distiller.fit(str(TRAIN), str(DEV))
    assert 0 < result.summary["synthetic_examples"] <= len(texts)
    assert result.summary["kd"]["augment_methods"] == ["exclaim"]
    assert "zounds" in result.model.words.tokens  # the vocabulary covers the transfer set, synthetic text too


def test_augment_settings_are_checked_before_anything_runs(tiny_classifier_teacher):
    from distill.distillation import TeacherStudentDistill
    from distill.distiller import Distiller
    with pytest.raises(DistillError, match="augment_methods choose how synthetic examples are made"):
        Distiller(tiny_classifier_teacher, "lstm", augment_methods=["mask"])
    with pytest.raises(DistillError, match="augment must be a whole number"):
        Distiller(tiny_classifier_teacher, "lstm", augment=-1)
    with pytest.raises(DistillError, match="tagging-only augmenter 'mention'"):
        Distiller(tiny_classifier_teacher, "lstm", augment=2, augment_methods=["mention"])
    # --min-confidence filters the teacher's labels of synthetic examples as of unlabeled text
    Distiller(tiny_classifier_teacher, "lstm", TeacherStudentDistill(min_confidence=0.6), augment=1)


def test_kd_augment_trains_from_the_cli_and_counts_the_synthetic_examples(tiny_classifier_teacher, texts, tmp_path):
    out = tmp_path / "kd"
    cli("kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", out,
        "--epochs", "1", "--augment", "2", "--cache-dir", tmp_path / "cache")
    summary = json.loads((out / "train_summary.json").read_text())
    assert len(texts) < summary["synthetic_examples"] <= 2 * len(texts)
    assert summary["kd"]["augment"] == 2 and summary["kd"]["augment_methods"] == ["mask", "replace", "ngram"]
    assert summary["train_examples"] == len(texts) + summary["synthetic_examples"]
    again = tmp_path / "again"  # the synthetic examples are the same: the logit cache scores none again
    cli("kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", again,
        "--epochs", "1", "--augment", "2", "--cache-dir", tmp_path / "cache")
    assert json.loads((again / "train_summary.json").read_text())["cached_examples"] == summary["train_examples"]


def test_kd_augments_a_tagger(tiny_tagging_teacher, sentences):
    from distill.distiller import Distiller
    from distill.trainers import Runtime, TrainSettings
    result = Distiller(tiny_tagging_teacher, config_for("lstm-tagger", embedding_dim=8, hidden_dim=8),
                       settings=TrainSettings(epochs=1), env=Runtime(progress=False), augment=1,
                       online_teacher=True).fit(str(NER_TRAIN), str(NER_DEV))
    assert 0 < result.summary["synthetic_examples"] <= len(sentences)
    assert result.summary["kd"]["augment_methods"] == ["mention", "token-replace"]


def test_resume_with_another_augment_is_refused(tiny_classifier_teacher, tmp_path, capsys, monkeypatch):
    from procedures.cli import main
    out = tmp_path / "run"
    args = ["kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV,
            "--output", out, "--epochs", "3", "--augment", "1", "--cache-dir", tmp_path / "cache"]
    interrupted_cli_run(monkeypatch, args, out)
    capsys.readouterr()
    for change in (["--augment", "2"], ["--augment", "1", "--augment-methods", "mask"]):
        with pytest.raises(SystemExit) as refused:
            main([str(a) for a in args[:-4]] + change + ["--cache-dir", str(tmp_path / "cache"), "--resume"])
        err = capsys.readouterr().err
        assert refused.value.code == 2 and "cannot resume with different settings or data (kd.augment" in err, err
    cli(*args, "--resume")
    assert not (out / "resume.pt").exists()
