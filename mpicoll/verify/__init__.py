"""Symbolic verification of every registered algorithm's plans (``python -m mpicoll.verify``)."""
