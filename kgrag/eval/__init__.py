"""Evaluation: metrics and result tables."""
