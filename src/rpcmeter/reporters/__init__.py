"""Reporters: pure functions from a result document to text or bytes."""
