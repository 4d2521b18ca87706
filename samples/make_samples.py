#!/usr/bin/env python
"""Regenerate the synthetic sample data in this folder.

Every sentence is assembled from the templates and invented word lists below
(seeded, so the output is identical on every run); nothing is taken from a
research dataset. Run from anywhere::

    python samples/make_samples.py

Writes sentiment_{train,dev,test}.csv, topics_{train,dev}.csv,
ner_{train,dev,test}.conll, unlabeled_movies.txt and unlabeled_news.txt.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = "distill-samples-v1"

# ---------------------------------------------------------------------------
# Sentiment: one-sentence movie-review snippets
# ---------------------------------------------------------------------------

ADJ = {
    "positive": "gripping charming moving witty beautiful brilliant heartfelt delightful clever "
                "thrilling luminous tender inventive hilarious engaging stunning assured poignant "
                "rousing graceful".split(),
    "negative": "dull tedious clumsy bland lifeless predictable shallow messy boring forgettable "
                "overlong tiresome hollow sloppy grating stale muddled joyless flat cynical".split(),
}
VP = {
    "positive": ["kept me on the edge of my seat", "left the whole audience smiling",
                 "earns every one of its tears", "rewards a second viewing", "never wastes a scene",
                 "finds real warmth in small moments", "builds to a genuinely satisfying finale",
                 "lingers in the memory for days"],
    "negative": ["overstays its welcome", "put half the theater to sleep", "wastes a talented cast",
                 "collapses in the final act", "feels like a chore to sit through",
                 "never finds its footing", "runs out of ideas after twenty minutes",
                 "mistakes noise for excitement"],
}
VERDICT = {
    "positive": ["a rare treat", "one of the best films of the year", "well worth seeing",
                 "a small triumph", "a joy from start to finish", "an easy recommendation"],
    "negative": ["a waste of two hours", "a real letdown", "best avoided", "a misfire from start to finish",
                 "an exercise in patience", "a forgettable mess"],
}
FEEL = {
    "positive": ["loved every minute of", "was completely won over by", "can't stop thinking about",
                 "would happily watch again", "laughed all the way through"],
    "negative": ["was bored by", "could not wait for the end of", "regret paying to see",
                 "walked out halfway through", "nearly fell asleep during"],
}
NEGATOR = ["not", "never", "hardly", "far from", "anything but", "not exactly"]
ASPECT = ("plot script cast dialogue soundtrack ending pacing screenplay cinematography animation "
          "lead performance direction score editing").split()
GENRE = "drama comedy thriller debut adventure romance western mystery documentary sequel remake".split()
INTENS = ["", "", "", "remarkably ", "thoroughly ", "surprisingly ", "genuinely ", "utterly ", "quite "]
SUBJ = ["the film", "this movie", "the sequel", "the director's latest", "this documentary", "the remake"]
TITLE = ["Midnight Harbor", "The Glass Orchard", "Paper Lanterns", "Northbound", "The Quiet Year",
         "Salt and Iron", "Echo Valley", "The Last Ferry", "Copper Sky", "Winter Letters",
         "A House of Kites", "The Lantern Keeper"]
ACTOR = ["Mara Quill", "Teodor Vance", "Ines Calloway", "Rufus Ambrose", "Delphine Oakes",
         "Jonah Whitlock", "Priya Venn", "Oskar Lindell"]
ROLE = ["the weary detective", "a grieving father", "the young captain", "a retired boxer", "the village doctor"]
NEUTRAL = ["{title} opens in theaters on Friday.", "The film runs just under two hours.",
           "{actor} plays {role} in {title}.", "{title} was shot over six weeks on location.",
           "The story follows {role} through one long winter.", "{title} is the second film from its director.",
           "The screening was followed by a question-and-answer session with {actor}."]


def a_an(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def review(rng: random.Random, p: str) -> str:
    """One snippet whose overall polarity is ``p``; many mix in words of the other polarity."""
    q = "negative" if p == "positive" else "positive"
    c = rng.choice
    adj, opp = c(ADJ[p]), c(ADJ[q])
    aspect, aspect2 = rng.sample(ASPECT, 2)
    templates = [
        lambda: f"{c(SUBJ)} is {c(INTENS)}{adj}.",
        lambda: f"the {aspect} is {c(INTENS)}{adj}.",
        lambda: f"{c(SUBJ)} is {c(NEGATOR)} {opp}.",                        # negation flips a word
        lambda: f"the {aspect} is {c(NEGATOR)} {opp}, and the {aspect2} is {adj}.",
        lambda: f"{c(SUBJ)} {c(VP[p])}.",
        lambda: f"{a_an(c(INTENS) + adj)} {c(GENRE)} that {c(VP[p])}.",
        lambda: f"the {aspect} is {opp}, but the {aspect2} is {adj} enough to make up for it."
        if p == "positive" else f"the {aspect} is {opp}, but the film as a whole {c(VP[p])}.",
        lambda: f"despite {a_an(opp)} {aspect}, the {c(GENRE)} {c(VP[p])}.",
        lambda: f"I {c(FEEL[p])} {c(['this film', 'it', c(TITLE)])}.",
        lambda: f"{c(TITLE)} is {c(VERDICT[p])}.",
        lambda: f"not even {c(ACTOR)}'s {opp} performance can save this {adj} {c(GENRE)}."
        if p == "negative" else f"even {a_an(opp)} final act cannot spoil this {adj} {c(GENRE)}.",
        lambda: f"{c(ACTOR)} is {adj} as {c(ROLE)}, and the {aspect} {c(VP[p])}.",
        lambda: f"{c(['sadly', 'honestly', 'frankly', 'in the end'])}, {c(TITLE)} is {c(VERDICT[p])}.",
    ]
    text = c(templates)()
    return text[0].upper() + text[1:]


def neutral(rng: random.Random) -> str:
    return rng.choice(NEUTRAL).format(title=rng.choice(TITLE), actor=rng.choice(ACTOR), role=rng.choice(ROLE))


# ---------------------------------------------------------------------------
# Topics: hierarchical labels Parent/Leaf
# ---------------------------------------------------------------------------

TOPIC_PARENT = {
    "Science": (["Researchers", "Scientists", "A university team", "A new study", "The laboratory"],
                ["measured", "reported", "described", "modelled", "confirmed"]),
    "Sports": (["The coach", "The team", "Fans", "The captain", "The defending champion"],
               ["celebrated", "complained about", "praised", "struggled with", "talked about"]),
    "Arts": (["Critics", "The audience", "The artist", "A festival jury", "The producer"],
             ["admired", "debated", "praised", "dismissed", "celebrated"]),
}
TOPIC_LEAF = {
    "Science/Physics": ["a quantum effect in cold atoms", "the mass of the neutrino", "a new superconductor",
                        "gravitational waves from a distant merger", "electrons moving through graphene",
                        "a laser that cools particles", "the magnetic field of a star", "dark matter signals"],
    "Science/Biology": ["a protein that folds twice", "bacteria living in deep sediment", "a gene linked to sleep",
                        "the immune response of bats", "a fungus that feeds on plastic",
                        "coral reefs recovering from heat", "neurons that store smell", "a new species of frog"],
    "Sports/Football": ["a late penalty", "the striker's hat-trick", "an offside goal in the derby",
                        "the goalkeeper's double save", "a header from a corner kick", "the midfield pressing",
                        "a red card for the defender", "the league table"],
    "Sports/Tennis": ["a tiebreak in the fifth set", "her serve and volley game", "twenty aces on grass",
                      "a double fault on match point", "his backhand down the line", "the clay court swing",
                      "a new racket sponsor", "the grand slam draw"],
    "Arts/Music": ["the orchestra's new symphony", "a jazz album recorded live", "the band's farewell tour",
                   "a choir singing in the cathedral", "the piano concerto", "lyrics about the sea",
                   "a guitar solo that lasted ten minutes", "the opera's final aria"],
    "Arts/Film": ["the director's new documentary", "a screenplay about two sisters", "the premiere of the sequel",
                  "the box office numbers", "the cast of the thriller", "a film shot on a single camera",
                  "the editing of the war drama", "the festival's opening film"],
}
# Parent-level phrases say which parent but not which leaf: they make sibling
# confusions (right parent, wrong leaf) the typical error, as hierarchical metrics expect.
TOPIC_SHARED = {
    "Science": ["the results of the experiment", "a paper in a leading journal", "the new measurements",
                "funding for the laboratory", "the data from last year"],
    "Sports": ["the final on Sunday", "the season so far", "the injury to the captain",
               "ticket prices for the final", "the new training ground"],
    "Arts": ["the reviews", "the award ceremony", "the opening night", "ticket sales", "the new venue"],
}
TOPIC_TEMPLATES = [
    "{S} {v} {x}.",
    "{S} {v} {x} on Tuesday.",
    "Everyone is talking about {x}.",
    "{S} {v} {x}, and {s2} {v2} {y}.",
    "After weeks of silence, {s} {v} {x}.",
    "{S} {v} what they called {x}.",
    "In an interview, {s} {v} {x}.",
]


def topic_sentence(rng: random.Random, label: str) -> str:
    parent = label.split("/")[0]
    subjects, verbs = TOPIC_PARENT[parent]
    s, s2 = rng.sample(subjects, 2)
    x, y = rng.sample(TOPIC_LEAF[label], 2)
    if rng.random() < 0.25:
        x = rng.choice(TOPIC_SHARED[parent])
        y = rng.choice([y] + TOPIC_SHARED[parent])
    text = rng.choice(TOPIC_TEMPLATES).format(S=s, s=s[0].lower() + s[1:], s2=s2[0].lower() + s2[1:],
                                              v=rng.choice(verbs), v2=rng.choice(verbs), x=x, y=y)
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------------------
# NER: CoNLL-2003 style "word POS chunk NER", IOB2
# ---------------------------------------------------------------------------

FIRST = ("Anna Tomas Lina Marek Sofia Elias Nadia Viktor Clara Rafael Ingrid Omar Helena Bruno Yara "
         "Felix Greta Dario Mina Lukas").split()
LAST = ("Keller Varga Okafor Lindqvist Moreau Petrov Haddad Brennan Novak Castell Adeyemi Sorensen "
        "Falk Romano Whitfield Ibarra Kovac Delacroix Strand Mwangi").split()
LOC = ["Velmora", "Port Halden", "Altavia", "Kestrel Bay", "Dunmore", "Rivermouth", "East Tarwick",
       "Mount Sable", "Orvane", "New Aster", "Lake Orrin", "Saint Idris", "North Carvel", "Brisk Harbour",
       "Tolvania", "Greywater", "Marrow Hills", "Ostend Vale", "Caldera City", "Westmarch"]
ORG = ["Halden Steel", "Northwind Airways", "Velmora United", "Altavia Central Bank", "United Farmers Union",
       "Brightline Energy", "Orvane Institute of/IN Technology", "Kestrel Rovers", "Greywater Telecom",
       "Caldera Motors", "National Health Council", "Tarwick Athletic", "Aster Media Group",
       "Bank of/IN Dunmore", "Sable Mining", "Westmarch Chronicle", "Rivermouth City", "Orrin Pharma",
       "Harbour Party", "Idris Daily"]
MISC_ADJ = ["Altavian", "Velmoran", "Tolvanian", "Dunmorian", "Orvanese", "Kestrelian", "Westmarcher",
            "Carvelian", "Asterian", "Greywatch"]
MISC_NAME = ["Harbour Cup", "Northern Games", "Silver Ribbon Prize", "Autumn Classic", "Orvane Open",
             "Continental Shield", "Aster Film Festival", "Sable Marathon", "Westmarch Grand Prix",
             "Winter Series", "The/DT Last Ferry", "Copper Sky"]
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

# Template tokens are word/POS; {SLOT}s are filled below. "^" before a token starts a new chunk.
NER_TEMPLATES = """
{ORG} said/VBD on/IN {DAY} it/PRP would/MD cut/VB {NUM} jobs/NNS in/IN {LOC} ./.
{PER} ,/, a/DT spokesman/NN for/IN {ORG} ,/, told/VBD reporters/NNS in/IN {LOC} that/IN the/DT talks/NNS had/VBD failed/VBN ./.
{LOC} beat/VBD {LOC} ^{SCORE} in/IN the/DT {MISC} final/NN on/IN {DAY} ./.
{ADJ} police/NNS arrested/VBD {NUM} people/NNS near/IN {LOC} ./.
{PER} of/IN {LOC} won/VBD the/DT {MISC} on/IN {DAY} ./.
Shares/NNS in/IN {ORG} rose/VBD {NUM} percent/NN after/IN the/DT company/NN named/VBD {PER} as/IN chief/JJ executive/NN ./.
The/DT {ADJ} government/NN has/VBZ asked/VBN {ORG} to/TO investigate/VB the/DT accident/NN ./.
{PER} (/( {LOC} )/) {TIME}
{LOCUP} {DATE}
{PER} told/VBD the/DT {ORG} that/IN she/PRP would/MD not/RB stand/VB again/RB ./.
The/DT {MISC} will/MD be/VB held/VBN in/IN {LOC} ^next/JJ year/NN ,/, organisers/NNS said/VBD ./.
{ORG} and/CC {ORG} agreed/VBD to/TO merge/VB in/IN a/DT deal/NN worth/IN {NUM} million/CD dollars/NNS ./.
{PER} ,/, who/WP joined/VBD {ORG} ^last/JJ year/NN ,/, scored/VBD twice/RB against/IN {ORG} ./.
Prime/NNP Minister/NNP {PER} arrived/VBD in/IN {LOC} on/IN {DAY} for/IN talks/NNS with/IN {ADJ} leaders/NNS ./.
The/DT {ADJ} film/NN "/" {MISC} "/" opened/VBD in/IN {LOC} on/IN {DAY} ./.
Rain/NN delayed/VBD play/NN at/IN the/DT {MISC} in/IN {LOC} ./.
{PER} said/VBD :/: "/" We/PRP are/VBP very/RB happy/JJ with/IN the/DT result/NN ./. "/"
Officials/NNS in/IN {LOC} said/VBD the/DT storm/NN had/VBD damaged/VBN {NUM} homes/NNS ./.
{PER} will/MD replace/VB {PER} as/IN coach/NN of/IN {ORG} ./.
{PER} ,/, {NUM} ,/, has/VBZ played/VBN for/IN {ORG} since/IN {YEAR} ./.
Talks/NNS between/IN {LOC} and/CC {LOC} resumed/VBD on/IN {DAY} ./.
{ADJ} and/CC {ADJ} troops/NNS crossed/VBD the/DT border/NN near/IN {LOC} ./.
{ORG} spokeswoman/NN {PER} declined/VBD to/TO comment/VB ./.
The/DT {NUM}-year-old/JJ {ADJ} reached/VBD the/DT semi-finals/NNS of/IN the/DT {MISC} ./.
Results/NNS of/IN the/DT {MISC} on/IN {DAY} :/:
The/DT central/JJ bank/NN left/VBD interest/NN rates/NNS ^unchanged/JJ at/IN {NUM} percent/NN ./.
{PER} and/CC {PER} will/MD meet/VB in/IN {LOC} ^next/JJ week/NN to/TO discuss/VB the/DT {ADJ} proposal/NN ./.
A/DT court/NN in/IN {LOC} fined/VBD {ORG} ^{NUM} million/CD dollars/NNS for/IN breaking/VBG safety/NN rules/NNS ./.
{PER} (/( {ORG} )/) finished/VBD second/JJ ,/, {NUM} seconds/NNS behind/IN {PER} ./.
Thousands/NNS of/IN people/NNS marched/VBD through/IN {LOC} on/IN {DAY} to/TO protest/VB against/IN the/DT plan/NN ./.
{ORG} said/VBD it/PRP expected/VBD sales/NNS in/IN {LOC} to/TO grow/VB ^next/JJ year/NN ./.
"/" It/PRP was/VBD a/DT difficult/JJ game/NN ,/, "/" said/VBD {PER} ,/, the/DT {ORG} captain/NN ./.
Police/NNS said/VBD a/DT man/NN from/IN {LOC} had/VBD been/VBN arrested/VBN ./.
The/DT {ADJ} newspaper/NN {ORG} reported/VBD that/IN {PER} would/MD resign/VB ./.
Standings/NNS after/IN {DAY} 's/POS matches/NNS :/:
Inflation/NN rose/VBD to/TO {NUM} percent/NN in/IN March/NNP ,/, the/DT statistics/NNS office/NN said/VBD ./.
{PER} ,/, the/DT {ADJ} foreign/JJ minister/NN ,/, visited/VBD {LOC} and/CC {LOC} ./.
{ORG} fans/NNS celebrated/VBD in/IN the/DT streets/NNS of/IN {LOC} until/IN late/JJ on/IN {DAY} ./.
"""
NP_POS = {"DT", "PDT", "JJ", "JJR", "JJS", "NN", "NNS", "NNP", "NNPS", "PRP", "PRP$", "CD", "POS", "WP"}


def entity(name: str, tag: str, default_pos: str = "NNP") -> list[tuple[str, str, str]]:
    """"Bank of/IN Dunmore" -> [(Bank, NNP, B-ORG), (of, IN, I-ORG), (Dunmore, NNP, I-ORG)]."""
    out = []
    for i, part in enumerate(name.split()):
        word, _, pos = part.partition("/")
        out.append((word, pos or default_pos, ("B-" if i == 0 else "I-") + tag))
    return out


def person(rng: random.Random, first: list[str], last: list[str]) -> str:
    r = rng.random()
    if r < 0.2:
        return rng.choice(last)
    if r < 0.3:
        return f"{rng.choice(first)} {rng.choice('ABCDJKLMRST')}. {rng.choice(last)}"
    return f"{rng.choice(first)} {rng.choice(last)}"


def chunk_tags(tokens: list[tuple[str, str, str, bool]]) -> list[str]:
    """Plausible IOB2 chunk tags from POS tags (NP / VP / PP / ADVP / SBAR / O)."""
    kinds = []
    for i, (word, pos, _, _) in enumerate(tokens):
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if pos in NP_POS:
            kind = "NP"
        elif pos.startswith("VB") or pos == "MD":
            kind = "VP"
        elif pos == "TO":
            kind = "VP" if nxt.startswith("VB") else "PP"
        elif pos == "IN":
            kind = "SBAR" if word == "that" else "PP"
        elif pos == "RB":
            kind = "VP" if kinds and kinds[-1] == "VP" and nxt.startswith("VB") else "ADVP"
        else:
            kind = "O"
        kinds.append(kind)
    tags = []
    for i, kind in enumerate(kinds):
        cont = i > 0 and kinds[i - 1] == kind and not tokens[i][3] and tokens[i][1] != "POS"
        tags.append("O" if kind == "O" else ("I-" if cont else "B-") + kind)
    return tags


def ner_sentence(rng: random.Random, template: str, lists: dict) -> list[tuple[str, str, str, str]]:
    tokens: list[tuple[str, str, str, bool]] = []  # word, pos, ner, starts_new_chunk
    for item in template.split():
        new_chunk = item.startswith("^")
        item = item.lstrip("^")
        if item.startswith("{"):
            slot = item[1:item.index("}")]
            rest = item[item.index("}") + 1:]
            if slot == "PER":
                parts = entity(person(rng, lists["first"], lists["last"]), "PER")
            elif slot in ("LOC", "LOCUP"):
                parts = entity(rng.choice(lists["loc"]), "LOC")
                if slot == "LOCUP":
                    parts = [(w.upper(), p, t) for w, p, t in parts]
            elif slot == "ORG":
                parts = entity(rng.choice(lists["org"]), "ORG")
            elif slot == "MISC":
                parts = entity(rng.choice(lists["misc"]), "MISC")
            elif slot == "ADJ":
                parts = entity(rng.choice(lists["adj"]), "MISC", "JJ")
            else:
                value = {"NUM": lambda: str(rng.choice([2, 3, 4, 5, 6, 8, 12, 15, 20, 25, 40, 120, 300])),
                         "SCORE": lambda: f"{rng.randint(0, 4)}-{rng.randint(0, 3)}",
                         "DAY": lambda: rng.choice(DAYS),
                         "YEAR": lambda: str(rng.randint(1998, 2016)),
                         "TIME": lambda: f"{rng.randint(2, 3)}:{rng.randint(10, 59)}.{rng.randint(10, 99)}",
                         "DATE": lambda: f"1997-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}[slot]()
                rest, _, pos = rest.partition("/")  # {NUM}-year-old/JJ
                parts = [(value + rest, pos or ("NNP" if slot == "DAY" else "CD"), "O")]
            tokens += [(w, p, t, new_chunk and i == 0) for i, (w, p, t) in enumerate(parts)]
        else:
            word, _, pos = item.rpartition("/")
            tokens.append((word, pos, "O", new_chunk))
    return [(w, p, c, t) for (w, p, t, _), c in zip(tokens, chunk_tags(tokens))]


def ner_documents(rng: random.Random, n: int, lists: dict, exclude: set) -> list[list[list[tuple]]]:
    """``n`` unique sentences grouped into documents that open with a dateline."""
    templates = [t for t in NER_TEMPLATES.strip().splitlines() if not t.startswith("{LOCUP}")]
    docs, made = [], 0
    while made < n:
        doc = [ner_sentence(rng, "{LOCUP} {DATE}", lists)]
        size = rng.randint(8, 16)
        while len(doc) < size and made + len(doc) < n:
            sent = ner_sentence(rng, rng.choice(templates), lists)
            key = " ".join(w for w, *_ in sent)
            if key not in exclude:
                exclude.add(key)
                doc.append(sent)
        docs.append(doc)
        made += len(doc)
    return docs


def ner_lists(fraction: float) -> dict:
    """The first ``fraction`` of every name list (training sees fewer names than dev/test)."""
    def head(xs):
        return xs[: max(1, round(len(xs) * fraction))]
    return {"first": head(FIRST), "last": head(LAST), "loc": head(LOC), "org": head(ORG),
            "misc": head(MISC_NAME), "adj": head(MISC_ADJ)}


# ---------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------


def write_csv(name: str, rows: list[tuple[str, str]]) -> None:
    with open(HERE / name, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def write_lines(name: str, lines: list[str]) -> None:
    (HERE / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_conll(name: str, docs: list) -> None:
    out = []
    for doc in docs:
        out += ["-DOCSTART- -X- -X- O", ""]
        for sent in doc:
            out += [" ".join(tok) for tok in sent] + [""]
    (HERE / name).write_text("\n".join(out) + "\n", encoding="utf-8")


def unique(gen, n: int, seen: set) -> list[str]:
    out = []
    while len(out) < n:
        text = gen()
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def main() -> None:
    # Sentiment: balanced, no text shared between splits.
    rng = random.Random(f"{SEED}-sentiment")
    seen: set[str] = set()
    splits = {}
    for split, n in [("train", 240), ("dev", 60), ("test", 60)]:
        rows = [(t, p) for p in ("positive", "negative") for t in unique(lambda: review(rng, p), n // 2, seen)]
        rng.shuffle(rows)
        splits[split] = rows
    # `make demo` pipes the first two test texts through `cut -d, -f1`: keep them comma-free.
    test = splits["test"]
    for p in ("negative", "positive"):
        i = next(i for i, (t, label) in enumerate(test) if label == p and "," not in t and '"' not in t)
        test.insert(0, test.pop(i))
    for split, rows in splits.items():
        write_csv(f"sentiment_{split}.csv", rows)
    movies = unique(lambda: neutral(rng) if rng.random() < 0.15 else review(rng, rng.choice(["positive", "negative"])),
                    300, seen)
    write_lines("unlabeled_movies.txt", movies)

    # Topics: 6 leaves under 3 parents, balanced.
    rng = random.Random(f"{SEED}-topics")
    seen = set()
    for split, per_leaf in [("train", 27), ("dev", 7)]:
        rows = [(t, leaf) for leaf in TOPIC_LEAF for t in unique(lambda: topic_sentence(rng, leaf), per_leaf, seen)]
        rng.shuffle(rows)
        write_csv(f"topics_{split}.csv", rows)

    # NER: training sees 75% of the names; dev/test also hold unseen ones.
    rng = random.Random(f"{SEED}-ner")
    seen = set()
    for split, n, fraction in [("train", 300, 0.75), ("dev", 80, 1.0), ("test", 80, 1.0)]:
        write_conll(f"ner_{split}.conll", ner_documents(rng, n, ner_lists(fraction), seen))
    docs = ner_documents(rng, 360, ner_lists(1.0), seen)
    news = [" ".join(w for w, *_ in sent) for doc in docs for sent in doc[1:]]  # no datelines
    write_lines("unlabeled_news.txt", news[:300])


if __name__ == "__main__":
    main()
