"""`--labels` for teachers without training data: names, descriptions, and one-line refusals."""

import pytest

from distill.errors import DistillError
from distill.label_names import parse_labels


def test_names_and_descriptions_are_read_in_order_and_written_back():
    labels = parse_labels("negative=a negative review, positive=a positive review|a rave,neutral=neutral")
    assert labels.names == ("negative", "positive", "neutral")
    assert labels.descriptions[1] == ("a positive review", "a rave")
    assert labels.description("neutral") == "neutral"
    assert parse_labels(labels.as_text()) == labels


@pytest.mark.parametrize("text", ["positive", "a,a", "a=,b", "=x,b", "a,b=x|", "negative=bad,positive=bad",
                                  "negative=awful|a Bad  film,positive=great|a bad film", "a,b=A"])
def test_bad_label_lists_are_refused(text):
    with pytest.raises(DistillError):
        parse_labels(text)


@pytest.mark.parametrize("text, shown", [("\u200b,positive", "'\\u200b'"), ("negative=bad,positive=\u200b", "'positive=\\u200b'")])
def test_a_label_or_words_that_show_nothing_are_refused(text, shown):
    """A zero-width space pasted alone was a label (or words) that shows nothing, where data's labels are refused so."""
    with pytest.raises(DistillError) as error:
        parse_labels(text)
    assert str(error.value) == f"labels: the label {shown} is only U+200B ZERO WIDTH SPACE, which shows nothing " \
                               "(pasted from a web page or a word processor?): give it visible text, or remove it"


def test_a_comma_in_words_is_refused_in_one_text_and_kept_in_a_list():
    """Was: "negative=bad, awful,positive=good" read as three labels, 'awful' one of them."""
    with pytest.raises(DistillError) as error:
        parse_labels("negative=bad, awful,positive=good")
    assert str(error.value) == "labels: 'awful' after 'negative=bad' is ambiguous, a label of its own or words of the " \
                               "one before: write awful=awful for a label, or give labels as a list, whose words " \
                               "may hold commas"
    labels = parse_labels(["negative=bad, awful", "positive=good"])
    assert labels.names == ("negative", "positive") and labels.descriptions[0] == ("bad, awful",)
    assert parse_labels("neutral,negative=bad").names == ("neutral", "negative")  # a name alone before: no doubt
    mixed = parse_labels("neutral,negative=bad,positive=positive")
    assert mixed.as_text() == "neutral,negative=bad,positive=positive" and parse_labels(mixed.as_text()) == mixed


@pytest.mark.parametrize("text", ["caf\u00e9,cafe\u0301", "good,goo\u200bd", "x=\ufb01ne,y=fine", "a=Bad  Film,b=bad film"])
def test_labels_described_alike_by_the_datas_spelling_rule_are_refused(text):
    """Was: two labels whose words differ only in Unicode form or an invisible character (café typed two ways, a
    zero-width space) were two labels that print alike and that a teacher reads alike: every score 0.5. A data file
    of the two spellings is refused (labels.spelling_key)."""
    with pytest.raises(DistillError, match=r"^labels describes \S+ and \S+ alike \(.*\): each label needs words of its "
                                           r"own$"):
        parse_labels(text)
