"""Pure losses against hand-computed values and properties."""

import math

import pytest
import torch

from distill import losses


def test_weighted_nll_matches_seed_000_formula():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    targets = torch.tensor([0, 1, 0])
    weights = torch.tensor([1.0, 3.0])
    log_p = [2 - math.log(math.exp(2) + 1), 1 - math.log(1 + math.e), -math.log(2)]
    expected = -(1 * log_p[0] + 3 * log_p[1] + 1 * log_p[2]) / (1 + 3 + 1)
    assert losses.weighted_nll(logits, targets, weights).item() == pytest.approx(expected, rel=1e-6)


def test_weighted_nll_ignores_masked_and_ignored_positions():
    logits = torch.randn(2, 3, 4)
    targets = torch.tensor([[1, 2, losses.IGNORE_INDEX], [3, 0, 0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    expected = losses.weighted_nll(torch.stack([logits[0, 0], logits[0, 1], logits[1, 0]]),
                                   torch.tensor([1, 2, 3]))
    assert losses.weighted_nll(logits, targets, mask=mask).item() == pytest.approx(expected.item())


def test_kl_closed_form_and_temperature_squared():
    s, t = torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(3.0), 0.0]])  # p_t = (3/4, 1/4)
    expected = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert losses.kl_distill(s, t, 1.0).item() == pytest.approx(expected, rel=1e-6)
    t2 = torch.tensor([[2 * math.log(3.0), 0.0]])  # same softened distribution at T=2
    assert losses.kl_distill(s, t2, 2.0).item() == pytest.approx(4 * expected, rel=1e-5)


def test_distill_terms_vanish_when_student_equals_teacher():
    logits = torch.randn(5, 7)
    assert losses.kl_distill(logits, logits.clone(), 3.0).item() == pytest.approx(0.0, abs=1e-6)
    assert losses.mse_distill(logits, logits.clone()).item() == 0.0
    two = torch.randn(6, 2)
    margin = (two[:, 1] - two[:, 0]).unsqueeze(1)
    assert losses.binary_kl_distill(margin, two, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    assert losses.binary_mse_distill(margin, two).item() == pytest.approx(0.0, abs=1e-10)


def test_mse_is_between_raw_logits():
    s, t = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -2.0]])
    assert losses.mse_distill(s, t).item() == pytest.approx((4 + 16) / 2)


def test_binary_kl_equals_two_class_kl():
    teacher = torch.randn(8, 2)
    student_two = torch.randn(8, 2)
    student_one = (student_two[:, 1] - student_two[:, 0]).unsqueeze(1)
    assert losses.binary_kl_distill(student_one, teacher, 2.5).item() == pytest.approx(
        losses.kl_distill(student_two, teacher, 2.5).item(), rel=1e-5)


@pytest.mark.parametrize("loss", ["kl", "mse"])
def test_gradient_moves_student_towards_teacher(loss):
    teacher = torch.tensor([[3.0, -1.0, 0.0]])
    student = torch.zeros(1, 3, requires_grad=True)
    value = losses.kl_distill(student, teacher, 2.0) if loss == "kl" else losses.mse_distill(student, teacher)
    value.backward()
    stepped = student - 0.1 * student.grad
    after = losses.kl_distill(stepped, teacher, 2.0) if loss == "kl" else losses.mse_distill(stepped, teacher)
    assert student.grad[0, 0] < 0 < student.grad[0, 1]  # raise the teacher's top class, lower the others
    assert after < value


def test_masked_token_level_kl_uses_only_real_positions():
    s, t = torch.randn(2, 4, 3), torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, False, False], [True, False, False, False]])
    flat = losses.kl_distill(s[mask], t[mask], 2.0)
    assert losses.kl_distill(s, t, 2.0, mask).item() == pytest.approx(flat.item())


def test_uniform_layer_map_ends_on_the_last_layer():
    assert losses.uniform_layer_map(3, 6) == [(0, 1), (1, 3), (2, 5)]
    assert losses.uniform_layer_map(2, 2) == [(0, 0), (1, 1)]
    assert losses.uniform_layer_map(2, 3) == [(0, 0), (1, 2)]


def test_hidden_mse_by_hand():
    s = [torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 0.0]])]
    t = [torch.tensor([[3.0, -2.0]]), torch.tensor([[1.0, 1.0]])]
    assert losses.hidden_mse(s, t).item() == pytest.approx((4 + 16 + 1 + 1) / 4)
    # widths differ: a projection (here doubling one state into two entries) maps the student's to the teacher's
    narrow = [torch.tensor([[1.0]]), torch.tensor([[2.0]])]
    double = [lambda x: torch.cat([x, 2 * x], -1)] * 2
    assert losses.hidden_mse(narrow, t, double).item() == pytest.approx(((1 - 3) ** 2 + (2 + 2) ** 2 + (2 - 1) ** 2
                                                                        + (4 - 1) ** 2) / 4)
    # token level: only the masked positions count
    tokens_s, tokens_t = torch.zeros(1, 3, 2), torch.tensor([[[1.0, 1.0], [5.0, 5.0], [2.0, 0.0]]])
    mask = torch.tensor([[True, False, True]])
    assert losses.hidden_mse([tokens_s], [tokens_t], mask=mask).item() == pytest.approx((1 + 1 + 4 + 0) / 4)


def test_cosine_distance_by_hand():
    """1 - cos per row: orthogonal rows 1, parallel rows 0 whatever their scale; masked and projected."""
    student, teacher = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[0.0, 1.0], [2.0, 2.0]])
    assert losses.cosine_distance(student, teacher).item() == pytest.approx(0.5)
    tokens_s, tokens_t = torch.tensor([[[1.0], [3.0]]]), torch.tensor([[[1.0, 1.0], [1.0, -1.0]]])
    double = lambda x: torch.cat([x, x], -1)  # noqa: E731  (a map to the teacher's width)
    assert losses.cosine_distance(tokens_s, tokens_t, double, torch.tensor([[True, True]])).item() == pytest.approx(0.5)
    first_only = torch.tensor([[True, False]])
    assert losses.cosine_distance(tokens_s, tokens_t, double, first_only).item() == pytest.approx(0.0, abs=1e-6)


def test_attention_kl_by_hand():
    """Per head and real query: KL(teacher row || student row); padded keys (log p = -inf on both) add nothing."""
    inf = float("inf")
    # one pair, one example, two heads, two queries (the second is padding), three keys (the last is padding)
    teacher = torch.tensor([[[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0]], [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]]]).log()
    student = torch.tensor([[[[0.25, 0.75, 0.0], [0.9, 0.1, 0.0]], [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]]]).log()
    assert teacher[0, 1, 0, 1] == -inf and student[0, 0, 0, 2] == -inf
    mask = torch.tensor([[True, False]])
    head_1 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    head_2 = 1.0 * math.log(1.0 / 0.5)
    result = losses.attention_kl_sum([student], [teacher], mask)
    assert result.denominator.item() == 2
    assert result.mean().item() == pytest.approx((head_1 + head_2) / 2)
    # two pairs average over all their rows; identical maps give 0, not NaN
    assert losses.attention_kl([student, teacher], [teacher, teacher], mask).item() == pytest.approx(
        (head_1 + head_2) / 4)
    assert losses.attention_kl([teacher], [teacher]).item() == 0.0


def test_teacher_mistakes_are_labelled_positions_where_its_top_class_is_not_gold():
    teacher = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 5.0], [4.0, 0.0, 0.0]])
    gold = torch.tensor([0, 2, losses.IGNORE_INDEX, 1])
    assert losses.teacher_mistakes(teacher, gold).tolist() == [False, True, False, True]
    assert losses.teacher_mistakes(teacher, gold, torch.tensor([True, False, True, True])).tolist() == \
        [False, False, False, True]


def test_probability_shift_swaps_the_top_and_gold_logits_where_the_teacher_is_wrong():
    teacher = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 5.0]])
    gold = torch.tensor([0, 2, losses.IGNORE_INDEX])
    shifted = losses.shift_teacher_mistakes(teacher, gold)
    assert shifted.tolist() == [[3.0, 1.0, 0.0], [0.0, 1.0, 2.0], [0.0, 0.0, 5.0]]  # right, wrong, unlabeled
    assert sorted(shifted[1].softmax(-1).tolist()) == pytest.approx(sorted(teacher[1].softmax(-1).tolist()))
    assert teacher.tolist() == [[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 5.0]]  # not changed in place


def test_probability_shift_for_tagging_leaves_ignored_and_masked_words_alone():
    torch.manual_seed(0)
    teacher = torch.randn(2, 4, 5)
    top = teacher.argmax(-1)
    gold = (top + 1) % 5  # the teacher is wrong everywhere
    gold[0, 3] = losses.IGNORE_INDEX
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[1, 2:] = False
    shifted = losses.shift_teacher_mistakes(teacher, gold, mask)
    changed = (shifted != teacher).any(-1)
    assert changed.tolist() == [[True, True, True, False], [True, True, False, False]]
    assert torch.equal(shifted.argmax(-1)[changed], gold[changed])  # the gold label is now the top class
    assert torch.equal(shifted.sort(-1).values, teacher.sort(-1).values)  # the same values, two swapped
