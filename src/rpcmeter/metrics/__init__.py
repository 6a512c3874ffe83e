"""Measurement primitives: latency histograms, resource accounting, environment capture."""
