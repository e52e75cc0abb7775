"""Shared pytest configuration for inline_dense's tests (markers live in pytest.ini)."""
