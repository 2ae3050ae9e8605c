"""Exit codes: one table in code, the same table in README."""

from __future__ import annotations

import re
from pathlib import Path

from imposer.client import errors
from imposer.models.exits import Exit

README = Path(__file__).resolve().parents[1] / "README.rst"


class TestExitCodes:
    def test_client_errors_use_the_table(self):
        """Every client error's exit code is a member of the one table."""
        for cls in (errors.ImposerClientError, errors.AdmissionError, errors.AdmissionUnavailable,
                    errors.DuplicateToken,
                    errors.RateLimited, errors.InflightCapReached, errors.SubmitError,
                    errors.WebhookVerificationError):
            assert isinstance(cls.exit_code, Exit), cls

    def test_codes_are_distinct(self):
        """No two meanings share a number (aliases would hide a collision)."""
        assert len({e.value for e in Exit}) == len(Exit.__members__)

    def test_readme_lists_every_code(self):
        """README's exit code table has one row per code, no more, no fewer."""
        text = README.read_text()
        section = text[text.index("Exit codes\n----------"):]
        section = section[: section.index("\nConfiguration\n---")]
        rows = [int(m.group(1)) for m in re.finditer(r"^(\d+)\s{2,}\S", section, re.M)]
        assert rows == sorted(e.value for e in Exit)
