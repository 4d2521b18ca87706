"""Start a student's word embeddings from the teacher's sub-word embeddings.

No pretrained word vectors are reachable offline, but the teacher has learnt input embeddings:
each student word becomes the mean of its sub-token vectors, reduced to the student's width by
PCA (SVD of the centred table) and scaled to the student's initial embedding scale.

The static student goes further (`static_word_vectors`, model2vec's recipe from the fine-tuned
teacher): each word is read alone by the teacher's encoder, pooled as the teacher pools a sentence,
PCA-reduced and weighted by its frequency in the transfer set.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import torch

from distill.vocab import Vocabulary, student_tokens

ENCODER_BATCH = 256  # words per forward pass of the teacher's encoder: a few sub-tokens each
SIF_A = 1e-3  # SIF's a (Arora et al. 2017): a word of probability a weighs half as much as a rare one


@torch.no_grad()
def teacher_word_vectors(tokenizer, sub_token_table: torch.Tensor, words: list[str]) -> torch.Tensor:
    """Mean sub-token vector per word (zeros for words the tokenizer cannot split)."""
    pieces = tokenizer(words, add_special_tokens=False)["input_ids"]
    vectors = torch.zeros((len(words), sub_token_table.size(1)))
    for row, ids in enumerate(pieces):
        if ids:
            vectors[row] = sub_token_table[torch.tensor(ids)].mean(0)
    return vectors


@torch.no_grad()
def pca_reduce(vectors: torch.Tensor, dim: int) -> torch.Tensor:
    centred = vectors - vectors.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    reduced = centred @ v[:dim].T
    if reduced.size(1) < dim:  # teacher narrower than the student: pad with zeros
        reduced = torch.cat([reduced, reduced.new_zeros(reduced.size(0), dim - reduced.size(1))], dim=1)
    return reduced


@torch.no_grad()
def init_from_teacher(student: torch.nn.Module, teacher) -> None:
    """Overwrite `student.embedding` rows (except padding) with reduced vectors of `teacher`."""
    table = teacher.input_embeddings().float()
    words = student.words.tokens
    vectors = pca_reduce(teacher_word_vectors(teacher.sub_word_tokenizer(), table, words[2:]),
                         student.config.embedding_dim)
    target_std = student.embedding.weight[2:].std()
    vectors = vectors / vectors.std().clamp_min(1e-8) * target_std
    student.embedding.weight[2:] = vectors


@torch.no_grad()
def encoder_word_vectors(teacher, words: Sequence[str], batch_size: int = ENCODER_BATCH) -> torch.Tensor:
    """Each word read alone by `teacher`'s encoder (with its special tokens), pooled as the teacher pools a
    sentence (its first token's state, else the mean over the tokens): what its head would read of a
    one-word text. Batches of similar length, with a progress bar: a large vocabulary takes a while on a CPU."""
    from distill.models.layers import pool
    from distill.progress import progress_bar
    network = getattr(teacher, "network", teacher)  # a transformer student teaching: its Teacher module
    pooling = "first" if getattr(getattr(network, "config", None), "pooling", None) == "first" else "mean"
    encoder, tokenizer = network.encoder, network.tokenizer
    was_training = encoder.training
    encoder.eval()
    device = next(encoder.parameters()).device
    pieces = tokenizer(list(words), truncation=True, max_length=32)["input_ids"]
    order = sorted(range(len(words)), key=lambda i: len(pieces[i]))
    vectors: torch.Tensor | None = None
    bar = progress_bar(total=len(words), desc="word vectors from the teacher", unit="word", leave=False)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(pieces[i]) for i in rows)
        ids = torch.tensor([pieces[i] + [tokenizer.pad_token_id or 0] * (width - len(pieces[i])) for i in rows])
        mask = torch.tensor([[1] * len(pieces[i]) + [0] * (width - len(pieces[i])) for i in rows])
        hidden = encoder(input_ids=ids.to(device), attention_mask=mask.to(device),
                         output_hidden_states=True).hidden_states[-1].float().cpu()
        if vectors is None:
            vectors = hidden.new_zeros((len(words), hidden.size(-1)))
        vectors[rows] = pool(hidden, mask, pooling)
        bar.update(len(rows))
    bar.close()
    encoder.train(was_training)
    return vectors


def frequency_weights(words: Vocabulary, examples: Sequence, weighting: str) -> torch.Tensor:
    """A weight per word of `words` (but padding and <unk>) from its count in `examples`: SIF's a/(a+p(word))
    (Arora et al. 2017), Zipf's log(1+rank) (model2vec; the vocabulary is in order of count), or ones."""
    size = len(words) - 2
    if weighting == "zipf":
        return torch.log1p(torch.arange(1, size + 1, dtype=torch.float))
    if weighting == "none":
        return torch.ones(size)
    counts = Counter(i for example in examples for i in words.ids(student_tokens(example)))
    total = sum(counts.values()) or 1
    return torch.tensor([SIF_A / (SIF_A + counts[i] / total) for i in range(2, len(words))])


@torch.no_grad()
def static_word_vectors(teacher, words: Vocabulary, examples: Sequence, config) -> torch.Tensor:
    """The static student's word vectors (but padding and <unk>): from the teacher's encoder or input
    embeddings (`config.word_vectors`), PCA-reduced to `config.embedding_dim`, weighted by frequency in
    `examples` (`config.weighting`) and scaled to unit standard deviation (the scale of a fresh table)."""
    if config.word_vectors == "encoder":
        vectors = encoder_word_vectors(teacher, words.tokens[2:])
    else:
        vectors = teacher_word_vectors(teacher.sub_word_tokenizer(), teacher.input_embeddings().float(),
                                       words.tokens[2:])
    vectors = pca_reduce(vectors, config.embedding_dim) * frequency_weights(words, examples, config.weighting)[:, None]
    return vectors / vectors.std().clamp_min(1e-8) if vectors.numel() > 1 else vectors
