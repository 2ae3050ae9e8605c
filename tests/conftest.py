"""Shared fixtures: the local AWS stack, a real redis-server, real PDFs.

Fixture modules live in ``tests/fixtures/`` and are plugged in here.
"""

pytest_plugins = [
    "tests.fixtures.aws",
    "tests.fixtures.pdfs",
    "tests.fixtures.redis_server",
]
