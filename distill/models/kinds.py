"""The teacher-kind table: every kind of model source a command may be given as a teacher or model, and
which commands take it. Every command asks `require_kind` before it does anything, so a kind is accepted
everywhere it works and refused everywhere else with the same one-line message (`refusal`).

A source is recognised by its card (`distill.models.model_card`: the model card of a folder distill wrote,
or what one would say of a transformers classifier's folder or ``hub:NAME``), then checked whole by its
loader before use (`distill.models.load_model`: the card's checksums, or a transformers folder's config,
weights and tokenizer vocabulary, `hub_teacher.verify_transformers_folder`).

To add a kind (a zero-shot label-description teacher, a causal LM, a served ``openai:MODEL`` teacher):

1. make `model_card` describe a source of that kind (``{"kind": "teacher", "model": "NAME", "task": ...}``
   for one without a card of its own), and `load_model` load it after checking it is whole;
2. add one `TeacherKind` to `KINDS`, above any entry whose `matches` would also take its card: its `what`
   (for messages), its `matches`, the `COMMANDS` it `takes`, and for each command it cannot take what to
   do `instead`;
3. give `sources` in tests/test_teacher_kinds.py a source of it: that test runs it through every command in
   `COMMANDS`, each of which either works with it or gives the `refusal` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from distill.errors import DistillError, option

# What consults the table: the commands, an export by its format, and an export's check data (`command_name`).
COMMANDS = ("kd", "pseudo-label", "evaluate", "predict", "compare", "search", "export onnx", "export safetensors",
            "export transformers", "export check-data", "embeddings-from-teacher", "use-export")
EXPORTS = ("export onnx", "export safetensors", "export transformers")


def command_name(command: str) -> str:
    """A command of `COMMANDS` as the caller knows it: ``export --format onnx`` on the command line,
    ``export_model(format='onnx')`` in Python."""
    if command == "export check-data":
        return option("export --check-data", "export_model(check_data=...)")
    if command == "embeddings-from-teacher":
        return option("student --embeddings-from-teacher", "train_student(teacher_embeddings=...)")
    if command == "use-export":
        return option("pseudo-label --use-export", "pseudo_label(use_export=...)")
    if command in EXPORTS:
        form = command.split()[1]
        return option(f"export --format {form}", f"export_model(format={form!r})")
    return command


@dataclass(frozen=True)
class TeacherKind:
    """One kind of model source: how to tell it by its card, what commands take it, and for each command
    that cannot, what to do instead (said after the refusal)."""

    name: str
    what: str  # "a transformers classifier": "DIR: search does not take a transformers classifier"
    matches: Callable[[dict], bool]
    takes: frozenset[str]
    instead: Mapping[str, Callable[[dict], str]] = field(default_factory=dict)
    detail: Callable[[dict], str] = lambda card: ""  # said after `what` (a multi-task teacher's heads)
    prompted: bool = False  # asked a prompt (`distill.models.prompt`): the prompt options are its


def _heads(card: dict) -> str:
    return f" (its heads: {', '.join(card.get('heads', {}))})"


def _export_source(card: dict) -> str:
    return f"export the PyTorch model directory it came from ({card.get('export', {}).get('source')})"


def _give_its_source(card: dict) -> str:
    return (f"it chooses between a PyTorch teacher and its export: give the PyTorch teacher it came from "
            f"({card.get('export', {}).get('source')}) as {option('--teacher', 'teacher_dir')}")


def _use_a_head(card: dict) -> str:
    scored = option("evaluate --head, compare --head and predict",
                    "evaluate_model(head=...), compare_models(head=...) and predict_file")
    return (f"use {scored} instead, "
            f"or distil a head with {option('kd --head', 'DistillSettings(head=...)')}")


def _already_transformers(card: dict) -> str:
    onnx = option("--format onnx", "format='onnx'")
    return f"it is a transformers model already: copy its folder, or export it {onnx}"


def _no_weights_here(card: dict) -> str:
    return ("it is a model behind an endpoint, with no weights here to start a student's embeddings from: give a "
            "teacher folder (a fine-tuned teacher, a transformers classifier or a causal LM)")


def _give_a_head_folder(card: dict) -> str:
    return "it holds one transformers model per head: give a head's folder, DIR/HEAD"


def _normalised(card: dict) -> str:
    onnx, slim = option("--format onnx", "format='onnx'"), option("--format safetensors", "format='safetensors'")
    return (f"it normalises its features before its head, which no stock transformers classifier does: export it "
            f"{onnx} or {slim}")


def _onnx_for_words(card: dict) -> str:
    return (f"it has no transformers class (only the teacher and the transformer students do): export it "
            f"{option('--format onnx', 'format=' + repr('onnx'))} for ONNX Runtime")


def _word_student(card: dict) -> bool:
    """Whether the card is a student's whose class has no transformers form (a word-level LSTM, CNN, n-gram or
    static student; a plugin's unless it says ``exports_to_transformers``). A class that cannot be found is left
    to the loader, which says what is missing."""
    if card.get("kind") != "student":
        return False
    from distill.models.registry import entry_of_saved
    try:
        cls = entry_of_saved(card.get("model"), card.get("class")).cls
    except DistillError:
        return False
    return not getattr(cls, "exports_to_transformers", False)


def _one_of_its_teachers(card: dict) -> str:
    return (f"give one of its teachers: an ensemble teaches through "
            f"{option('kd and pseudo-label', 'Distiller and pseudo_label')} only")


def _distil_them_first(card: dict) -> str:
    return (f"they are the teacher's distributions of their texts, not a model: give the teacher model they came "
            f"from, or distil them with {option('kd --soft-labels', 'Distiller(SoftLabels(...))')} first and give "
            f"that student")


def _distil_it_first(card: dict) -> str:
    return (f"it is asked a prompt for every text, not a model distill saves: distil it with "
            f"{option('kd', 'Distiller')} first, then use that student")


_EVERYWHERE = frozenset(COMMANDS)
# what a prompted teacher cannot be given to ("use-export": beside an ONNX export of it)
_PROMPTED_NOT = ("search", *EXPORTS, "export check-data", "use-export")
_MULTITASK_NOT = ("search", "export onnx", "export safetensors", "export check-data", "use-export")

KINDS: tuple[TeacherKind, ...] = (
    # not a model source but what a command's teacher may also be (`card_of`): several teachers, or soft labels
    TeacherKind("ensemble", "an ensemble of teachers", lambda card: card.get("kind") == "ensemble",
                frozenset({"kd", "pseudo-label"}), {command: _one_of_its_teachers for command in COMMANDS}),
    TeacherKind("soft-labels", "soft labels", lambda card: card.get("kind") == "soft-labels", frozenset({"kd"}),
                {command: _distil_them_first for command in COMMANDS}),
    TeacherKind("onnx", "an ONNX export", lambda card: card.get("format") == "onnx",
                _EVERYWHERE - {*EXPORTS, "use-export"},
                {**{command: _export_source for command in EXPORTS}, "use-export": _give_its_source}),
    TeacherKind("multitask-transformers", "a multi-task teacher's transformers export",  # a folder per head
                lambda card: card.get("kind") == "multitask-teacher" and card.get("format") == "transformers",
                frozenset(), {command: _give_a_head_folder for command in COMMANDS}, _heads),
    TeacherKind("multitask", "a multi-task teacher", lambda card: card.get("kind") == "multitask-teacher",
                _EVERYWHERE - set(_MULTITASK_NOT), {command: _use_a_head for command in _MULTITASK_NOT}, _heads),
    TeacherKind("causal-lm", "a causal language model", lambda card: card.get("model") == "causal-lm",
                _EVERYWHERE - set(_PROMPTED_NOT), {command: _distil_it_first for command in _PROMPTED_NOT},
                prompted=True),
    TeacherKind("served", "a served language model", lambda card: card.get("model") == "served",
                _EVERYWHERE - {*_PROMPTED_NOT, "embeddings-from-teacher"},
                {**{command: _distil_it_first for command in _PROMPTED_NOT},
                 "embeddings-from-teacher": _no_weights_here}, prompted=True),
    TeacherKind("transformers", "a transformers classifier",
                lambda card: card.get("model") == "transformers" or card.get("format") == "transformers",
                _EVERYWHERE - {"export safetensors", "export transformers"},
                {command: _already_transformers for command in ("export safetensors", "export transformers")}),
    TeacherKind("zero-shot", "a zero-shot teacher",  # the card's model: distill.models.zero_shot.CARD_MODEL
                lambda card: card.get("model") == "ZeroShotTeacher",
                _EVERYWHERE - {"export transformers"}, {"export transformers": _normalised}),
    TeacherKind("teacher", "a teacher", lambda card: card.get("kind") == "teacher", _EVERYWHERE),
    TeacherKind("word-student", "a word-level student", _word_student, _EVERYWHERE - {"export transformers"},
                {"export transformers": _onnx_for_words}, lambda card: f" ({card.get('model')})"),
    TeacherKind("student", "a student", lambda card: card.get("kind") == "student", _EVERYWHERE),
)


def kind_of(card: dict) -> TeacherKind:
    """The kind a model card describes (the first entry of `KINDS` that matches it)."""
    found = next((kind for kind in KINDS if kind.matches(card)), None)
    if found is None:
        raise DistillError(f"a model card of unknown kind {card.get('kind')!r}")
    return found


def card_of(source: Any) -> dict:
    """What the table reads of a command's teacher: the model card of a model source (`model_card`), or for
    several sources (an ensemble) or soft labels (`distill.soft_labels.SoftLabels`), which have none, a card
    saying so, so that every command takes or refuses them by the table as it does a model."""
    from distill.models import model_card
    from distill.soft_labels import SoftLabels
    if isinstance(source, (list, tuple)):
        return {"kind": "ensemble", "teachers": [str(one) for one in source]}
    if isinstance(source, SoftLabels):
        return {"kind": "soft-labels", "path": source.path}
    if not isinstance(source, (str, Path)):  # a model in memory where a command reads a folder, or no source at all
        raise DistillError(f"a model is named by its folder, hub:NAME or openai:MODEL (a path or a name), not "
                           f"{type(source).__name__}")
    return model_card(source)


def shown(source: Any, card: dict) -> str:
    """`source` as a refusal names it: an ensemble by its teachers, soft labels by their file."""
    if card.get("kind") == "ensemble":
        return ", ".join(card["teachers"])
    return card["path"] if card.get("kind") == "soft-labels" else str(source)


def refusal(source: Any, command: str, kind: TeacherKind, card: dict) -> DistillError:
    """The one line every command gives for a kind it does not take."""
    instead = kind.instead.get(command)
    return DistillError(f"{shown(source, card)}: {command_name(command)} does not take {kind.what}{kind.detail(card)}"
                        f"{f'; {instead(card)}' if instead else ''}")


def require_kind(source: Any, command: str) -> dict:
    """The card of `source` (`card_of`: a model source, an ensemble's list of them, or soft labels) if `command`
    (one of `COMMANDS`) takes its kind; else `refusal`."""
    card = card_of(source)
    kind = kind_of(card)
    if command not in kind.takes:
        raise refusal(source, command, kind, card)
    return card


def refuse_embeddings_start(teacher: Any) -> None:
    """A student about to start its word embeddings from `teacher`, a loaded model whose kind the table refuses for
    that (a served model: no weights here), is refused in the table's words: kd, which starts from its teacher's
    unless told not to, named the model's class ("ServedTeacher") where `student --embeddings-from-teacher` names
    its kind. A model loaded from no source the table knows (built in memory) is left to the caller."""
    source = getattr(teacher, "loaded_from", None) or getattr(teacher, "source", None)
    if not isinstance(source, str):  # an ONNX export's source is its PyTorch model: its folder is `loaded_from`
        return
    try:
        card = card_of(source)
        kind = kind_of(card)
    except DistillError:  # its folder moved or changed since it was loaded: the model in memory is what counts
        return
    if "embeddings-from-teacher" in kind.takes:
        return
    instead = kind.instead.get("embeddings-from-teacher")
    started = option("kd without --random-embeddings", "teacher_embeddings")
    unless = option("--random-embeddings", "teacher_embeddings=False (Distiller), or no teacher_embeddings "
                                           "(train_student)")
    raise DistillError(f"{shown(source, card)}: {started} does not take {kind.what}{kind.detail(card)}"
                       f"{f'; {instead(card)}' if instead else ''}, or use {unless}")


def is_prompted(source: str | Path) -> bool:
    """Whether `source` is a teacher asked a prompt (a causal language model, a served one)."""
    from distill.models import model_card
    return kind_of(model_card(source)).prompted


def refuse_unasked(sources: Sequence[str | Path | None], given: Sequence[str] | None = None) -> None:
    """The prompt settings `given` (fields of `distill.models.prompt.PromptSettings`; default: those the current
    `prompt_settings` set) are for a teacher asked a prompt, a served teacher's (base_url, max_requests) for a
    served one: where no source of the command is such (a fine-tuned teacher, a student, soft labels, a model in
    memory: None), they would be ignored in silence, so they are refused in one line, by every command alike."""
    from distill.models.prompt import SERVED_SETTINGS, is_served, setting_name, settings_given
    given = settings_given() if given is None else list(given)
    named = [str(source) for source in sources if source is not None]
    for takes, kind, some in ((is_prompted, "a language-model teacher (a causal LM folder, openai:MODEL, "
                               "systemone:MODEL)", given),
                              (is_served, "a served teacher (openai:MODEL, systemone:MODEL)",
                               [name for name in given if name in SERVED_SETTINGS])):
        if some and not any(takes(source) for source in named):
            one = len(some) == 1
            verb = option("is an option" if one else "are options", "is a setting" if one else "are settings")
            whose = "no model of this command is one" if sources else "this command is given none"
            raise DistillError(f"{', '.join(map(setting_name, some))} {verb} of {kind}, and {whose}")
