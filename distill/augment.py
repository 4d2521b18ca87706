"""Transfer-set augmentation: synthetic unlabeled examples made from the labelled ones, for the teacher to label.

A student learns the teacher's function only where it sees the teacher's outputs; without in-domain
unlabeled text, Tang et al. (2019) build the transfer set from the training data itself (masking
words, replacing words by others of the same part of speech, sampling n-grams), and Dai & Adel (2020)
do the same for NER (replacing a mention by another of its type, replacing a token by another seen with
its tag). Every synthetic example is unlabeled: kd scores it with the teacher like unlabeled text.

An augmenter is a pure function ``f(example, rng, resources) -> Example``: it draws only from `rng`
(seeded per labelled example, so `augmented` is deterministic and can start anywhere) and from the
`Resources` built once from the training data. Register one of your own like a student or a kd loss::

    @register_augmenter("drop-first", task="classification")
    def drop_first(example, rng, resources):
        return example.sliced(1, len(example.words)) if len(example.words) > 1 else example

No part-of-speech tagger is available offline, so `replace` for text stands in for Tang et al.'s
same-POS replacement with a cruder class: words of the same shape (capitalised, lower-case, digits)
and the same frequency class (log2 of the count) in the training data. Taggers have their tags, and
`token-replace` draws from the words seen with the same tag, as Dai & Adel do.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Collection, Iterator, Sequence

from distill.errors import DistillError, option
from distill.labels import split_tag
from distill.registry import Registry
from distill.spill import SpilledExamples
from distill.vocab import _TOKEN, UNK

TASKS = ("classification", "tagging")
DEFAULT_METHODS = {"classification": ("mask", "replace", "ngram"), "tagging": ("mention", "token-replace")}
# Tang et al.'s probabilities: a word masked, a word replaced, an example cut to an n-gram of 1 to 5 words
P_MASK, P_REPLACE, P_NGRAM, MAX_NGRAM = 0.1, 0.1, 0.25, 5
# per mention, per token (our choice, not tuned: Dai & Adel tune theirs per data set)
P_MENTION, P_TOKEN = 0.5, 0.3
P_NEIGHBOUR, NEIGHBOURS = 0.1, 10
DRAWS_PER_EXAMPLE = 4  # draws allowed per synthetic example wanted: a draw equal to one seen already is dropped


@dataclass(frozen=True)
class Example:
    """An example as augmenters see it: its words; a tagger's tags (one per word), else None; and a text's
    `gaps` (what comes before, between and after the words), so a new text keeps the original's spacing."""

    words: tuple[str, ...]
    tags: tuple[str, ...] | None = None
    gaps: tuple[str, ...] | None = None

    @classmethod
    def of(cls, given: str | Sequence[str], tags: Sequence[str] | None = None) -> "Example":
        """A text (split as word students split it) or a token list with its tags."""
        if not isinstance(given, str):
            return cls(tuple(given), None if tags is None else tuple(tags))
        spans = [match.span() for match in _TOKEN.finditer(given)]
        ends = [0] + [end for _, end in spans]
        starts = [start for start, _ in spans] + [len(given)]
        return cls(tuple(given[a:b] for a, b in spans), None, tuple(given[a:b] for a, b in zip(ends, starts)))

    def value(self) -> str | list[str]:
        """What the teacher and the student read: the text, or the token list."""
        if self.gaps is None:
            return list(self.words)
        return "".join(gap + word for gap, word in zip(self.gaps, self.words)) + self.gaps[-1]

    def with_words(self, changed: dict[int, str]) -> "Example":
        """This example with the words at some positions replaced (word count, tags and spacing kept)."""
        return replace(self, words=tuple(changed.get(i, word) for i, word in enumerate(self.words)))

    def sliced(self, start: int, end: int) -> "Example":
        """Words start..end-1 alone (a text without the spacing around them)."""
        gaps = None if self.gaps is None else ("",) + self.gaps[start + 1:end] + ("",)
        tags = None if self.tags is None else self.tags[start:end]
        return Example(self.words[start:end], tags, gaps)


def is_word(token: str) -> bool:
    """A token with a letter or digit: punctuation is neither masked nor replaced."""
    return any(ch.isalnum() for ch in token)


def word_class(word: str, count: int) -> tuple[str, int]:
    """The stand-in for a part of speech (see the module docstring): shape and log2 frequency class."""
    shape = "d" if any(ch.isdigit() for ch in word) else "X" if word.isupper() and len(word) > 1 else \
        "Xx" if word[:1].isupper() else "x"
    return shape, int(math.log2(count))


def mentions_of(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, type) of each entity mention in a tag sequence of any scheme (IOB1, IOB2, IOBES, BILOU)."""
    found: list[tuple[int, int, str]] = []
    start, kind = None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, this = split_tag(tag)
        continues = prefix in ("I", "E", "L") and start is not None and this == kind
        if start is not None and not continues:
            found.append((start, i, kind))
            start, kind = None, None
        if prefix is not None and not continues:
            start, kind = i, this
        if prefix in ("E", "L", "S", "U") and start is not None:  # a mention that ends here
            found.append((start, i + 1, kind))
            start, kind = None, None
    return found


def mention_tags(kind: str, length: int, first: str, scheme: str) -> list[str]:
    """The tags of a mention of `length` words in `scheme`; `first` is the prefix the replaced mention began
    with (IOB1 begins with B- only after a mention of the same type, so that choice is kept)."""
    if scheme in ("IOBES", "BILOU"):
        single, last = ("S", "E") if scheme == "IOBES" else ("U", "L")
        return [f"{single}-{kind}"] if length == 1 else \
            [f"B-{kind}"] + [f"I-{kind}"] * (length - 2) + [f"{last}-{kind}"]
    return [f"{first}-{kind}"] + [f"I-{kind}"] * (length - 1)


def mask_token(teacher: Any) -> str:
    """The word the `mask` augmenter writes for `teacher` to read: its tokenizer's mask token (else its unknown
    token); `<unk>` for a teacher without a sub-word tokenizer (a word student) and for a word-level run."""
    tokenizer = teacher.sub_word_tokenizer() if teacher is not None else None
    return getattr(tokenizer, "mask_token", None) or getattr(tokenizer, "unk_token", None) or UNK


@dataclass
class Resources:
    """What augmenters draw from, built once from the labelled training data: its examples, a tagger's tag
    `scheme`, the word the `mask` augmenter writes, and the teacher (its sub-word embeddings for
    `neighbour`). The tables are computed the first time an augmenter asks for them."""

    task: str
    examples: tuple[Example, ...]
    scheme: str | None = None
    mask_token: str = UNK
    teacher: Any = field(default=None, repr=False)

    @classmethod
    def build(cls, inputs: Sequence, labels: Sequence | None = None, teacher: Any = None,
              scheme: str | None = None) -> "Resources":
        """From the training inputs (texts, or token lists with their tag lists as `labels`)."""
        task = "classification" if inputs and isinstance(inputs[0], str) else "tagging"
        tags = labels if task == "tagging" and labels is not None else [None] * len(inputs)
        mask = mask_token(teacher)
        if task == "tagging" and scheme is None:
            from distill.labels import detect_tag_scheme
            scheme = detect_tag_scheme(t for t in tags if t is not None)
        return cls(task, tuple(Example.of(given, tag) for given, tag in zip(inputs, tags)), scheme, mask, teacher)

    @cached_property
    def word_counts(self) -> Counter:
        return Counter(word for example in self.examples for word in example.words)

    @cached_property
    def similar_words(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """Words by `word_class`, for `replace`."""
        classes: dict[tuple[str, int], list[str]] = defaultdict(list)
        for word, count in self.word_counts.items():
            if is_word(word):
                classes[word_class(word, count)].append(word)
        return {key: tuple(words) for key, words in classes.items()}

    @cached_property
    def words_by_tag(self) -> dict[str, tuple[tuple[str, ...], tuple[int, ...]]]:
        """Each tag's words and how often each was seen with it, for `token-replace`."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for example in self.examples:
            for word, tag in zip(example.words, example.tags or ()):
                counts[tag][word] += 1
        return {tag: (tuple(words), tuple(words.values())) for tag, words in counts.items()}

    @cached_property
    def mentions(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Every mention of the training data by type, repeats kept (a frequent mention is drawn more often)."""
        found: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for example in self.examples:
            for start, end, kind in mentions_of(example.tags or ()):
                found[kind].append(example.words[start:end])
        return {kind: tuple(words) for kind, words in found.items()}

    @cached_property
    def neighbours(self) -> dict[str, tuple[str, ...]]:
        """For each training word that is one sub-token of the teacher's vocabulary, its `NEIGHBOURS` nearest
        whole-word sub-tokens by cosine on the teacher's input embeddings."""
        return nearest_sub_words(self.teacher, [w for w in self.word_counts if is_word(w)], NEIGHBOURS)


Augmenter = Callable[[Example, random.Random, Resources], Example]


@dataclass(frozen=True)
class AugmenterEntry:
    """A registered augmenter: its name, function and the tasks it serves."""

    name: str
    function: Augmenter
    tasks: tuple[str, ...]


_AUGMENTERS: Registry[AugmenterEntry] = Registry("augmenter")


def register_augmenter(name: str, task: str | Sequence[str]) -> Callable[[Augmenter], Augmenter]:
    """Register ``f(example, rng, resources) -> Example`` as augmenter `name` for `task` (or several tasks):
    ``DistillSettings(augment_methods=[name])`` and ``nlp-train kd --augment-methods`` then offer it. It must draw
    only from `rng` so that its output is the same for the same seed."""
    tasks = (task,) if isinstance(task, str) else tuple(task)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise DistillError(f"augmenter {name!r}: unknown task {unknown[0] if unknown else task!r}: choose one of "
                           f"{', '.join(TASKS)}")
    if not name or "," in name:
        raise DistillError(f"augmenter name {name!r}: use a non-empty name without ','")
    return _AUGMENTERS.decorator(name, lambda function: AugmenterEntry(name, function, tasks))


def augmenters(task: str) -> list[str]:
    """The names of the augmenters registered for `task`."""
    return [name for name, entry in _AUGMENTERS.items() if task in entry.tasks]


def check_methods(methods: Sequence[str] | None, task: str) -> tuple[str, ...]:
    """`methods` (None: the task's defaults), each checked to be an augmenter registered for `task`."""
    if methods is None:
        return DEFAULT_METHODS[task]
    if isinstance(methods, str) or not methods:
        raise DistillError(f"augment methods: give a list of augmenter names, e.g. {list(DEFAULT_METHODS[task])}")
    for name in methods:
        entry = _AUGMENTERS.get(name)
        if entry is None or task not in entry.tasks:
            why = "unknown" if entry is None else f"{' and '.join(entry.tasks)}-only"
            raise DistillError(f"{why} augmenter {name!r} for {task}: choose among {', '.join(augmenters(task))}")
    return tuple(methods)


def _key(value: str | Sequence[str]) -> str | tuple[str, ...]:
    return value if isinstance(value, str) else tuple(value)


def augmented(inputs: Sequence, labels: Sequence | None, n: int, methods: Sequence[str], seed: int,
              resources: Resources | None = None, avoid: Collection = ()) -> Iterator[str | list[str]]:
    """Up to `n` synthetic examples per labelled one, made by applying `methods` in turn (Tang et al.'s pipeline:
    mask, replace, then perhaps an n-gram), as texts or token lists. Each labelled example has its own random
    generator, seeded by `seed` and its index: the output is the same for the same seed, whatever was asked
    before. A draw equal to the example, to one drawn before from it, or to one of `avoid` (keys: texts, or
    token tuples) is dropped; after `DRAWS_PER_EXAMPLE * n` draws an example yields what it has."""
    resources = resources or Resources.build(inputs, labels)
    functions = [_AUGMENTERS[name].function for name in check_methods(methods, resources.task)]
    tags = labels if resources.task == "tagging" and labels is not None else [None] * len(inputs)
    for index, (given, tag) in enumerate(zip(inputs, tags)):
        rng = random.Random(f"augment:{seed}:{index}")
        example, seen, made = Example.of(given, tag), {_key(given)}, 0
        for _ in range(DRAWS_PER_EXAMPLE * n):
            if made == n:
                break
            new = example
            for function in functions:
                new = function(new, rng, resources)
            value = new.value()
            key = _key(value)
            if key not in seen and key not in avoid:
                seen.add(key)
                made += 1
                yield value


def synthetic_examples(train: Any, dev: Any, n: int, methods: Sequence[str], seed: int, teacher: Any,
                       scheme: str | None) -> SpilledExamples:
    """kd's synthetic transfer set: `augmented` over the training `Examples`, none equal to a training or dev
    example (the dev set taught as transfer text would pick the epoch that fits it best), written to disk as
    they are made (`distill.spill`): memory holds none of them, whatever `n`. `teacher` may be an ensemble's
    list of teachers: the first one's resources make the examples, which every teacher then scores, so `mask`
    needs one mask token that all of them read as theirs."""
    teachers = list(teacher) if isinstance(teacher, (list, tuple)) else [teacher]
    tokens = list(dict.fromkeys(mask_token(each) for each in teachers))
    if "mask" in methods and len(tokens) > 1:
        others = [name for name in methods if name != "mask"]
        instead = option(f"--augment-methods {','.join(others)}", f"augment_methods={others}") if others else \
            "other methods than mask"
        raise DistillError(f"the mask augmenter writes one mask token, and the teachers' tokenizers have different "
                           f"ones ({', '.join(tokens)}): each teacher would read another's as plain text; use "
                           f"{instead}, or teachers of one tokenizer family")
    resources = Resources.build(train.inputs, train.labels, teachers[0], scheme)
    avoid = {_key(value) for value in [*train.inputs, *dev.inputs]}
    made = SpilledExamples(augmented(train.inputs, train.labels, n, methods, seed, resources, avoid))
    if not made:
        raise DistillError(f"{option('--augment', 'augment')} {n} made no synthetic example that differs from the "
                           f"training data with {option('--augment-methods', 'augment_methods')} {','.join(methods)}: "
                           "choose other methods, or drop it")
    return made


def nearest_sub_words(teacher: Any, words: Sequence[str], k: int) -> dict[str, tuple[str, ...]]:
    """Of `words`, each that the teacher's tokenizer reads as one sub-token, mapped to the `k` whole-word
    sub-tokens nearest to it by cosine on the teacher's input embedding table."""
    import torch
    tokenizer = teacher.sub_word_tokenizer() if teacher is not None else None
    table = teacher.input_embeddings() if teacher is not None else None
    if tokenizer is None or table is None:
        methods = option("--augment-methods", "augment_methods")
        raise DistillError("neighbour replacement needs a teacher with sub-word embeddings (a transformer), and "
                           f"this teacher has none: drop neighbour from {methods}")
    special = set(tokenizer.all_special_ids)
    pieces = tokenizer.convert_ids_to_tokens(list(range(table.size(0))))
    texts = [tokenizer.convert_tokens_to_string([piece]).strip() for piece in pieces]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]  # a whole word reads back as itself alone
    candidates = [i for i, text in enumerate(texts) if i not in special and text.isalpha() and ids[i] == [i]]
    asked = tokenizer(list(words), add_special_tokens=False)["input_ids"]
    single = [(word, got[0]) for word, got in zip(words, asked) if len(got) == 1 and got[0] not in special]
    if not single or not candidates:
        return {}
    with torch.no_grad():
        unit = torch.nn.functional.normalize(table.float(), dim=1)
        pool = unit[candidates]
        found = {}
        for start in range(0, len(single), 1024):  # a block of words against the whole vocabulary at a time
            block = single[start:start + 1024]
            scores = unit[[i for _, i in block]] @ pool.T
            top = scores.topk(min(k + 1, len(candidates)), dim=1).indices.tolist()
            for (word, own), row in zip(block, top):
                found[word] = tuple(texts[candidates[j]] for j in row if candidates[j] != own)[:k]
    return found


def _replaced_words(example: Example, rng: random.Random, p: float,
                    choose: Callable[[int, str], str | None]) -> Example:
    """Each word replaced with probability `p` by `choose(position, word)` (None: kept)."""
    changed = {}
    for i, word in enumerate(example.words):
        if rng.random() < p:
            new = choose(i, word)
            if new is not None:
                changed[i] = new
    return example.with_words(changed) if changed else example


@register_augmenter("mask", task=TASKS)
def mask(example: Example, rng: random.Random, resources: Resources) -> Example:
    """Each word, with probability P_MASK, becomes the teacher tokenizer's mask token (an unknown word for a word
    teacher): the teacher says what it makes of the context alone (Tang et al.)."""
    return _replaced_words(example, rng, P_MASK, lambda i, word: resources.mask_token if is_word(word) else None)


@register_augmenter("replace", task="classification")
def replace_similar(example: Example, rng: random.Random, resources: Resources) -> Example:
    """Each word, with probability P_REPLACE, becomes another training word of its shape and frequency class
    (the stand-in for Tang et al.'s same part of speech; see the module docstring)."""
    def choose(i: int, word: str) -> str | None:
        count = resources.word_counts.get(word)
        if not count or not is_word(word):
            return None
        return rng.choice(resources.similar_words[word_class(word, count)])
    return _replaced_words(example, rng, P_REPLACE, choose)


@register_augmenter("ngram", task="classification")
def ngram(example: Example, rng: random.Random, resources: Resources) -> Example:
    """With probability P_NGRAM, the example cut to a random span of 1 to MAX_NGRAM words (Tang et al.)."""
    if rng.random() >= P_NGRAM:
        return example
    n = rng.randint(1, MAX_NGRAM)
    if n >= len(example.words):
        return example
    start = rng.randrange(len(example.words) - n + 1)
    cut = example.sliced(start, start + n)
    return cut if any(map(is_word, cut.words)) else example  # not a punctuation mark alone


@register_augmenter("token-replace", task="tagging")
def token_replace(example: Example, rng: random.Random, resources: Resources) -> Example:
    """Each token, with probability P_TOKEN, becomes a training token seen with its tag, drawn by how often it
    was (Dai & Adel's label-wise token replacement): word count and tags kept."""
    def choose(i: int, word: str) -> str | None:
        seen = resources.words_by_tag.get(example.tags[i])  # a tag a replaced mention brought in may be new
        return rng.choices(*seen)[0] if seen else None
    return _replaced_words(example, rng, P_TOKEN, choose)


@register_augmenter("mention", task="tagging")
def mention(example: Example, rng: random.Random, resources: Resources) -> Example:
    """Each entity mention, with probability P_MENTION, becomes another training mention of its type, maybe of
    another length, its tags rewritten in the data's scheme (Dai & Adel's mention replacement)."""
    if resources.scheme == "plain":
        methods = option("--augment-methods", "augment_methods")
        raise DistillError("mention replacement needs entity tags (IOB, IOBES or BILOU), and these tags are plain "
                           f"(such as part of speech): drop mention from {methods}")
    words, tags, end = [], [], 0
    for start, stop, kind in mentions_of(example.tags):
        if rng.random() >= P_MENTION:
            continue
        other = rng.choice(resources.mentions[kind])
        first = split_tag(example.tags[start])[0]
        words += [*example.words[end:start], *other]
        tags += [*example.tags[end:start], *mention_tags(kind, len(other), first, resources.scheme)]
        end = stop
    if not end:
        return example
    return Example((*words, *example.words[end:]), (*tags, *example.tags[end:]))


@register_augmenter("neighbour", task=TASKS)
def neighbour(example: Example, rng: random.Random, resources: Resources) -> Example:
    """Each word that is one sub-token of the teacher's vocabulary, with probability P_NEIGHBOUR, becomes one of
    its NEIGHBOURS nearest sub-words by cosine on the teacher's input embeddings (after TinyBERT)."""
    def choose(i: int, word: str) -> str | None:
        near = resources.neighbours.get(word)
        if not near:
            return None
        new = rng.choice(near)
        return new.capitalize() if word[:1].isupper() and new.islower() else new
    return _replaced_words(example, rng, P_NEIGHBOUR, choose)
