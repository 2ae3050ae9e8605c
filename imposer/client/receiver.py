"""A ready-made webhook endpoint for a tenant's application.

It verifies each completion event and calls ``Admission.confirm`` so the
in-flight slot of layer 3 is released and the token marked completed. Use it
as is for small set-ups, or copy its ``handle`` into your web framework.
"""

from __future__ import annotations

import http.server
import logging
import threading
from typing import Any, Callable

from imposer.client.admission import Admission
from imposer.client.errors import WebhookVerificationError
from imposer.client.webhook import verify_webhook

logger = logging.getLogger(__name__)


class WebhookReceiver:
    """Serve POSTs on 127.0.0.1:*port*; verify with the tenant's secret; confirm the token."""

    def __init__(self, secrets: dict[str, str], admission: Admission | None = None, *,
                 port: int = 0, tolerance: float = 300,
                 on_event: Callable[[dict], Any] | None = None) -> None:
        self.secrets = secrets
        self.admission = admission
        self.tolerance = tolerance
        self.on_event = on_event
        self.events: list[dict] = []
        self.rejected: list[str] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                tenant = self.path.strip("/").split("/")[-1]
                code, text = receiver.handle(tenant, dict(self.headers.items()), body)
                self.send_response(code)
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="webhook-receiver")

    def url(self, tenant_id: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hooks/{tenant_id}"

    def handle(self, tenant_id: str, headers: dict, body: bytes) -> tuple[int, str]:
        """Verify one delivery and confirm its token; return (HTTP status, text)."""
        secret = self.secrets.get(tenant_id)
        try:
            event = verify_webhook(headers, body, secret or "", self.tolerance)
        except WebhookVerificationError as exc:
            self.rejected.append(str(exc))
            return 401, str(exc)
        if event.get("tenant_id") != tenant_id:
            self.rejected.append("tenant mismatch")
            return 401, "tenant mismatch"
        if self.admission is not None and event.get("token"):
            self.admission.confirm(tenant_id, event["token"], event.get("job_id"))
        self.events.append(event)
        if self.on_event:
            self.on_event(event)
        return 200, "ok"

    def start(self) -> "WebhookReceiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
