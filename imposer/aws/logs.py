"""The CloudWatch Logs adapter: doctor asks whether the agent shipped this host's log file.

The worker never writes to CloudWatch Logs itself: it logs JSON lines, the
CloudWatch agent ships them (and so their EMF metrics). The only question
imposer asks here is a read, whether a given line reached this host's stream.
"""

from __future__ import annotations

from imposer.aws import session
from imposer.errors import MissingResource

#: At most this many pages of events are read for one question: doctor stays quick on a
#: busy stream, and a line not among the newest minutes' events counts as not shipped.
MAX_PAGES = 20


class LogGroup:
    """One log group, read a stream at a time."""

    def __init__(self, region: str, name: str) -> None:
        self.client = session.client("logs", region)
        self.name = name

    def has_line(self, stream: str, line: str, since: float) -> bool:
        """Whether *stream* holds an event whose message is *line*, at or after *since*
        (epoch seconds); a stream the agent never created holds nothing."""
        with session.translated(f"describe log streams of {self.name}"):
            try:
                streams = self.client.describe_log_streams(
                    logGroupName=self.name, logStreamNamePrefix=stream)["logStreams"]
            except self.client.exceptions.ResourceNotFoundException:
                raise MissingResource(f"log group {self.name} does not exist (the stack's "
                                      "LogGroupName output names it)") from None
        if not any(s["logStreamName"] == stream for s in streams):
            return False
        kwargs = {"logGroupName": self.name, "logStreamNames": [stream],
                  "startTime": int(since * 1000)}
        with session.translated(f"read log stream {stream} of {self.name}"):
            for _ in range(MAX_PAGES):
                page = self.client.filter_log_events(**kwargs)
                if any(e.get("message", "").rstrip("\n") == line
                       for e in page.get("events", [])):
                    return True
                if not page.get("nextToken"):
                    return False
                kwargs["nextToken"] = page["nextToken"]
        return False
