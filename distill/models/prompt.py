"""What a language-model teacher asks: the prompt, the label set and its words, and the few-shot examples.

A causal language model (`distill.models.causal_lm`) or a served model (`distill.models.served`) teaches
without training data of its own: it is asked a prompt, and each label is scored by how likely the model
finds the label's words (its *verbalizer*) right after it. What they need besides the model comes from the
command's options (``--labels``, ``--prompt``, ``--shots``, ``--shots-from``, ``--base-url``,
``--max-requests``) through `prompt_settings`, a context the command (or a Python caller) sets around its
work, so that such a teacher loads wherever a teacher directory loads, by its name alone.

The template (``--prompt FILE``, default `DEFAULT_TEMPLATE`) holds ``{text}`` once, where each text goes, and
may hold ``{labels}`` (the labels' words, comma-separated) and ``{examples}`` (the few-shot examples). Each
example is written as the template's part from ``{examples}`` to its end is, with the example's text and its
label's words after it. Everything before ``{text}`` is the same for every text: a causal model computes it
once per batch. A label's words are its description (``--labels negative=bad,positive=good``: ``bad`` and
``good``) or its name, after a space unless the template ends in one.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

from distill.data import DataOptions
from distill.errors import DistillError, option

DEFAULT_TEMPLATE = "Classify the text as one of: {labels}.\n\n{examples}Text: {text}\nLabel:"
CONTENT_FREE = "N/A"  # the content-free input of contextual calibration (Zhao et al. 2021)
SERVED_PREFIXES = ("openai:", "systemone:")  # `distill.models.served`: a model behind an HTTP endpoint
PLACEHOLDERS = ("{text}", "{labels}", "{examples}")
PLACEHOLDER = re.compile(r"\{(\w+)\}")  # a word in braces: meant as a placeholder


@dataclass(frozen=True)
class PromptSettings:
    """What a language-model teacher is asked, as the command's options give it (`prompt_settings`).

    ``labels``: the ``--labels`` text, or a list of one label each (`distill.label_names.parse_labels`);
    ``shots_from``: labelled data (kd's --train, else --shots-from) that the ``shots`` few-shot examples are drawn
    from; ``labels_from``: labelled data whose labels are the label set when ``labels`` is not given (kd's --train,
    evaluate's data; default:
    ``shots_from``); ``template``: a prompt file; ``base_url`` and ``max_requests``: a served model's endpoint
    and how many requests it has at once."""

    labels: str | list[str] | None = None
    shots_from: str | None = None
    labels_from: str | None = None
    data: DataOptions = field(default_factory=DataOptions)
    template: str | None = None
    shots: int = 0
    base_url: str | None = None
    max_requests: int = 8


_settings: contextvars.ContextVar[PromptSettings] = contextvars.ContextVar("prompt_settings", default=PromptSettings())


@contextlib.contextmanager
def prompt_settings(**settings) -> Iterator[PromptSettings]:
    """Within it, a language-model teacher loaded by name (``--teacher openai:MODEL`` or a causal LM folder) is
    asked with these settings (`PromptSettings`' fields)."""
    token = _settings.set(replace(_settings.get(), **settings))
    try:
        yield _settings.get()
    finally:
        _settings.reset(token)


def current_settings() -> PromptSettings:
    return _settings.get()


SERVED_SETTINGS = ("base_url", "max_requests")  # a served teacher's alone: a causal LM folder runs here


def setting_name(name: str) -> str:
    """A field of `PromptSettings` as its caller sets it: the command's option, or ``prompt_settings(...)``."""
    api = f"prompt_settings({name}=...)"
    return {"labels": option("--labels", api), "template": option("--prompt", api), "shots": option("--shots", api),
            "shots_from": option("--shots-from", api), "base_url": option("--base-url", api),
            "max_requests": option("--max-requests", api)}[name]


def settings_given() -> list[str]:
    """The fields of the current `prompt_settings` that ask a language-model teacher something beyond their
    defaults (its labels, prompt, examples, endpoint); not shots_from, labels_from or data, which a command sets
    from its own labelled data, for such a teacher alone to read."""
    settings, default = current_settings(), PromptSettings()
    return [name for name in ("labels", "template", "shots", *SERVED_SETTINGS)
            if getattr(settings, name) != getattr(default, name)]


def prompt_files() -> list[str]:
    """The files the current settings read (a template, labelled data for examples or the label set): inputs of
    the command as much as its data, which no output may overwrite."""
    settings = current_settings()
    return [str(path) for path in (settings.template, settings.shots_from, settings.labels_from) if path]


def is_served(source: str | Path) -> bool:
    """Whether `source` names a served model (``openai:MODEL``, ``systemone:MODEL``), not a folder."""
    return str(source).startswith(SERVED_PREFIXES)


@dataclass(frozen=True)
class Prompt:
    """A filled-in template: the text before each text (`prefix`), after it (`suffix`), and each label's words
    (`verbalizers`, in `names`' order, with the space that joins them to the suffix)."""

    names: tuple[str, ...]
    verbalizers: tuple[str, ...]
    prefix: str
    suffix: str
    instruction: str  # the template's words before the examples and the text: a System One question's

    def render(self, text: str) -> str:
        return f"{self.prefix}{text}{self.suffix}"

    def record(self) -> dict:
        """Everything that decides the teacher's scores besides the model: keys its logit cache."""
        return {"labels": list(self.names), "verbalizers": list(self.verbalizers), "prefix": self.prefix,
                "suffix": self.suffix, "content_free": CONTENT_FREE}


def _template(settings: PromptSettings) -> tuple[str, str]:
    """The template text and how messages name it."""
    if settings.template is None:
        return DEFAULT_TEMPLATE, "the default prompt"
    path = Path(settings.template)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Notepad's) is no word of the prompt
    except (OSError, UnicodeDecodeError) as error:
        raise DistillError(f"{settings.template}: cannot read the prompt template ({type(error).__name__})") from None
    return text.rstrip("\n"), str(settings.template)


def _labelled_examples(path: str | None, settings: PromptSettings) -> tuple[list[str], list[str]]:
    """Texts and labels of a labelled file, read as classification data (a language-model teacher classifies; a
    tagging file is refused by the reader as such)."""
    from distill.data import read_split
    if not path:
        return [], []
    return read_split(path, "classification", settings.data)


def _shots(texts: list[str], labels: list[str], names: tuple[str, ...], count: int) -> list[tuple[str, str]]:
    """`count` examples, seeded, taking each label in turn (every label shown once `count` reaches their number)."""
    by_label: dict[str, list[str]] = {name: [] for name in names}
    for text, label in zip(texts, labels):
        by_label[label].append(text)
    rng = random.Random(0)
    for group in by_label.values():
        rng.shuffle(group)
    chosen: list[tuple[str, str]] = []
    depth = 0
    while len(chosen) < count and any(depth < len(group) for group in by_label.values()):
        chosen += [(group[depth], name) for name, group in by_label.items() if depth < len(group)]
        depth += 1
    return chosen[:count]


def build_prompt(source: str | Path) -> Prompt:
    """The prompt a language-model teacher named `source` asks, from the current `prompt_settings`: its labels
    (``--labels``, else the labelled file's), its template, its few-shot examples. Refused in one line: no label
    set, a template without ``{text}`` (or ``{examples}`` when examples are asked for), examples without a file."""
    from distill.label_names import LabelNames, parse_labels
    settings = current_settings()
    labels_option = option("--labels", "prompt_settings(labels=...)")
    texts, gold = _labelled_examples(settings.shots_from, settings)
    labels_from = settings.labels_from or settings.shots_from
    seen = gold if labels_from == settings.shots_from else _labelled_examples(labels_from, settings)[1]
    if settings.labels is not None:
        names = parse_labels(settings.labels)
        for path, found in ((settings.shots_from, gold), (labels_from, seen)):
            names.require_named(path, found, labels_option)
    elif len(set(seen)) == 1:  # not "--labels needs at least two labels", of an option not given
        raise DistillError(f"{labels_from}: has one label only ({seen[0]}), and a language-model teacher chooses "
                           f"between labels: give them all with {labels_option} NAME,NAME,...")
    elif seen:
        from distill.labels import build_hierarchy
        build_hierarchy("classification", seen, None, labels_from)  # two spellings of a label: the data's one rule
        names = LabelNames.of_data(seen)
        unknown = sorted(set(gold) - set(names.names))
        if unknown:
            raise DistillError(f"{settings.shots_from}: has labels that {labels_from} has not: {', '.join(unknown[:5])}")
    else:
        # said where no labelled data is the label set (predict, pseudo-label): kd's --train, evaluate's and
        # compare's data are, so no command that reaches here has them
        raise DistillError(f"{source}: a language-model teacher needs its label set: give {labels_option} "
                           "NAME,NAME (or NAME=WORDS,...), or labelled data to take it from "
                           f"({option('--shots-from FILE', 'prompt_settings(labels_from=...)')})")
    if settings.shots and not settings.shots_from:
        raise DistillError(f"{option('--shots', 'shots')} takes its examples from labelled data: give "
                           f"{option('--shots-from FILE (kd: --train)', 'prompt_settings(shots_from=...)')}")
    template, named = _template(settings)
    if template.count("{text}") != 1:
        raise DistillError(f"{named}: a prompt template holds {{text}} exactly once (where each text goes), "
                           f"found {template.count('{text}')}")
    unknown = next((f"{{{name}}}" for name in PLACEHOLDER.findall(template) if f"{{{name}}}" not in PLACEHOLDERS), None)
    if unknown is not None:  # "{label}" for "{labels}": it would be sent to the model as it is
        raise DistillError(f"{named}: {unknown} is no placeholder of a prompt template ({', '.join(PLACEHOLDERS)})")
    if template.count("{examples}") > 1:
        raise DistillError(f"{named}: a prompt template holds {{examples}} at most once, found "
                           f"{template.count('{examples}')}")
    if settings.shots > len(texts):  # fewer examples than asked would be shown in silence
        raise DistillError(f"{option('--shots', 'shots')} {settings.shots}: {settings.shots_from} has "
                           f"{len(texts)} labelled examples, so the prompt cannot show {settings.shots}: "
                           f"give at most {len(texts)}")
    if settings.shots and "{examples}" not in template:
        raise DistillError(f"{named}: has no {{examples}}, where {option('--shots', 'shots')} puts its examples")
    if template.find("{examples}") > template.find("{text}"):
        raise DistillError(f"{named}: {{examples}} comes after {{text}}; the examples go before the text")
    several = next((name for name, described in zip(names.names, names.descriptions) if len(described) > 1), None)
    if several is not None:  # a prompt names each label once: the others would be dropped in silence
        raise DistillError(f"{labels_option}: a language-model teacher's prompt gives each label one set of words, "
                           f"and {several} has {len(names.descriptions[names.names.index(several)])} "
                           f"({'|'.join(names.descriptions[names.names.index(several)])}): give one")
    words = [names.description(name) for name in names.names]
    # split at the placeholders before the labels' words go in: words may hold "{text}" as words
    before, suffix = template.split("{text}")
    head, _, tail = before.partition("{examples}")
    head, tail, suffix = (part.replace("{labels}", ", ".join(words)) for part in (head, tail, suffix))
    joiner = "" if (suffix or "}")[-1:].isspace() else " "
    verbalizers = tuple(joiner + word for word in words)
    shots = _shots(texts, gold, names.names, settings.shots) if settings.shots else []
    examples = "".join(f"{tail}{text}{suffix}{verbalizers[names.names.index(label)]}\n\n" for text, label in shots)
    return Prompt(names.names, verbalizers, head + examples + tail, suffix, head.strip() or tail.strip())


def prompt_digest(prompt: Prompt, *parts: object) -> str:
    """One digest of a prompt's record and what else decides the scores (the model's files, its endpoint)."""
    text = json.dumps([prompt.record(), *parts], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:40]
