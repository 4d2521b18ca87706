"""distill: knowledge distillation for NLP, from a transformer teacher into small fast students."""

__version__ = "0.1.0"
