"""Tagging files: CoNLL (a word and its tag a line, a blank line between sentences) and JSON lines of tokens
and tags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from distill.data.checks import (HUB_PREFIX, _characters, _check_length, _check_visible, _format, _json_records,
                                 _json_words, _read_text, _require_columns, _split_lines, _surrogate_free, _wrong_task)
from distill.data.classification import sniff_format
from distill.data.hub import _hub_examples
from distill.errors import DataError, OtherTaskData, option
from distill.labels import shows_nothing as _invisible, split_tag

if TYPE_CHECKING:
    import datasets


def _refuse_table_as_conll(path: str, text: str) -> None:
    """A file read as CoNLL (by its name) that is CSV, TSV or JSON: say so, rather than fail on its field
    counts or, for JSON lines of equal width, read garbage tags."""
    found = sniff_format(text)
    if found == "TSV":
        _refuse_spaced_word(path, _split_lines(text))
    if found == "JSON":
        raise DataError(path, "looks like JSON, but its name does not end in .jsonl or .json: name it so "
                              "(tagging data: JSONL with tokens and tags)")
    if found in ("CSV", "TSV"):
        raise OtherTaskData(path, f"looks like {found} (a header, then a text and a label per row: classification "
                                  "data), but this command or model tags words: give it CoNLL columns (a word and its "
                                  "tag per line) or JSONL with tokens and tags")


def _spaced_word(lines: list[str]) -> tuple[int, str] | None:
    """The first field holding a space in tab-separated CoNLL (a word such as 'New York'), with its line number,
    or None: most lines are fields separated by tabs, none of which holds a space (a table's rows are texts,
    which hold spaces), and blank lines may part sentences."""
    rows = [(number, line.strip("\r\n").split("\t")) for number, line in enumerate(lines, 1) if line.strip()]
    if not any(len(fields) > 1 for _, fields in rows):
        return None
    plain = sum(len(fields) > 1 and not any(" " in field.strip() for field in fields) for _, fields in rows)
    if 2 * plain <= len(rows):
        return None
    return next(((number, field) for number, fields in rows if len(fields) > 1
                 for field in fields if " " in field.strip()), None)


def _refuse_spaced_word(path: str, lines: list[str]) -> None:
    """Tab-separated CoNLL whose word holds a space: CoNLL fields are split at any space, so that line has a
    field more than the others (and a table sniffer takes the file for TSV): say so, naming the word."""
    found = _spaced_word(lines)
    if found is not None:
        number, field = found
        raise DataError(path, f"the field {field.strip()!r} holds a space, but CoNLL fields are split at any space "
                              "or tab, so it reads as two: write the word without spaces (e.g. "
                              f"{'_'.join(field.split())!r}), or give JSONL with tokens and tags, whose words may "
                              "hold spaces", number)


_CONLLU_SKIPPED_ID = re.compile(r"\d+[-.]\d+")  # a multiword token's range (1-2) or an empty node (8.1)


def _is_conllu(lines: Iterable[str], separator: str | None = None) -> bool:
    """Whether lines are CoNLL-U (Universal Dependencies): after '#' comment lines, each sentence numbers
    its words 1, 2, 3... in the first of three or more fields (split at `separator`, by default at any
    space), until a sentence of two or more words shows it. No CoNLL sentence starts so; `cat -n` text has
    one tab, where CoNLL-U separates by tabs. One-word sentences ("1", then the word) say it only in
    numbers: two of them with CoNLL-U's ten fields do too."""
    count = one_word = 0
    for line in lines:
        if not line.strip():
            if count >= 2:
                return True
            one_word += count
            count = 0
            continue
        fields = line.strip().split(separator)
        if (count == 0 and fields[0].startswith("#")) or _CONLLU_SKIPPED_ID.fullmatch(fields[0]):
            continue
        if len(fields) < 3 or fields[0] != str(count + 1) or (count == 0 and one_word and len(fields) != 10):
            return False
        count += 1
    return count >= 2 or one_word + count >= 2


def _refuse_conllu(path: str, lines: list[str]) -> None:
    """CoNLL-U read as CoNLL would take each word's number for the word (and fail on its comment lines)."""
    if Path(path).suffix.lower() == ".conllu" or _is_conllu(lines):
        converted = shlex.quote(str(Path(path).with_suffix(".tags.conll")))
        raise DataError(path, "looks like CoNLL-U (a word's number, the word, then its annotations per line; '#' "
                              "comment lines), which distill does not read: as CoNLL, the numbers would be taken for "
                              "the words. Keep the word and a tag column, e.g. awk -F'\\t' -v OFS='\\t' '!/^#/ && $1 "
                              f"!~ /[.-]/ {{print $2, $4}}' {shlex.quote(path)} > {converted} (field 4 is the UPOS "
                              "tag, 5 XPOS)")


def _conll_sentences(path: str, tag_column: int) -> Iterator[tuple[int, list[str], list[str]]]:
    tokens: list[str] = []
    tags: list[str] = []
    start = width = None
    text = _read_text(path)
    lines = _split_lines(text)
    _refuse_conllu(path, lines)
    _refuse_table_as_conll(path, text)
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if tokens:
                yield start, tokens, tags
            tokens, tags = [], []
            continue
        if width is None:
            width, first = len(fields), (number, line)
            if not -width <= tag_column < width:
                raise DataError(path, f"tag column {tag_column} does not exist: lines have {width} fields"
                                      f"{_unusual_space_note(line) or _invisible_line_note(line)}", number)
            if tag_column % width == 0:  # the word itself: its "tags" would be the words
                raise DataError(path, f"tag column {tag_column} is the word itself (lines have {width} field"
                                      f"{'s' if width > 1 else ''}); a labelled CoNLL line is the word, then "
                                      f"its tag(s){_unusual_space_note(line) or _invisible_line_note(line)}", number)
        if len(fields) != width:
            for culprit, text in ((number, line), first):  # this line, or the one that set the width
                note = _unusual_space_note(text, "the line" if culprit == number else
                                           f"the first line (line {culprit}), not line {number},",
                                           lacking=culprit == number and len(fields) < width)
                if note:
                    raise DataError(path, f"expected {width} fields like the first line, found {len(fields)}{note}",
                                    culprit)
            _refuse_spaced_word(path, lines)
            raise DataError(path, f"expected {width} fields like the first line (line {first[0]}), found "
                                  f"{len(fields)}{_invisible_line_note(line)}", number)
        if not tokens:
            start = number
        if not line.isascii():  # a tag of a zero-width space alone: a class no one sees
            _check_visible(path, fields[tag_column], "the tag", number)
        tokens.append(fields[0])
        tags.append(fields[tag_column])
    if tokens:
        yield start, tokens, tags


def _invisible_line_note(line: str) -> str:
    """Why a line that looks blank is not one, as ': the line is only ...' for a message, or '': it holds
    only characters that show nothing (U+200B ZERO WIDTH SPACE, U+FEFF...) but are not spaces, so it is
    read as a line of one word, not as the blank line that ends a sentence."""
    if not _invisible(line) or not line.split():
        return ""
    return (f": the line is only {_characters(''.join(line.split()))}, which shows nothing in an editor but is "
            "not a space, so it is not the blank line that ends a sentence: remove those characters")


def _unusual_space_note(line: str, where: str = "the line", lacking: bool = False) -> str:
    """Why `line` has other fields than its spaces and tabs show, as ': `where` holds ...' for a message, or
    '': a Unicode space (U+00A0, U+2028...) inside a field splits it in two, and a field that is only Unicode
    spaces (a no-break space written as a word) is no field at all. Such spaces at either end of a field
    change nothing, nor do they after the line's last field, unless the line is `lacking` a field: then any
    of them may be the field it lacks."""
    fields = [field for field in re.split(r"[ \t\r]+", line) if field]
    for field in fields:
        inner = next((char for char in field.strip() if char.isspace()), None)
        if inner is not None:
            return (f": {where} holds U+{ord(inner):04X}, a Unicode space that also separates fields and hardly "
                    "shows in an editor: remove it")
    visible = [position for position, field in enumerate(fields) if not field.isspace()]
    lone = next((field for field in fields[:visible[-1] if visible else 0] if field.isspace()), None)
    if lone is None and lacking:
        lone = next((char for char in line if char.isspace() and char not in " \t\r\n"), None)
    if lone is None:
        return ""
    return (f": {where} holds {_characters(lone)}, a Unicode space, read as a separator, not a field, that hardly "
            "shows in an editor: write the word or tag it stands for, or remove it")


def check_tag_scheme(path: str, tags_per_sentence: list[list[str]]) -> None:
    """IOB tags and plain tags must not be mixed in one file (a sign of a wrong column)."""
    tags = {t for sentence in tags_per_sentence for t in sentence} - {"O", "o"}
    prefixed = {t for t in tags if split_tag(t)[0] is not None}
    if prefixed and prefixed != tags:
        plain = sorted(tags - prefixed)[:3]
        raise DataError(path, f"mixed tagging schemes: IOB tags like {sorted(prefixed)[0]!r} beside plain "
                              f"tags like {plain}; choose one scheme or another "
                              f"{option('--tag-column', 'DataOptions(tag_column=...)')}")


def read_tagging(path: str, tag_column: int = -1, tokens_field: str = "tokens",
                 tags_field: str = "tags") -> datasets.Dataset:
    """Read CoNLL columns (blank lines between sentences, ``-DOCSTART-`` skipped) or JSONL."""
    import datasets
    if path.startswith(HUB_PREFIX):
        tokens, tags = _hub_examples(path, "tagging", tokens_field, tags_field)
        lines = [None] * len(tokens)
    elif _format(path) in ("csv", "tsv"):
        raise OtherTaskData(path, f"is {_format(path).upper()} (classification data), but this command or model tags "
                                  "words: use CoNLL columns or JSONL with tokens and tags")
    elif _format(path) == "jsonl":
        tokens, tags, lines = [], [], []
        for number, record in _json_records(path):
            _wrong_task(path, list(record), "tagging", number)
            _require_columns(path, list(record), [tokens_field, tags_field], number)
            if not isinstance(record[tokens_field], list) or not isinstance(record[tags_field], list):
                raise DataError(path, f"{tokens_field!r} and {tags_field!r} must be lists, one tag per token", number)
            if len(record[tokens_field]) != len(record[tags_field]):
                raise DataError(path, "tokens and tags differ in length", number)
            if not record[tokens_field]:
                raise DataError(path, "empty token list", number)
            if not all(isinstance(t, (str, int)) and not isinstance(t, bool) for t in record[tags_field]):
                raise DataError(path, f"{tags_field!r} must hold strings (or integer ids), one per token", number)
            tokens.append(_json_words(path, record[tokens_field], number))
            for position, t in enumerate(record[tags_field], 1):
                _check_visible(path, str(t), f"tag {position}", number)
            tags.append([_surrogate_free(path, str(t).strip(), f"tag {position}", number)
                         for position, t in enumerate(record[tags_field], 1)])
            if not all(tags[-1]):  # "" would become a class of its own, as a CSV's empty label is refused
                raise DataError(path, f"tag {tags[-1].index('') + 1} is empty or blank", number)
            lines.append(number)
    else:
        tokens, tags, lines = [], [], []
        for start, words, labels in _conll_sentences(path, tag_column):
            tokens.append(words)
            tags.append(labels)
            lines.append(start)
    if not tokens:
        raise DataError(path, "no sentences")
    for line, words in zip(lines, tokens):  # students read whole sentences: bound their memory
        _check_length(path, " ".join(map(str, words)), line)
    check_tag_scheme(path, tags)
    return datasets.Dataset.from_dict({"tokens": tokens, "tags": tags})


# Unlabeled input named as plain text is read one example per line; its first lines are sniffed first,
# so a labelled file under a .txt name (CoNLL-2003's own files are train.txt) is refused, not read as texts.
