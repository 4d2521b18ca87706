"""Language models as teachers (distill.models.causal_lm, distill.models.served): a tiny random Llama asked a prompt,
its label scores checked against plain forward passes, and the same model served by `transformers serve` on
127.0.0.1 for the served teacher."""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import torch

from conftest import SAMPLES, cli, sample_texts

KEY = "sk-test-0123456789abcdef"  # what a served teacher's key must never show up as, anywhere
UNLABELED = SAMPLES / "unlabeled_movies.txt"


def refused(args: list, capsys) -> str:
    """nlp-train ARGS must stop with exit 2 and one line; returns it."""
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2, err
    assert err.splitlines()[-1].startswith("error: ") and "Traceback" not in err, err
    return err.splitlines()[-1]


def plain_scores(teacher, texts: list[str]) -> torch.Tensor:
    """Each label's summed log-likelihood after the prompt and text, by one forward pass of each (text, label)
    alone: no shared prefix, no batch, no padding."""
    tokenizer, model = teacher.tokenizer, teacher.model
    scores = torch.zeros(len(texts), len(teacher.prompt.names))
    for row, text in enumerate(texts):
        for column, words in enumerate(teacher.prompt.verbalizers):
            context = tokenizer(teacher.prompt.prefix)["input_ids"] + \
                tokenizer(text, add_special_tokens=False)["input_ids"] + \
                tokenizer(teacher.prompt.suffix, add_special_tokens=False)["input_ids"]
            label = tokenizer(words, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logprobs = torch.log_softmax(model(torch.tensor([context + label])).logits[0].float(), -1)
            scores[row, column] = sum(logprobs[len(context) + k - 1, token] for k, token in enumerate(label))
    return scores


TEXTS = ["a great film", "boring, long and badly acted from start to finish", "fine", "what a lovely day out"]


@pytest.mark.parametrize("settings", [dict(labels="negative,positive"),
                                      dict(labels="negative=bad film,positive=good film", shots=3,
                                           shots_from=str(SAMPLES / "sentiment_train.csv"))])
def test_label_scores_and_calibration_match_plain_forward_passes(tiny_causal_lm, settings):
    from distill.models import load_teacher
    from distill.models.prompt import CONTENT_FREE, prompt_settings
    with prompt_settings(**settings):
        teacher = load_teacher(tiny_causal_lm, device="cpu")
    assert teacher.tokenizer("a b").keys() == {"input_ids", "attention_mask"}
    if settings.get("shots"):
        assert teacher.prompt.prefix.count("\nLabel: ") == 3 and " good film\n\n" in teacher.prompt.prefix
    reference = plain_scores(teacher, TEXTS)
    assert torch.allclose(teacher.label_scores(TEXTS), reference, atol=1e-4)
    calibrated = teacher(texts=TEXTS)
    assert torch.allclose(calibrated, reference - plain_scores(teacher, [CONTENT_FREE]), atol=1e-4)
    from distill.inference import predict_logits
    assert torch.allclose(predict_logits(teacher, TEXTS, batch_size=3).logits, calibrated, atol=1e-4)


def test_prompt_settings_are_checked_in_one_line(tiny_causal_lm, tmp_path, capsys):
    base = ["pseudo-label", "--teacher", tiny_causal_lm, "--input", UNLABELED, "--output",
            tmp_path / "out.jsonl"]
    # was "(--train or --shots-from)": pseudo-label and predict, where alone it is said, have no --train
    assert refused(base, capsys).endswith("needs its label set: give --labels NAME,NAME (or NAME=WORDS,...), or "
                                          "labelled data to take it from (--shots-from FILE)")
    (tmp_path / "no-text.txt").write_text("Label it: {labels}\n")
    assert "holds {text} exactly once" in refused([*base, "--labels", "a,b", "--prompt", tmp_path / "no-text.txt"],
                                                  capsys)
    assert "--shots takes its examples from labelled data" in refused([*base, "--labels", "a,b", "--shots", "2"],
                                                                       capsys)
    assert "is CoNLL (tagging data), but this command or model classifies texts" in refused(
        [*base, "--shots-from", SAMPLES / "ner_train.conll"], capsys)
    (tmp_path / "columns.csv").write_text("sentence,sentiment\nA fine film.,positive\n")
    assert refused([*base, "--shots", "1", "--shots-from", tmp_path / "columns.csv"], capsys) == \
        f"error: {tmp_path / 'columns.csv'}:1: missing column 'text' (columns: sentence, sentiment)"
    (tmp_path / "words.txt").write_text("Is {text} {labels}?")  # a label's words hold "{text}": words, not a slot
    cli(*base, "--labels", "negative={text},positive=good", "--prompt", tmp_path / "words.txt", "--quiet")
    assert (tmp_path / "out.jsonl").exists()
    (tmp_path / "out.jsonl").unlink()
    assert "a language-model teacher's prompt gives each label one set of words, and negative has 2 (bad|awful): " \
           "give one" in refused([*base, "--labels", "negative=bad|awful,positive=good"], capsys)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.part").exists()


@pytest.mark.parametrize("template, shots, message", [
    ("Text: {text}\nLabel: {label}", 0, "{label} is no placeholder of a prompt template ({text}, {labels}, {examples})"),
    ("{examples}{examples}Text: {text}\nLabel:", 2, "a prompt template holds {examples} at most once, found 2"),
    (None, 1000, "--shots 1000: FILE has 240 labelled examples, so the prompt cannot show 1000: give at most 240"),
])
def test_a_prompt_mistake_is_refused_before_any_output(tiny_causal_lm, tmp_path, capsys, template, shots, message):
    """Was: "{label}" (for "{labels}") and a second "{examples}" went to the model as they are written, and --shots
    past the file's examples showed all of them in silence (fewer than asked)."""
    train = SAMPLES / "sentiment_train.csv"
    args = ["pseudo-label", "--teacher", tiny_causal_lm, "--input", UNLABELED, "--output", tmp_path / "out.jsonl",
            "--labels", "negative,positive", "--shots-from", train, "--shots", str(shots or 1)]
    if template is not None:
        (tmp_path / "prompt.txt").write_text(template)
        args += ["--prompt", tmp_path / "prompt.txt"]
    named = f"{tmp_path / 'prompt.txt'}: " if template else ""
    assert refused(args, capsys) == f"error: {named}{message.replace('FILE', str(train))}"
    assert list(tmp_path.iterdir()) == ([tmp_path / "prompt.txt"] if template else [])


def test_a_prompt_file_s_byte_order_mark_is_not_part_of_the_prompt(tmp_path):
    """Was: Notepad's byte-order mark, U+FEFF, began every prompt the model was asked."""
    from distill.models.prompt import build_prompt, prompt_settings
    (tmp_path / "prompt.txt").write_bytes("\ufeffReview: {text}\nSentiment:".encode("utf-8"))
    with prompt_settings(labels="negative,positive", template=str(tmp_path / "prompt.txt")):
        assert build_prompt("teacher").prefix == "Review: "


def test_labels_taken_from_data_are_read_as_written(tmp_path):
    """A label set from labelled data (no --labels) is its labels as they are: was read as --labels text, so the
    label '<=50K' became '<' described as '50K' (then 'was not seen in training', or the file 'has labels that
    FILE has not', of itself)."""
    from distill.models.prompt import build_prompt, prompt_settings
    data = tmp_path / "income.csv"
    data.write_text("text,label\nsenior engineer,>50K\npart-time cashier,<=50K\n")
    with prompt_settings(shots=2, shots_from=str(data)):
        prompt = build_prompt("teacher")
    assert prompt.names == ("<=50K", ">50K") and prompt.verbalizers == (" <=50K", " >50K")
    assert prompt.prefix.count("Label: <=50K\n") == prompt.prefix.count("Label: >50K\n") == 1


def test_two_spellings_of_a_label_in_the_data_are_refused_as_the_data_s(tmp_path):
    """Was: 'labels describes Positive and positive alike', of an option not given."""
    from distill import DistillError
    from distill.models.prompt import build_prompt, prompt_settings
    data = tmp_path / "cased.csv"
    data.write_text("text,label\na moving film,Positive\na fine cast,positive\na dull plot,negative\n")
    with prompt_settings(labels_from=str(data)), pytest.raises(DistillError) as error:
        build_prompt("teacher")
    assert str(error.value) == f"{data}: labels 'Positive' and 'positive' differ only in case, spacing, Unicode " \
                               "form, invisible characters or number format; spell each label one way"


def test_data_of_one_label_is_no_label_set(tiny_causal_lm, tmp_path, capsys):
    """Was: '--labels needs at least two labels, got ['positive']', of an option not given."""
    data = tmp_path / "positives.csv"
    data.write_text("text,label\na moving film,positive\na fine cast,positive\n")
    assert refused(["evaluate", tiny_causal_lm, data, "--output", tmp_path / "m.json"], capsys) == \
        f"error: {data}: has one label only (positive), and a language-model teacher chooses between labels: give " \
        "them all with --labels NAME,NAME,..."
    assert sorted(path.name for path in tmp_path.iterdir()) == ["positives.csv"]


def test_a_tokenizer_that_knows_only_its_special_tokens_is_refused(tiny_causal_lm, tmp_path, capsys):
    """As a transformers classifier's is; was: a RuntimeError traceback from the model (every text and label read
    as no token at all)."""
    folder = shutil.copytree(tiny_causal_lm, tmp_path / "stub")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"].update(vocab={token: index for token, index in tokenizer["model"]["vocab"].items() if index < 3},
                              merges=[])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert refused(["evaluate", folder, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "m.json"], capsys) == \
        f"error: {folder}: cannot load its tokenizer (its vocabulary holds only its 3 special tokens, so every word " \
        "would read as [UNK]); save the tokenizer beside the model: tokenizer.save_pretrained(DIR)"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["stub"]


def test_no_output_overwrites_the_prompt_or_its_examples(tiny_causal_lm, tmp_path, capsys):
    """--prompt and --shots-from are inputs of the command as its data is: an output over one is refused, even
    with --overwrite, in every command that writes a file."""
    shots, prompt = tmp_path / "shots.csv", tmp_path / "prompt.txt"
    shutil.copy(SAMPLES / "sentiment_train.csv", shots)
    prompt.write_text("Classify: {labels}\n\n{examples}Text: {text}\nLabel:")
    before = {path: path.read_bytes() for path in (shots, prompt)}
    llm = ["--shots-from", shots, "--shots", "2", "--prompt", prompt, "--overwrite"]
    for output in (shots, prompt):
        assert "is an input of this command" in refused(
            ["pseudo-label", "--teacher", tiny_causal_lm, "--input", UNLABELED, "--output", output, *llm], capsys)
        assert "is an input of this command" in refused(
            ["evaluate", tiny_causal_lm, SAMPLES / "sentiment_dev.csv", "--output", output, *llm], capsys)
    assert {path: path.read_bytes() for path in (shots, prompt)} == before


def test_a_language_model_teachers_options_without_one_are_refused_by_every_command(tiny_classifier_teacher,
                                                                                    tmp_path, capsys):
    """--labels, --prompt, --shots... are a prompted teacher's: given to a command whose models include none, they
    would be ignored in silence; every command refuses them with the same line, before it reads anything."""
    teacher, data = tiny_classifier_teacher, SAMPLES / "sentiment_dev.csv"
    commands = [["kd", "--teacher", teacher, "--model", "lstm", "--train", data, "--dev", data, "--output",
                 tmp_path / "kd"],
                ["pseudo-label", "--teacher", teacher, "--input", UNLABELED, "--output", tmp_path / "pl.jsonl"],
                ["evaluate", teacher, data, "--output", tmp_path / "eval.json"],
                ["predict", teacher, UNLABELED], ["compare", teacher, teacher, "--data", data]]
    for command in commands:
        for options, named in ((["--labels", "negative,positive"], "--labels is an option"),
                               (["--max-requests", "2", "--shots", "1"], "--shots, --max-requests are options")):
            assert f"{named} of a language-model teacher" in refused([*command, *options], capsys)
    assert not any(tmp_path.iterdir())


def test_prompt_settings_around_no_language_model_are_refused_in_python(tiny_classifier_teacher, tiny_causal_lm,
                                                                         tmp_path):
    """Was: prompt_settings(labels=...) around a call whose models include no language-model teacher was ignored
    in silence in Python, where the command line refused its options."""
    from distill import Distiller, DistillError, SoftLabels, TrainSettings
    from distill.compare import compare_models
    from distill.evaluation import evaluate_model, predict_file
    from distill.models.prompt import prompt_settings
    from distill.pseudo_label import pseudo_label
    teacher, train, data = (tiny_classifier_teacher, str(SAMPLES / "sentiment_train.csv"),
                            str(SAMPLES / "sentiment_dev.csv"))
    soft = tmp_path / "soft.jsonl"
    soft.write_text('{"text": "a fine film", "label": "positive", "confidence": 0.9}\n', encoding="utf-8")
    calls = [lambda: Distiller(teacher, "lstm", settings=TrainSettings(epochs=1)).fit(train, data),
             lambda: Distiller(SoftLabels(soft), "lstm", settings=TrainSettings(epochs=1)).fit(train, data),
             lambda: pseudo_label(teacher, str(UNLABELED), str(tmp_path / "pl.jsonl")),
             lambda: evaluate_model(teacher, data, output=str(tmp_path / "eval.json")),
             lambda: predict_file(teacher, str(UNLABELED)), lambda: compare_models([teacher, teacher], data)]
    for number, call in enumerate(calls):
        with prompt_settings(labels="negative,positive"), pytest.raises(DistillError) as error:
            call()
        whose = "this command is given none" if number == 1 else "no model of this command is one"
        assert str(error.value) == "prompt_settings(labels=...) is a setting of a language-model teacher (a causal " \
                                   f"LM folder, openai:MODEL, systemone:MODEL), and {whose}"
    with prompt_settings(base_url="http://127.0.0.1:1/v1"), pytest.raises(DistillError, match=r"^prompt_settings\("
                                                                            r"base_url=...\) is a setting of a served"):
        predict_file(tiny_causal_lm, str(UNLABELED))
    assert not any(path.name != "soft.jsonl" for path in tmp_path.iterdir())


def test_options_a_language_model_teacher_would_ignore_are_refused(tiny_causal_lm, tmp_path, capsys):
    """A served teacher's options beside a causal LM folder, and --shots-from where neither examples nor labels
    come from it, were accepted and unused."""
    data, labels = SAMPLES / "sentiment_dev.csv", ["--labels", "negative,positive"]
    pseudo = ["pseudo-label", "--teacher", tiny_causal_lm, "--input", UNLABELED, "--output", tmp_path / "pl.jsonl"]
    assert "--base-url, --max-requests are options of a served teacher (openai:MODEL, systemone:MODEL), and no " \
           "model of this command is one" in refused([*pseudo, *labels, "--base-url", "http://127.0.0.1:1/v1",
                                                     "--max-requests", "2"], capsys)
    unused = "--shots-from gives the prompt's --shots examples"
    assert unused in refused([*pseudo, *labels, "--shots-from", data], capsys)
    assert unused in refused(["evaluate", tiny_causal_lm, data, "--shots-from", data], capsys)
    assert unused in refused(["predict", tiny_causal_lm, UNLABELED, *labels, "--shots-from", data], capsys)
    assert not any(tmp_path.iterdir())


def test_use_export_beside_a_language_model_is_refused_in_the_kinds_words(tiny_causal_lm, tmp_path, capsys):
    """It said the export was not one of the language model and told the user to export it, which export
    refuses."""
    line = refused(["pseudo-label", "--teacher", tiny_causal_lm, "--labels", "negative,positive", "--input",
                    UNLABELED, "--output", tmp_path / "pl.jsonl", "--use-export", tmp_path], capsys)
    assert line == f"error: {tiny_causal_lm}: pseudo-label --use-export does not take a causal language model; it " \
        "is asked a prompt for every text, not a model distill saves: distil it with kd first, then use that student"
    assert not (tmp_path / "pl.jsonl").exists()


def test_scoring_a_language_model_on_its_prompts_examples_is_warned_of(tiny_causal_lm, tmp_path, caplog):
    """Its examples are in every prompt: scored there, it reads better than it is, as a model on its train data."""
    from distill.evaluation import evaluate_model
    from distill.models.prompt import prompt_settings
    data, copy = SAMPLES / "sentiment_dev.csv", tmp_path / "dev-copy.csv"
    shutil.copy(data, copy)
    for shots_from, warned in ((copy, True), (SAMPLES / "sentiment_train.csv", False)):
        caplog.clear()
        with prompt_settings(shots=1, shots_from=str(shots_from), labels_from=str(data)), \
                caplog.at_level(logging.WARNING, logger="distill"):
            result = evaluate_model(tiny_causal_lm, str(data), progress=False, device="cpu")
        assert (result.get("learnt_from") == "shots") == warned
        assert ("where the few-shot examples of" in caplog.text) == warned, caplog.text


def test_a_language_model_without_its_tokenizer_is_one_line(tiny_causal_lm, tmp_path, capsys):
    """As a transformers classifier's: the vocabulary files are checked before transformers is asked."""
    from distill.models.hub_files import VOCABULARY_FILES
    copy = tmp_path / "llm"
    shutil.copytree(tiny_causal_lm, copy)
    for name in VOCABULARY_FILES:
        (copy / name).unlink(missing_ok=True)
    assert "cannot load its tokenizer (none of tokenizer.json" in refused(
        ["evaluate", copy, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "m.json"], capsys)


def test_a_student_starts_from_a_language_models_embeddings_as_kd_does(tiny_causal_lm, tmp_path):
    """`student --embeddings-from-teacher LLM` takes the label set from --train, as `kd --teacher LLM` does (it
    asked for --labels, which `student` has not)."""
    cli("--threads", "1", "student", "--model", "lstm", "--hidden-dim", "8", "--embeddings-from-teacher",
        tiny_causal_lm, "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
        "--epochs", "1", "--output", tmp_path / "student", "--quiet")
    assert (tmp_path / "student" / "train_summary.json").is_file()


def test_a_transformer_student_copying_a_language_models_layers_names_it(tiny_causal_lm, tmp_path, capsys):
    """kd --model transformer (its layers copied from the teacher) with a causal LM named it 'a multi-task
    teacher'."""
    line = refused(["kd", "--teacher", tiny_causal_lm, "--labels", "negative,positive", "--model", "transformer",
                    "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output",
                    tmp_path / "run", "--quiet"], capsys)
    assert "the teacher is a language model asked a prompt, whose layers distill does not copy: give a pretrained " \
           "encoder (--encoder minilm-l6)" in line, line
    assert not (tmp_path / "run").exists()


def test_the_cache_key_holds_the_prompt_and_the_labels(tiny_causal_lm, tmp_path):
    from distill.models import load_teacher
    from distill.models.prompt import prompt_settings
    (tmp_path / "prompt.txt").write_text("Review: {text}\nSentiment:")
    prints = set()
    for settings in (dict(labels="negative,positive"), dict(labels="positive,negative"),
                     dict(labels="negative=bad,positive=good"), dict(labels="negative,positive",
                                                                     template=str(tmp_path / "prompt.txt"))):
        with prompt_settings(**settings):
            prints.add(load_teacher(tiny_causal_lm, device="cpu").fingerprint())
    assert len(prints) == 4


def test_a_system_one_cache_key_holds_the_question_it_asks(tmp_path):
    """Was: a System One request asks the template's words before the text (the instruction), which the cache key
    left out: the default template with {examples} dropped (the prompt's text unchanged) reused the cached answers
    to the other question. The key is the same in the run's record as in the teacher's."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    from distill.models import load_teacher
    from distill.models.prompt import build_prompt, prompt_settings
    from distill.models.served import served_fingerprint
    (tmp_path / "plain.txt").write_text("Classify the text as one of: {labels}.\n\nText: {text}\nLabel:")
    prints, questions = set(), set()
    for template in (None, str(tmp_path / "plain.txt")):
        with prompt_settings(labels="negative,positive", template=template, base_url="http://127.0.0.1:9/v1"):
            teacher = load_teacher("systemone:m", device="cpu")
            assert teacher.fingerprint() == served_fingerprint("systemone:m")
            prints.add(teacher.fingerprint())
            questions.add(build_prompt("systemone:m").instruction)
    assert len(questions) == 2 and len(prints) == 2


def test_causal_lm_teaches_pseudo_label_kd_evaluate_compare_and_ensembles(tiny_causal_lm, tiny_hf_classifier,
                                                                          tmp_path, capsys):
    pseudo, cache = tmp_path / "pseudo.jsonl", tmp_path / "cache"
    cli("pseudo-label", "--teacher", tiny_causal_lm, "--labels", "negative,positive", "--input",
        UNLABELED, "--output", pseudo, "--min-confidence", "0.5001", "--cache-dir", cache, "--quiet")
    records = [json.loads(line) for line in pseudo.read_text().splitlines()]
    lines = len(UNLABELED.read_text().splitlines())
    assert records and all(r["confidence"] >= 0.5001 for r in records) and len(records) < lines  # filtered
    run = tmp_path / "student"
    cli("kd", "--teacher", tiny_causal_lm, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev",
        SAMPLES / "sentiment_dev.csv", "--unlabeled", pseudo, "--output", run, "--epochs", "1", "--embedding-dim", "16",
        "--hidden-dim", "16", "--cache-dir", cache, "--quiet")
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["cached_examples"] >= len(records)  # kd took the labels' words from --train, the same teacher
    cli("evaluate", tiny_causal_lm, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "eval.json", "--quiet")
    assert json.loads((tmp_path / "eval.json").read_text())["examples"] > 0
    capsys.readouterr()
    cli("compare", tiny_causal_lm, tiny_hf_classifier, "--data", SAMPLES / "sentiment_dev.csv", "--limit", "8")
    assert "CausalLMTeacher" not in capsys.readouterr().out.splitlines()[0]
    both = tmp_path / "both.jsonl"
    cli("pseudo-label", "--teacher", tiny_causal_lm, "--teacher", tiny_hf_classifier, "--labels", "negative,positive",
        "--input", UNLABELED, "--output", both, "--cache-dir", cache, "--quiet")
    assert len(both.read_text().splitlines()) == lines


def test_a_causal_lm_does_not_tag(tiny_causal_lm, tmp_path, capsys):
    line = refused(["kd", "--teacher", tiny_causal_lm, "--model", "lstm-tagger", "--train", SAMPLES / "ner_train.conll",
                    "--dev", SAMPLES / "ner_dev.conll", "--output", tmp_path / "run", "--epochs", "1"], capsys)
    assert "ner_train.conll: is CoNLL (tagging data), but this command or model classifies texts" in line


# --- a served teacher -------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(tiny_causal_lm, tmp_path_factory):
    """`transformers serve` of the tiny Llama on 127.0.0.1: its base URL (skipped, with the reason, where it
    cannot start: no serving extra, or no answer in time)."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    from transformers.utils.import_utils import is_serve_available
    if not is_serve_available():
        pytest.skip("transformers serve needs fastapi, uvicorn, pydantic and openai (pip install -e .[llm])")
    executable = shutil.which("transformers", path=os.path.dirname(sys.executable))
    if executable is None:
        pytest.skip("no transformers command beside this Python")
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen([executable, "serve", tiny_causal_lm, "--host", "127.0.0.1", "--port", str(port),
                                   "--device", "cpu"], stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.skip(f"transformers serve did not start: {log.read_text()[-300:]}")
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(30)


def no_key_in(*places: Path | str) -> None:
    """The key appears in none of these texts, files or folders (every file under them)."""
    for place in places:
        if isinstance(place, Path) and place.exists():
            files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
            for file in files:
                assert KEY.encode() not in file.read_bytes(), file
        else:
            assert KEY not in str(place)


def test_a_served_model_without_logprobs_gives_hard_labels(served, tiny_causal_lm, tmp_path, capsys, caplog,
                                                           monkeypatch):
    """transformers serve's chat endpoint ignores `logprobs`: its answers are the labels, one-hot, said once."""
    monkeypatch.setenv("DISTILL_API_KEY", KEY)
    output, cache, texts = tmp_path / "out.jsonl", tmp_path / "cache", tmp_path / "in.txt"
    texts.write_text("".join(UNLABELED.read_text().splitlines(keepends=True)[:12]))
    cli("pseudo-label", "--teacher", f"openai:{tiny_causal_lm}", "--base-url", served, "--labels", "negative,positive",
        "--input", texts, "--output", output, "--cache-dir", cache, "--logits", "--quiet",
        "--batch-size", "4")
    printed = capsys.readouterr()
    said = caplog.text + printed.err + printed.out
    assert said.count("returns no log-probabilities") == 1 and "requests (and 1 for calibration)" in said
    records = [json.loads(line) for line in output.read_text().splitlines()]
    for record in records:  # a label named: one-hot; none (a random model's answer): uniform
        assert sorted(record["logits"]) in ([-1e4, 0.0], [0.0, 0.0])
    no_key_in(said, output, cache, Path(f"{output}.config.yaml"), tmp_path)


def test_a_served_decision_endpoint_gives_distributions_and_resumes_exactly(served, tiny_causal_lm, tmp_path,
                                                                            monkeypatch, capsys):
    """/v1/systemone answers with a probability per label; a run stopped mid-way resumes without asking any
    text twice, to the records of a run never stopped."""
    from distill.models.served import ServedTeacher
    monkeypatch.setenv("DISTILL_API_KEY", KEY)
    asked: list[str] = []
    real_ask = ServedTeacher._ask

    def counted(self, text):
        asked.append(text)
        if stop_after and len(asked) == stop_after:
            raise KeyboardInterrupt
        return real_ask(self, text)

    monkeypatch.setattr(ServedTeacher, "_ask", counted)
    texts = [f"text number {n} was {'good' if n % 2 else 'bad'}" for n in range(10)]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    args = ["pseudo-label", "--teacher", f"systemone:{tiny_causal_lm}", "--base-url", served, "--labels",
            "negative=a negative text,positive=a positive text", "--input", tmp_path / "in.txt", "--batch-size", "2",
            "--max-requests", "1", "--quiet"]
    stop_after = 0
    cli(*args, "--output", tmp_path / "whole.jsonl", "--cache-dir", tmp_path / "cache1")
    whole = (tmp_path / "whole.jsonl").read_text()
    assert len(asked) == 11 and len(whole.splitlines()) == 10  # 1 content-free request, 1 per text
    assert all(0.5 <= json.loads(line)["confidence"] < 1 for line in whole.splitlines())
    asked.clear()
    stop_after = 6  # the content-free request, 2 batches of 2 texts, then stopped in the third
    from procedures.cli import main
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in [*args, "--output", tmp_path / "out.jsonl", "--cache-dir", tmp_path / "cache2"]])
    assert stopped.value.code == 130
    first = list(asked)
    asked.clear()
    stop_after = 0
    cli(*args, "--output", tmp_path / "out.jsonl", "--cache-dir", tmp_path / "cache2", "--resume")
    assert (tmp_path / "out.jsonl").read_text() == whole
    assert not set(first[1:5]) & set(asked) and len(asked) == 1 + 10 - 4  # calibration again; no text asked twice
    no_key_in(capsys.readouterr().err, tmp_path)


@contextlib.contextmanager
def serving(handler: type):
    """`handler` served on a free local port while the block runs; the endpoint's base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()


class ErrorServer(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status of `status` (and counts them): a server that refuses."""

    status, seen, authorizations = 429, [0], []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.seen[0] += 1
        self.authorizations.append(self.headers.get("Authorization"))
        body = json.dumps({"error": {"message": f"refused with {self.status}", "type": "error"}}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("retry-after-ms", "1")  # the client waits 1 ms between retries
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("status,said", [(401, "request failed: the server refused the key (401"),
                                         (429, "kept refusing with 429"), (503, "kept failing with 503")])
def test_a_refusing_server_stops_the_run_in_one_line_without_the_key(status, said, tmp_path, capsys, monkeypatch):
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    from distill.models import served as served_module
    monkeypatch.setenv("DISTILL_API_KEY", KEY)
    monkeypatch.setattr(served_module, "RETRIES", 2)
    handler = type("Refusing", (ErrorServer,), {"status": status, "seen": [0], "authorizations": []})
    with serving(handler) as url:
        line = refused(["pseudo-label", "--teacher", "openai:some-model", "--base-url",
                        url, "--labels", "negative,positive", "--input",
                        UNLABELED, "--output", tmp_path / "out.jsonl", "--cache-dir",
                        tmp_path / "cache"], capsys)
    assert said in line and "openai:some-model at http://127.0.0.1" in line, line
    assert handler.authorizations[0] == f"Bearer {KEY}"  # sent to the server, and only there
    assert handler.seen[0] == (1 if status == 401 else 3)  # 429 and 5xx retried RETRIES times
    no_key_in(line, tmp_path)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.part").exists()


class ScriptedServer(http.server.BaseHTTPRequestHandler):
    """Answers the n-th request (from 0) with `answer(n, path)`: a server whose answers are wrong in one way."""

    answer = staticmethod(lambda n, path: {})
    seen = [0]

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(self.answer(self.seen[0], self.path)).encode()  # NaN as JavaScript's NaN, as a server may
        self.seen[0] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def chat_answer(logprob: float | None) -> dict:
    """An OpenAI chat completion answering "positive", with first-token log-probabilities unless `logprob` is None."""
    top = None if logprob is None else {"content": [{"token": " positive", "logprob": logprob, "bytes": None,
                                                     "top_logprobs": [{"token": " positive", "logprob": logprob,
                                                                       "bytes": None},
                                                                      {"token": " negative", "logprob": -1.5,
                                                                       "bytes": None}]}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": top,
                         "message": {"role": "assistant", "content": "positive"}}]}


def decision_answer(negative: float, positive: float) -> dict:
    return {"answers": {"label": {"probabilities": {"negative": negative, "positive": positive}}}}


@pytest.mark.parametrize("api, answer, said", [
    ("systemone", lambda n, path: decision_answer(float("nan"), float("nan")), "a probability from 0 to 1 per label"),
    ("systemone", lambda n, path: decision_answer(5.0, 5.0), "a probability from 0 to 1 per label"),
    ("systemone", lambda n, path: decision_answer(0.0, 0.0), "a probability from 0 to 1 per label, some above 0"),
    ("openai", lambda n, path: chat_answer(float("nan")), "gives the log-probability nan, which no probability has"),
    ("openai", lambda n, path: chat_answer(2.0), "gives the log-probability 2.0, which no probability has"),
    # calibration with log-probabilities and the texts without, or the other way round: labels turned around
    ("openai", lambda n, path: chat_answer(-0.3 if n == 0 else None), "log-probabilities with some answers and none"),
    ("openai", lambda n, path: chat_answer(None if n == 0 else -0.3), "log-probabilities with some answers and none"),
], ids=["nan", "above-one", "all-zero", "nan-logprob", "positive-logprob", "calibration-only", "texts-only"])
def test_a_servers_impossible_answers_stop_the_run_in_one_line(api, answer, said, tmp_path, capsys):
    """NaN probabilities were written as the JSONL's NaN (passing --min-confidence), and answers with and without
    log-probabilities mixed gave inverted labels, in silence."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    handler = type("Scripted", (ScriptedServer,), {"answer": staticmethod(answer), "seen": [0]})
    with serving(handler) as url:
        line = refused(["pseudo-label", "--teacher", f"{api}:m", "--base-url", url,
                        "--labels", "negative,positive", "--input", UNLABELED, "--output", tmp_path / "out.jsonl",
                        "--no-cache", "--max-requests", "1"], capsys)
    assert f"{api}:m at http://127.0.0.1" in line and said in line, line
    assert not (tmp_path / "out.jsonl").exists()


def test_compare_asks_a_served_model_each_text_once(tmp_path, capsys):
    """Each timing round sent every text again (141 requests for 20 texts): its scoring pass is now its timing."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    handler = type("Scripted", (ScriptedServer,), {"answer": staticmethod(lambda n, path: decision_answer(0.3, 0.7)),
                                                   "seen": [0]})
    with serving(handler) as url:
        cli("compare", "systemone:m", "--base-url", url, "--labels",
            "negative,positive", "--data", SAMPLES / "sentiment_dev.csv", "--limit", "6", "--rounds", "3")
    assert "score on the first 6 of" in capsys.readouterr().out
    assert handler.seen[0] <= 6 + 1  # each text once, and the content-free calibration text


def test_kd_refuses_the_layer_terms_of_a_served_teacher_before_any_request(tmp_path, capsys):
    """They were refused after the teacher had scored dev and train (every text a request), and named a served
    model 'a transformers classifier'."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    handler = type("Scripted", (ScriptedServer,), {"answer": staticmethod(lambda n, path: chat_answer(-0.3)),
                                                   "seen": [0]})
    with serving(handler) as url:
        line = refused(["kd", "--teacher", "openai:m", "--base-url", url,
                        "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev",
                        SAMPLES / "sentiment_dev.csv", "--random-embeddings", "--hidden-weight", "1", "--cache-dir", tmp_path / "c",
                        "--output", tmp_path / "kd"], capsys)
    assert "the teacher must be distill's transformer teacher or a transformer student, not openai:m " \
           "(ServedTeacher)" in line
    assert handler.seen[0] == 0 and not (tmp_path / "kd").exists()


def test_an_openai_teacher_refuses_labels_whose_words_begin_alike_before_any_request(tmp_path, capsys):
    """Scored by the answer's first token, 'very bad' and 'very good' got the same score for every text (a
    uniform teacher, every request paid for); a System One question names each option whole, so it takes them."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    handler = type("Scripted", (ScriptedServer,), {"answer": staticmethod(lambda n, path: chat_answer(-0.3)),
                                                   "seen": [0]})
    with serving(handler) as url:
        line = refused(["pseudo-label", "--teacher", "openai:m", "--base-url",
                        url, "--labels", "negative=Very bad,positive=very good",
                        "--input", UNLABELED, "--output", tmp_path / "out.jsonl"], capsys)
    assert line == "error: openai:m: labels negative and positive begin with the same word ('very'), and an openai: " \
                   "teacher scores a label by its answer's first token, which cannot tell them apart: give them " \
                   "distinct first words (--labels NAME=WORDS,...)"
    assert handler.seen[0] == 0 and list(tmp_path.iterdir()) == []
    from distill.models.prompt import prompt_settings
    from distill.models.served import load_served_teacher
    with prompt_settings(labels="negative=very bad,positive=very good", base_url="http://127.0.0.1:9/v1"):
        assert load_served_teacher("systemone:m").prompt.names == ("negative", "positive")


def test_student_refuses_a_served_teacher_for_its_embeddings_in_the_kinds_words(tmp_path, capsys, monkeypatch):
    """It pointed at --base-url, then --random-embeddings: options `student` does not have."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    line = refused(["student", "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev",
                    SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "s", "--embeddings-from-teacher",
                    "systemone:m"], capsys)
    assert line == "error: systemone:m: student --embeddings-from-teacher does not take a served language model; it " \
        "is a model behind an endpoint, with no weights here to start a student's embeddings from: give a teacher " \
        "folder (a fine-tuned teacher, a transformers classifier or a causal LM)"
    assert not (tmp_path / "s").exists()


def test_kd_refuses_a_served_teacher_for_its_embeddings_in_the_kinds_words(tmp_path, capsys):
    """kd starts a word student's embeddings from its teacher's unless told not to: it named the class
    ("the teacher (ServedTeacher) has no sub-word embeddings"), where the table names the kind."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    line = refused(["kd", "--teacher", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--labels",
                    "negative,positive", "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev",
                    SAMPLES / "sentiment_dev.csv", "--cache-dir", tmp_path / "c", "--output", tmp_path / "kd"], capsys)
    assert line == "error: openai:m: kd without --random-embeddings does not take a served language model; it is a " \
        "model behind an endpoint, with no weights here to start a student's embeddings from: give a teacher folder " \
        "(a fine-tuned teacher, a transformers classifier or a causal LM), or use --random-embeddings"
    assert list(tmp_path.iterdir()) == []


def test_a_dead_endpoint_and_a_missing_base_url_are_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    from distill.models import served as served_module
    monkeypatch.setattr(served_module, "RETRIES", 0)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    base = ["pseudo-label", "--teacher", "openai:some-model", "--labels", "negative,positive", "--input",
            UNLABELED, "--output", tmp_path / "out.jsonl", "--cache-dir", tmp_path / "cache"]
    assert "needs its endpoint: give --base-url" in refused(base, capsys)
    line = refused([*base, "--base-url", f"http://127.0.0.1:{free_port()}/v1"], capsys)
    assert "cannot be reached" in line


def test_label_logprobs_read_an_openai_answer():
    """The log-probabilities of a chat answer's first token (the OpenAI format, as vLLM and hosted APIs return
    it; no server here returns them) give each label the log-sum of the tokens that begin its words."""
    from distill.models.served import answered_label, label_logprobs
    top = [(" positive", -0.2), ("pos", -2.0), ("Negative", -1.9), ("The", -3.0)]
    scores = label_logprobs(top, [" negative", " positive", " neutral"])
    assert scores[0] == pytest.approx(-1.9) and scores[2] == pytest.approx(-3.0)  # neutral: the lowest listed
    assert scores[1] == pytest.approx(torch.logsumexp(torch.tensor([-0.2, -2.0]), 0).item())
    assert answered_label(" Positive.", [" negative", " positive"]) == 1
    assert answered_label("maybe", [" negative", " positive"]) is None


def test_kd_distils_a_served_model(served, tiny_causal_lm, tmp_path, capsys):
    """A served teacher in kd: its scores of the training texts are the student's targets; it has no weights to
    start a student's embeddings from, said in one line."""
    rows = SAMPLES.joinpath("sentiment_train.csv").read_text().splitlines()
    negative, positive = [[row for row in rows if row.endswith(f",{label}")] for label in ("negative", "positive")]
    (tmp_path / "train.csv").write_text("\n".join(rows[:1] + negative[:4] + positive[:4]) + "\n")
    (tmp_path / "dev.csv").write_text("\n".join(rows[:1] + negative[-3:] + positive[-3:]) + "\n")
    args = ["kd", "--teacher", f"systemone:{tiny_causal_lm}", "--base-url", served, "--model", "lstm", "--train",
            tmp_path / "train.csv", "--dev", tmp_path / "dev.csv", "--epochs", "1", "--embedding-dim", "8",
            "--hidden-dim", "8", "--cache-dir", tmp_path / "cache", "--quiet"]
    said = refused([*args, "--output", tmp_path / "refused"], capsys)
    assert "kd without --random-embeddings does not take" in said and said.endswith("or use --random-embeddings")
    cli(*args, "--output", tmp_path / "student", "--random-embeddings")
    summary = json.loads((tmp_path / "student" / "train_summary.json").read_text())
    assert summary["teacher"] == f"systemone:{tiny_causal_lm}" and 0 <= summary["teacher_dev"]["accuracy"] <= 1


@pytest.mark.parametrize("state", ["missing", "broken"])
def test_a_served_teacher_without_a_working_openai_client_names_the_extra(state, tmp_path, capsys, monkeypatch):
    """An openai client installed but failing at its import (a broken install, a missing libssl) was said to be
    missing: 'pip install openai', of what is there; and the extra was named otherwise than the others are."""
    from conftest import broken_package
    if state == "broken":
        broken_package(monkeypatch, tmp_path / "site", "openai")
    else:
        monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    line = refused(["predict", "openai:m", UNLABELED, "--base-url", "http://127.0.0.1:9/v1", "--labels",
                    "negative,positive"], capsys)
    said = "error: a served teacher needs the openai package: pip install 'distill[llm]'"
    assert line == said if state == "missing" else line == (
        f"{said} (openai is installed, but its import fails: ImportError: libdep.so.1: cannot open shared object "
        "file)"), line
