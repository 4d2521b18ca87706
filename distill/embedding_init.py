"""Start a student's word embeddings from the teacher's sub-word embeddings.

No pretrained word vectors are reachable offline, but the teacher has learnt input embeddings:
each student word becomes the mean of its sub-token vectors, reduced to the student's width by
PCA (SVD of the centred table) and scaled to the student's initial embedding scale.
"""

from __future__ import annotations

import torch

from distill.models.students import StudentModel


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
def init_from_teacher(student: StudentModel, teacher) -> None:
    """Overwrite `student.embedding` rows (except padding) with reduced vectors of `teacher`."""
    table = teacher.encoder.get_input_embeddings().weight.float().cpu()
    words = student.words.tokens
    vectors = pca_reduce(teacher_word_vectors(teacher.tokenizer, table, words[2:]), student.config.embedding_dim)
    target_std = student.embedding.weight[2:].std()
    vectors = vectors / vectors.std().clamp_min(1e-8) * target_std
    student.embedding.weight[2:] = vectors
