"""Priority and due time of a job request: parsed once, refused with a clear reason."""

from __future__ import annotations

import json
import time

import pytest

from imposer.errors import InvalidMessage
from imposer.models import JobRequest
from imposer.models.urgency import DEFAULT_PRIORITY, format_due, parse_due, parse_priority
from tests.fixtures.jobs import request

NOW = 1_800_000_000.0  # 2027-01-15


def body_with(**fields) -> str:
    data = json.loads(request().to_body())
    data.update(fields)
    return json.dumps(data)


class TestPriority:
    def test_missing_is_the_middle(self):
        """A request without a priority gets the default, and old bodies still parse."""
        assert JobRequest.from_body(body_with()).priority == DEFAULT_PRIORITY == 5

    @pytest.mark.parametrize("value", [0, 9, 3, 3.0])
    def test_whole_numbers_in_range_are_kept(self, value):
        """0 to 9 are accepted as they are."""
        assert JobRequest.from_body(body_with(priority=value)).priority == int(value)

    @pytest.mark.parametrize("value", [-1, 10, 1e308, 2.5, "1", True, [1], {"p": 1}])
    def test_anything_else_is_refused_saying_why(self, value):
        """Out of range, fractional or not a number: refused, naming the field and range."""
        with pytest.raises(InvalidMessage, match="priority must be a whole number from 0"):
            JobRequest.from_body(body_with(priority=value))

    def test_nan_is_refused(self):
        """NaN never reaches the priority check: the body's JSON is refused first."""
        with pytest.raises(InvalidMessage, match="NaN is not a number"):
            JobRequest.from_body(body_with()[:-1] + ', "priority": NaN}')

    def test_parse_priority_none_is_default(self):
        """None means not given."""
        assert parse_priority(None) == DEFAULT_PRIORITY


class TestDue:
    def test_missing_is_none(self):
        """A request without a due time has none."""
        assert JobRequest.from_body(body_with()).due is None

    @pytest.mark.parametrize("text", ["2027-01-16T10:00:00Z", "2027-01-16T12:00:00+02:00"])
    def test_iso_with_zone_is_epoch_seconds(self, text):
        """Any zone is accepted and stored as the same epoch seconds."""
        assert parse_due(text, now=NOW) == 1_800_093_600.0

    def test_round_trips_through_the_body(self):
        """A due time written by to_body reads back to the same instant."""
        tomorrow = format_due(float(int(time.time()) + 86_400))
        req = JobRequest.from_body(body_with(due=tomorrow, priority=1))
        again = JobRequest.from_body(req.to_body())
        assert (again.due, again.priority) == (req.due, 1)
        assert json.loads(req.to_body())["due"] == tomorrow

    @pytest.mark.parametrize("text, reason", [
        ("tomorrow", "due is not an ISO-8601 time"),
        ("2027-13-01T00:00:00Z", "due is not an ISO-8601 time"),
        ("2027-01-16T10:00:00", "due has no timezone"),
        ("1999-12-31T23:59:59Z", "due must be after 2000-01-01"),
        ("9999-12-31T23:59:59Z", "at most a year ahead"),
        ("2028-02-01T00:00:00Z", "at most a year ahead"),
        (1_800_000_000, "due must be an ISO-8601 time with a timezone"),
        ("x" * 100, "due must be an ISO-8601 time with a timezone"),
    ])
    def test_hostile_values_are_refused_saying_why(self, text, reason):
        """Unparseable, naive or absurd due times are refused with the reason."""
        with pytest.raises(InvalidMessage, match=reason):
            parse_due(text, now=NOW)

    def test_far_future_is_refused_through_the_body(self):
        """The request itself refuses a due time years ahead of now."""
        with pytest.raises(InvalidMessage, match="at most a year ahead"):
            JobRequest.from_body(body_with(due="2100-01-01T00:00:00Z"))
