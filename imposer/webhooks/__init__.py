"""Completion webhooks, service side: delivery and the SSRF guard (``urlguard``)."""
