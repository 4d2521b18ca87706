"""Shared fixtures and helpers: tiny random encoders (no download), tiny trained teachers and a student on the
samples, and nlp-train run in-process or in a child process."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
SMALL_LSTM = ["--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--quiet"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """A test that runs `nlp-train --threads N` in-process must not leave N threads to the next ones
    (2 threads on a busy 2-core machine made a later test 20x slower)."""
    yield
    torch.set_num_threads(1)


def sample_texts() -> list[str]:
    with open(SAMPLES / "sentiment_train.csv", newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    words = [line.split()[0] for line in (SAMPLES / "ner_train.conll").read_text().splitlines()
             if line.strip() and not line.startswith("-DOCSTART-")]
    return texts + [" ".join(words[i:i + 20]) for i in range(0, len(words), 20)]


def tiny_encoder(folder: Path, vocab_size: int, lowercase: bool, seed: int, model_for) -> str:
    """A WordPiece vocabulary of the samples and a random encoder, `model_for(vocab_size)`, in `folder`.

    The vocabularies are files (tests/data/wordpiece-SIZE-CASING.txt), not trained here: the `tokenizers` trainer
    breaks ties through a randomly seeded hash map, so about one process in eight found another set of sub-words
    (`##ey` or `##eye`), an other tiny encoder and other numbers (the digest test failed so). Each file is that
    trainer's most frequent answer, `BertWordPieceTokenizer(lowercase=...).train_from_iterator(sample_texts(),
    vocab_size=SIZE, min_frequency=1)`, written as the special tokens, then the rest sorted."""
    from transformers import BertTokenizerFast

    casing = "uncased" if lowercase else "cased"
    vocabulary = Path(__file__).parent / "data" / f"wordpiece-{vocab_size}-{casing}.txt"
    (folder / "vocab.txt").write_text(vocabulary.read_text(encoding="utf-8"), encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=lowercase)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    model_for(tokenizer.vocab_size).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> str:
    """A randomly initialised 2-layer DistilBERT and a WordPiece vocabulary trained on the samples."""
    from transformers import DistilBertConfig, DistilBertModel
    return tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"), 600, True, 0, lambda size: DistilBertModel(
        DistilBertConfig(vocab_size=size, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128)))


@pytest.fixture(scope="session")
def tiny_other_encoder_dir(tmp_path_factory) -> str:
    """A second tiny random encoder unlike the first: a 3-layer BERT of width 24 with a smaller,
    cased WordPiece vocabulary (a student whose tokenizer is not the teacher's)."""
    from transformers import BertConfig, BertModel
    return tiny_encoder(tmp_path_factory.mktemp("tiny-other-encoder"), 400, False, 1, lambda size: BertModel(
        BertConfig(vocab_size=size, hidden_size=24, num_hidden_layers=3, num_attention_heads=2, intermediate_size=48,
                   max_position_embeddings=128)))


@pytest.fixture(scope="session")
def tiny_hf_classifier(tmp_path_factory) -> str:
    """A folder as `save_pretrained` writes one for a transformers classifier and its tokenizer: a tiny random
    DistilBertForSequenceClassification with the sentiment samples' labels (a teacher without a model card)."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    folder = tmp_path_factory.mktemp("hf-classifier") / "sentiment"
    folder.mkdir()
    labels = {"id2label": {0: "negative", 1: "positive"}, "label2id": {"negative": 0, "positive": 1}}
    return tiny_encoder(folder, 600, True, 0, lambda size: DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=size, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64, **labels)))


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory) -> str:
    """A folder of a tiny random LlamaForCausalLM and a byte-level BPE tokenizer trained on the samples: no
    token_type_ids (a causal model takes none), a chat template (`transformers serve` renders chats with it)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    folder = tmp_path_factory.mktemp("causal-lm") / "tiny-llama"
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(sample_texts() + ["Label: negative positive N/A Text:"], vocab_size=400, min_frequency=1,
                            special_tokens=["<pad>", "<s>", "</s>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>", model_input_names=["input_ids", "attention_mask"])
    tokenizer.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}assistant:{% endif %}")
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                 bos_token_id=1, eos_token_id=2, pad_token_id=0)).save_pretrained(folder)
    return str(folder)


def config_for(name: str, **settings):
    """Student `name`'s config with those of `settings` it has (tests share one set of tiny sizes)."""
    from dataclasses import fields

    from distill.models.registry import student_config, student_entry
    own = {f.name for f in fields(student_entry(name).cls.config_class)}
    return student_config(name, **{k: v for k, v in settings.items() if k in own})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked; tests start their servers on it)."""
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cli(*args: str) -> None:
    """Run nlp-train in-process; raise if it does not exit with status 0."""
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    assert exit_info.value.code == 0, f"nlp-train {' '.join(map(str, args))} exited {exit_info.value.code}"


def interrupt_evaluation(monkeypatch, call: int = 2) -> list:
    """Make training's `call`-th dev evaluation (that of epoch `call`) raise KeyboardInterrupt, as a
    Ctrl-C there would, leaving resume state from the epoch before; returns the list that counts the
    evaluations. Later ones run as usual."""
    import distill.training
    real_evaluate, calls = distill.training.evaluate, []

    def evaluate_then_interrupt(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(distill.training, "evaluate", evaluate_then_interrupt)
    return calls


def interrupted_cli_run(monkeypatch, args: list, output: Path) -> None:
    """`nlp-train ARGS` stopped by a Ctrl-C at epoch 2's evaluation: exit 130 and `output`'s resume state left;
    later evaluations run as usual."""
    import distill.training
    from procedures.cli import main
    real_evaluate = distill.training.evaluate
    interrupt_evaluation(monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    assert stopped.value.code == 130 and (Path(output) / "resume.pt").exists()
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)


@pytest.fixture(scope="session")
def tiny_classifier_teacher(tiny_encoder_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("teacher-cls") / "teacher"
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "2",
        "--encoder-lr", "1e-3", "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
        "--output", out, "--quiet", "--max-length", "64")
    return str(out)


@pytest.fixture(scope="session")
def tiny_tagging_teacher(tiny_encoder_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("teacher-tag") / "teacher"
    cli("teacher", "--task", "tagging", "--encoder", tiny_encoder_dir, "--epochs", "2", "--encoder-lr", "1e-3",
        "--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--output", out, "--quiet",
        "--max-length", "16")
    return str(out)


# --- the command line in-process and in a child process, and the inputs its tests share ----------------------

def run_main(capsys, *args) -> tuple[int, str]:
    """Run nlp-train in-process; return its exit status and stderr."""
    status, _, err = run_main_printed(capsys, *args)
    return status, err


def run_main_printed(capsys, *args) -> tuple[int, str, str]:
    """Run nlp-train in-process; return its exit status, stdout and stderr."""
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def nlp_train(*args, **kwargs) -> subprocess.Popen:
    """nlp-train in a child process (one thread, so runs are bit-for-bit comparable)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen([sys.executable, "-m", "procedures.cli", "--threads", "1", *map(str, args)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory) -> str:
    """A small LSTM sentiment student trained for one epoch (one per test module)."""
    out = tmp_path_factory.mktemp("student") / "lstm"
    cli("student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", out)
    return str(out)


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def student_on(train: Path, out: Path) -> list:
    return ["student", *SMALL_LSTM, "--train", train, "--dev", DEV, "--output", out]


def with_option(args: list, option: str, value) -> list:
    """`args` with `option` set to `value`: replaced where given (an option may be given once), else added."""
    args = list(args)
    names = list(map(str, args))
    if option in names:
        args[names.index(option) + 1] = value
        return args
    return args + [option, value]


def tagger_on(train: Path, out: Path) -> list:
    return ["student", "--model", "lstm-tagger", "--quiet", "--train", train, "--dev", SAMPLES / "ner_dev.conll",
            "--output", out]


def kd_with(teacher: str, out: Path, *extra) -> list:
    return ["kd", "--teacher", teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", out, *extra]


def dev_metrics(out: Path) -> list:
    return [record["dev"] for record in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def interrupted_in_epoch_2(capsys, monkeypatch, *args) -> list:
    """Run nlp-train ARGS and press Ctrl-C during epoch 2's evaluation, so the output holds resume
    state after epoch 1; returns ARGS."""
    import distill.training
    real_evaluate = distill.training.evaluate
    interrupt_evaluation(monkeypatch)
    assert run_main(capsys, *args)[0] == 130
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)
    output = Path(args[list(map(str, args)).index("--output") + 1])
    assert (output / "resume.pt").exists()
    return list(args)


def snapshot(path: Path) -> dict:
    """Every file under `path` (or the file itself) with its bytes: to prove nothing changed."""
    path = Path(path)
    if path.exists() and not path.is_dir() and not path.is_file():
        return {str(path): "not a regular file"}  # a pipe: reading it would block
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): f.read_bytes() for f in files}


def broken_package(monkeypatch, folder: Path, name: str) -> None:
    """`name` installed but failing at its import, as a package does whose dependency is missing or of another
    version: a package of that name first on the path, whose import raises ImportError (the real one, if
    imported already, is out of sys.modules until the test ends)."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text("raise ImportError('libdep.so.1: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)


def copy_of(source: str | Path, tmp: Path, name: str) -> Path:
    source = Path(source)
    target = tmp / name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target
