"""Checks the CRF against brute-force enumeration on tiny problems."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
import torch

from distill.crf import ConditionalRandomField
from distill.inference import model_crf, predict_logits, prediction_records
from distill.labels import LabelHierarchy
from distill.models.students import build_student
from tests.conftest import config_for

K = 3


def make_crf(seed: int = 0) -> ConditionalRandomField:
    """CRF with large random parameters so transitions actually matter."""
    torch.manual_seed(seed)
    crf = ConditionalRandomField(K).double()
    with torch.no_grad():
        crf.transitions.normal_()
        crf.start_transitions.normal_()
        crf.end_transitions.normal_()
    return crf


def path_score(crf: ConditionalRandomField, emissions: torch.Tensor, path: tuple[int, ...]) -> float:
    """Score of one path for a single unpadded sequence; emissions (L, K)."""
    s = crf.start_transitions[path[0]] + emissions[0, path[0]]
    for t in range(1, len(path)):
        s = s + crf.transitions[path[t - 1], path[t]] + emissions[t, path[t]]
    s = s + crf.end_transitions[path[-1]]
    return float(s.detach())


def brute_nll(crf: ConditionalRandomField, emissions: torch.Tensor, gold: list[int]) -> float:
    """-log p(gold) by enumerating all K^L paths."""
    scores = [path_score(crf, emissions, p) for p in itertools.product(range(K), repeat=len(gold))]
    log_z = float(torch.logsumexp(torch.tensor(scores, dtype=torch.float64), dim=0))
    return log_z - path_score(crf, emissions, tuple(gold))


def brute_viterbi(crf: ConditionalRandomField, emissions: torch.Tensor, length: int) -> list[int]:
    paths = list(itertools.product(range(K), repeat=length))
    return list(max(paths, key=lambda p: path_score(crf, emissions, p)))


def mixed_batch(seed: int = 1, lengths: tuple[int, ...] = (4, 1, 3, 2)):
    """Random emissions/tags with garbage (-100 tags, huge emissions) under padding."""
    torch.manual_seed(seed)
    batch, seq_len = len(lengths), max(lengths)
    emissions = torch.randn(batch, seq_len, K, dtype=torch.float64) * 2
    tags = torch.randint(0, K, (batch, seq_len))
    mask = torch.arange(seq_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    emissions = torch.where(mask.unsqueeze(2), emissions, torch.full_like(emissions, 1e4))
    tags = torch.where(mask, tags, torch.full_like(tags, -100))
    return emissions, tags, mask


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_nll_matches_brute_force_single(length: int) -> None:
    crf = make_crf(length)
    torch.manual_seed(100 + length)
    emissions = torch.randn(1, length, K, dtype=torch.float64) * 2
    tags = torch.randint(0, K, (1, length))
    mask = torch.ones(1, length, dtype=torch.bool)
    got = crf.neg_log_likelihood(emissions, tags, mask).item()
    expected = brute_nll(crf, emissions[0], tags[0].tolist())
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_nll_matches_brute_force_mixed_lengths() -> None:
    crf = make_crf()
    emissions, tags, mask = mixed_batch()
    got = crf.neg_log_likelihood(emissions, tags, mask).item()
    per_seq = []
    for b in range(emissions.size(0)):
        n = int(mask[b].sum())
        per_seq.append(brute_nll(crf, emissions[b, :n], tags[b, :n].tolist()))
        # Each sequence alone (unpadded) must agree with brute force too.
        alone = crf.neg_log_likelihood(emissions[b : b + 1, :n], tags[b : b + 1, :n], mask[b : b + 1, :n])
        assert alone.item() == pytest.approx(per_seq[-1], rel=1e-9, abs=1e-9)
    assert math.isfinite(got)
    assert got == pytest.approx(sum(per_seq) / len(per_seq), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_viterbi_matches_brute_force_single(length: int) -> None:
    crf = make_crf(10 + length)
    torch.manual_seed(200 + length)
    emissions = torch.randn(1, length, K, dtype=torch.float64) * 2
    mask = torch.ones(1, length, dtype=torch.bool)
    assert crf.decode(emissions, mask) == [brute_viterbi(crf, emissions[0], length)]


def test_viterbi_matches_brute_force_mixed_lengths() -> None:
    for seed in range(5):
        crf = make_crf(seed)
        emissions, _, mask = mixed_batch(seed=50 + seed)
        decoded = crf.decode(emissions, mask)
        lengths = mask.sum(dim=1).tolist()
        assert [len(p) for p in decoded] == lengths
        for b, n in enumerate(lengths):
            assert decoded[b] == brute_viterbi(crf, emissions[b, :n], n)


def test_padding_does_not_change_results() -> None:
    crf = make_crf(3)
    emissions, tags, mask = mixed_batch(seed=7)
    nll = crf.neg_log_likelihood(emissions, tags, mask)
    paths = crf.decode(emissions, mask)

    torch.manual_seed(99)
    extra = 3
    batch = emissions.size(0)
    pad_em = torch.randn(batch, extra, K, dtype=torch.float64) * 1e3
    pad_tags = torch.randint(-100, 100, (batch, extra))
    pad_mask = torch.zeros(batch, extra, dtype=torch.bool)
    emissions2 = torch.cat([emissions, pad_em], dim=1)
    # Also scramble the already-padded region of the original batch.
    emissions2 = torch.where(
        torch.cat([mask, pad_mask], dim=1).unsqueeze(2), emissions2, -emissions2.abs() - 5e3
    )
    tags2 = torch.cat([tags, pad_tags], dim=1)
    mask2 = torch.cat([mask, pad_mask], dim=1)

    nll2 = crf.neg_log_likelihood(emissions2, tags2, mask2)
    assert torch.allclose(nll, nll2, rtol=0, atol=1e-12)
    assert crf.decode(emissions2, mask2) == paths


def test_gradient_flows() -> None:
    crf = make_crf(4).float()
    emissions, tags, mask = mixed_batch(seed=8)
    emissions = emissions.float().requires_grad_(True)
    loss = crf.neg_log_likelihood(emissions, tags, mask)
    loss.backward()
    for p in (crf.transitions, crf.start_transitions, crf.end_transitions):
        assert p.grad is not None
        assert torch.isfinite(p.grad).all()
        assert p.grad.abs().sum() > 0
    assert emissions.grad is not None and torch.isfinite(emissions.grad).all()
    # Padding positions must receive no gradient.
    assert (emissions.grad[~mask] == 0).all()


def test_non_finite_padding_emissions_are_ignored() -> None:
    crf = make_crf(5)
    emissions, tags, mask = mixed_batch(seed=9)
    expected = crf.neg_log_likelihood(emissions, tags, mask)
    paths = crf.decode(emissions, mask)
    bad = emissions.masked_fill(~mask.unsqueeze(2), float("-inf")).requires_grad_(True)
    loss = crf.neg_log_likelihood(bad, tags, mask)
    loss.backward()
    assert torch.allclose(loss, expected, rtol=0, atol=1e-12)
    assert torch.isfinite(bad.grad).all()
    assert torch.isfinite(crf.transitions.grad).all()
    assert crf.decode(bad.detach(), mask) == paths


def test_default_init_is_small_uniform() -> None:
    crf = ConditionalRandomField(5)
    for p in (crf.transitions, crf.start_transitions, crf.end_transitions):
        assert p.abs().max() <= 0.1
    assert crf.transitions.shape == (5, 5)


def brute_marginals(crf: ConditionalRandomField, emissions: torch.Tensor) -> torch.Tensor:
    """p(tag_t = k | sentence) by enumerating all K^L paths; emissions (L, K)."""
    length = emissions.size(0)
    paths = list(itertools.product(range(K), repeat=length))
    probs = torch.softmax(torch.tensor([path_score(crf, emissions, p) for p in paths], dtype=torch.float64), 0)
    marginals = torch.zeros(length, K, dtype=torch.float64)
    for path, prob in zip(paths, probs):
        for t, k in enumerate(path):
            marginals[t, k] += prob
    return marginals


def test_marginals_match_brute_force_with_a_shorter_sequence() -> None:
    crf = make_crf(6)
    torch.manual_seed(300)
    emissions = torch.randn(2, 3, K, dtype=torch.float64) * 2
    mask = torch.tensor([[True, True, True], [True, True, False]])
    emissions[1, 2] = float("nan")  # padding may hold anything
    marginals = crf.marginals(emissions, mask)
    assert marginals.shape == emissions.shape
    assert torch.allclose(marginals[mask].sum(-1), torch.ones(int(mask.sum()), dtype=torch.float64), atol=1e-12)
    assert (marginals[~mask] == 0).all()
    assert torch.allclose(marginals[0], brute_marginals(crf, emissions[0]), atol=1e-12)
    assert torch.allclose(marginals[1, :2], brute_marginals(crf, emissions[1, :2]), atol=1e-12)
    # transitions matter: the marginals are not the emissions' own softmax
    assert not torch.allclose(marginals[0], torch.softmax(emissions[0], -1), atol=1e-3)


def test_marginals_under_no_grad_and_inference_mode() -> None:
    crf = make_crf(7)
    emissions, _, mask = mixed_batch(seed=11)
    expected = crf.marginals(emissions, mask)
    with torch.no_grad():
        assert torch.equal(crf.marginals(emissions, mask), expected)
    with torch.inference_mode():
        frozen, frozen_mask = emissions.clone(), mask.clone()  # inference tensors
        assert torch.equal(crf.marginals(frozen, frozen_mask), expected)
    for b, n in enumerate(mask.sum(1).tolist()):
        assert torch.allclose(expected[b, :n], brute_marginals(crf, emissions[b, :n]), atol=1e-12)
    assert crf.transitions.grad is None
    assert crf.marginals(emissions[:, :0], mask[:, :0]).shape == (emissions.size(0), 0, K)


SENTENCES = [["Mina", "Haddad", "spoke", "."], ["Velmora", "won"], ["rain"]]
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]


def tiny_tagger(crf: bool):
    torch.manual_seed(0)
    return build_student(config_for("lstm-tagger", embedding_dim=8, hidden_dim=6, dropout=0.0, crf=crf),
                         LabelHierarchy(TAGS), SENTENCES).eval()


def test_crf_tagger_word_confidence_is_the_marginal_of_the_output_tag() -> None:
    tagger = tiny_tagger(crf=True)
    with torch.no_grad():  # strong transitions: the Viterbi tags are not the emissions' argmax
        tagger.crf.start_transitions.copy_(torch.tensor([0.0, 6.0, 0.0, 0.0]))
        tagger.crf.transitions.fill_(-3.0)
        tagger.crf.transitions[1, 2] = 4.0
        tagger.crf.transitions[2, 0] = 4.0
        tagger.crf.transitions[0, 0] = 2.0
    assert model_crf(tagger) is tagger.crf and model_crf(SimpleNamespace(source=tagger)) is tagger.crf
    results = predict_logits(tagger, SENTENCES)
    records = list(prediction_records(tagger, SENTENCES, results=results))
    differs = False
    for index, (sentence, record) in enumerate(zip(SENTENCES, records)):
        logits, scored = results.example(index)
        marginals = tagger.crf.marginals(logits.unsqueeze(0), scored.unsqueeze(0))[0]
        path = [TAGS.index(tag) for tag in record["tags"]]
        assert len(path) == len(sentence) == len(record["confidences"])
        expected = [float(marginals[t, k]) for t, k in enumerate(path)]
        assert record["confidences"] == pytest.approx(expected, abs=1e-6)
        assert record["confidence"] == pytest.approx(min(expected), abs=1e-6)
        emission_max = torch.softmax(logits, -1).max(-1).values.tolist()
        differs |= any(abs(c - e) > 0.05 for c, e in zip(record["confidences"], emission_max))
    assert records[0]["tags"] == ["B-PER", "I-PER", "O", "O"]
    assert differs  # the old emission-softmax confidences would fail the equalities above


def test_tagger_without_crf_keeps_emission_softmax_confidences() -> None:
    tagger = tiny_tagger(crf=False)
    assert model_crf(tagger) is None
    results = predict_logits(tagger, SENTENCES)
    for index, record in enumerate(prediction_records(tagger, SENTENCES, results=results)):
        logits, _ = results.example(index)
        probs = torch.softmax(logits, -1)
        assert record["tags"] == [TAGS[i] for i in probs.argmax(-1).tolist()]
        assert record["confidences"] == [round(float(c), 6) for c in probs.max(-1).values]
