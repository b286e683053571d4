"""Helpers of the project's tests (tests/conftest.py puts tests/ on the path: ``from
support.helpers import ...``)."""
