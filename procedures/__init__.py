"""Training procedures (teacher, student, kd, pseudo-label, evaluate, predict) and the `nlp-train` CLI."""
