"""Completion webhooks, service side: the durable outbox's sender (``outbox``), delivery and
the SSRF guard (``urlguard``)."""
