"""imposer.webhooks.delivery: the SSRF guard and delivery to a real loopback HTTP server."""

from __future__ import annotations

import datetime
import socket
import ssl

import pytest

from imposer.client import verify_webhook
from imposer.models import JobStatus
from imposer.models.signature import header, new_secret
from imposer.webhooks.delivery import (
    EVENT_FIELDS,
    Result,
    WebhookSender,
    build_event,
    encode,
)
from imposer.webhooks.urlguard import WebhookRefused, check_url, host_allowed
from tests.fixtures.webhooks import ScriptedReceiver, receiver  # noqa: F401 (fixture)

SECRET = "tenant-secret"
EVENT = build_event(job_id="job-1", tenant_id="acme", token="order-42", status=JobStatus.SUCCEEDED,
                    output="s3://imposer-artwork/tenants/acme/jobs/job-1/plate.pdf")


def resolver(*addresses: str, calls: list | None = None):
    """Return a getaddrinfo stand-in answering every name with *addresses*."""
    def resolve(host, port, *args, **kwargs):
        if calls is not None:
            calls.append(host)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port)) for a in addresses]
    return resolve


def _certificates(tmp_path, name: str):
    """Write a CA and a server certificate for *name*; return (CA PEM, cert path, key path)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def issue(subject, issuer, public_key, signer, ca: bool):
        start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False), critical=True)
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "imposer test CA")])
    ca = issue(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    leaf = issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca_name,
                 key.public_key(), ca_key, ca=False)
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM).decode(), cert_path, key_path


@pytest.fixture
def tls_receiver(tmp_path):
    """An HTTPS server on 127.0.0.1 holding a certificate for hooks.acme.test."""
    ca_pem, cert, key = _certificates(tmp_path, "hooks.acme.test")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    with ScriptedReceiver(tls=server_context).serving() as server:
        server.trust = ssl.create_default_context(cadata=ca_pem)
        yield server


@pytest.fixture
def sender():
    """A loopback-enabled sender: one attempt per call."""
    return WebhookSender(allow_http_loopback=True, timeout=5.0)


class TestCheckUrl:
    @pytest.mark.parametrize("url, reason", [
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://10.0.0.1/hook", "private"),
        ("https://[fd00:ec2::254]/hook", "metadata"),
        ("https://[::ffff:10.0.0.1]/hook", "private"),
        ("https://0.0.0.0/hook", "unspecified"),
        ("https://224.0.0.1/hook", "multicast"),
    ])
    def test_refuses_internal_literals(self, url, reason):
        """Literal internal addresses are refused even when the tenant allowed them."""
        host = url.split("/")[2].strip("[]")
        with pytest.raises(WebhookRefused, match=reason):
            check_url(url, [host])

    def test_refuses_localhost_when_not_enabled(self):
        """localhost is refused unless the loopback exception is switched on."""
        with pytest.raises(WebhookRefused, match="loopback"):
            check_url("https://localhost/hook", ["localhost"])

    def test_refuses_http(self):
        """Plain http is refused when loopback is not enabled, whatever the host."""
        with pytest.raises(WebhookRefused, match="https"):
            check_url("http://hooks.acme.test/x", ["hooks.acme.test"],
                      resolve=resolver("93.184.216.34"))

    def test_http_only_to_loopback(self):
        """With the exception on, plain http to a public address is still refused."""
        with pytest.raises(WebhookRefused, match="loopback only"):
            check_url("http://hooks.acme.test/x", ["hooks.acme.test"], allow_http_loopback=True,
                      resolve=resolver("93.184.216.34"))

    def test_refuses_host_off_allow_list(self):
        """A host outside the tenant's allow-list is refused before any DNS lookup."""
        calls: list = []
        with pytest.raises(WebhookRefused, match="allow-list"):
            check_url("https://evil.example.net/x", ["hooks.acme.test"],
                      resolve=resolver("93.184.216.34", calls=calls))
        assert calls == []

    def test_refuses_name_resolving_private(self):
        """An allowed name that resolves to a private address is refused."""
        with pytest.raises(WebhookRefused, match="10.1.2.3"):
            check_url("https://hooks.acme.test/x", ["hooks.acme.test"],
                      resolve=resolver("10.1.2.3"))

    def test_refuses_if_any_address_private(self):
        """One private address among public ones is enough to refuse."""
        with pytest.raises(WebhookRefused, match="192.168.1.5"):
            check_url("https://hooks.acme.test/x", ["hooks.acme.test"],
                      resolve=resolver("93.184.216.34", "192.168.1.5"))

    def test_refuses_credentials(self):
        """A URL carrying user:password is refused."""
        with pytest.raises(WebhookRefused, match="credentials"):
            check_url("https://u:p@hooks.acme.test/x", ["hooks.acme.test"],
                      resolve=resolver("93.184.216.34"))

    def test_accepts_public(self):
        """An allowed https host with public addresses yields those addresses to connect to."""
        target = check_url("https://Hooks.Acme.test/x", ["hooks.acme.test"],
                           resolve=resolver("93.184.216.34", "2606:4700::1"))
        assert target.addresses == ("93.184.216.34", "2606:4700::1")
        assert (target.host, target.port) == ("hooks.acme.test", 443)

    def test_unresolvable_is_oserror(self):
        """A name that does not resolve raises OSError (retryable), not a refusal."""
        def fail(*args, **kwargs):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        with pytest.raises(OSError):
            check_url("https://hooks.acme.test/x", ["hooks.acme.test"], resolve=fail)


class TestHostAllowed:
    @pytest.mark.parametrize("host, allowed", [
        ("hooks.example.com", True), ("a.b.example.com", True), ("example.com", False),
        ("badexample.com", False), ("example.com.evil.net", False),
    ])
    def test_wildcard(self, host, allowed):
        """``*.example.com`` matches subdomains only, never the apex or look-alikes."""
        assert host_allowed(host, ["*.example.com"]) is allowed

    def test_exact(self):
        """An exact entry matches itself, ignoring case and a trailing dot."""
        assert host_allowed("Hooks.Acme.test.", ["hooks.acme.test"])
        assert not host_allowed("other.acme.test", ["hooks.acme.test"])


class TestBuildEvent:
    def test_fields(self):
        """The event has every documented field, absent ones null, status as text."""
        assert set(EVENT) == set(EVENT_FIELDS)
        assert EVENT["status"] == "succeeded" and EVENT["error"] is None


BODY = encode(EVENT)


def send(sender, url, hosts=("127.0.0.1",), secret=SECRET):
    return sender.send(url, BODY, secret, "msg_0123456789abcdef0123456789abcdef", hosts)


class TestWebhookSender:
    def test_refused_without_request(self, receiver):
        """A name resolving to loopback and a private address is refused and nothing is sent."""
        sender = WebhookSender(allow_http_loopback=True, resolve=resolver("127.0.0.1", "10.0.0.1"))
        result = send(sender, f"http://hooks.test:{receiver.server_port}/hook", ["hooks.test"])
        assert result.status == "refused" and "10.0.0.1" in result.detail
        assert receiver.requests == []

    def test_metadata_refused(self, sender):
        """A URL naming the metadata address is refused."""
        result = send(sender, "https://169.254.169.254/latest", ["169.254.169.254"])
        assert (result.status, result.detail) == (
            "refused", "169.254.169.254 resolves to 169.254.169.254, a cloud metadata address")

    def test_no_secret_is_refused(self, sender, receiver):
        """Without a tenant secret nothing is sent: an unsigned event would be worthless."""
        assert send(sender, receiver.url, secret="").status == "refused"
        assert receiver.requests == []

    def test_delivers_verifiable_signature(self, sender, receiver):
        """A delivered event carries signatures the client's verify_webhook accepts."""
        result = send(sender, receiver.url)
        assert (result.status, result.detail) == ("delivered", "HTTP 200")
        ((headers, body, _),) = receiver.requests
        assert verify_webhook(headers, body, SECRET) == EVENT
        assert headers["Content-Type"] == "application/json"
        assert header(headers, "webhook-id") == "msg_0123456789abcdef0123456789abcdef"

    def test_standard_webhooks_reference_library_verifies(self, sender, receiver):
        """The Standard Webhooks reference verifier accepts imposer's delivery as it is."""
        from standardwebhooks.webhooks import Webhook

        secret = new_secret()
        assert send(sender, receiver.url, secret=secret).status == "delivered"
        ((headers, body, _),) = receiver.requests
        assert Webhook(secret).verify(body, headers) == EVENT
        assert verify_webhook(headers, body, secret) == EVENT

    def test_while_rotating_a_receiver_with_either_secret_verifies(self, sender, receiver):
        """Signed with the new and the previous secret, one delivery verifies for a receiver
        that holds either, under both header schemes and with the reference library; a
        receiver holding a third secret is still refused."""
        from standardwebhooks.webhooks import Webhook
        from standardwebhooks.webhooks import WebhookVerificationError as Refused

        from imposer.client import WebhookVerificationError

        new, old = new_secret(), new_secret()
        assert send(sender, receiver.url, secret=(new, old)).status == "delivered"
        ((headers, body, _),) = receiver.requests
        assert len(header(headers, "webhook-signature").split()) == 2
        assert len(header(headers, "X-Imposer-Signature").split(",")) == 2
        legacy = {k: v for k, v in headers.items() if not k.lower().startswith("webhook-")}
        for secret in (new, old):
            assert Webhook(secret).verify(body, headers) == EVENT
            assert verify_webhook(headers, body, secret) == EVENT
            assert verify_webhook(legacy, body, secret) == EVENT
        with pytest.raises(Refused):
            Webhook(new_secret()).verify(body, headers)
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(headers, body, new_secret())

    @pytest.mark.parametrize("code, status", [(500, "retry"), (503, "retry"), (429, "retry"),
                                              (408, "retry"), (404, "failed"), (400, "failed")])
    def test_status_codes(self, sender, receiver, code, status):
        """5xx, 408, 425 and 429 may pass; other 4xx will not."""
        receiver.codes[:] = [code]
        assert send(sender, receiver.url) == Result(status=status, detail=f"HTTP {code}")

    def test_redirect_not_followed(self, sender, receiver):
        """A redirect (here to the metadata address) is not followed: one request, failed."""
        receiver.codes[:] = [302]
        assert send(sender, receiver.url).status == "failed"
        assert len(receiver.requests) == 1

    def test_connection_refused_may_pass(self, sender):
        """A receiver that is down is a failure that may pass."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        result = send(sender, f"http://127.0.0.1:{port}/hook")
        assert result.status == "retry" and "Connection refused" in result.detail


class TestWebhookSenderTls:
    def test_https_to_checked_address(self, tls_receiver):
        """Over https the request goes to the checked address; TLS verifies the URL's host."""
        sender = WebhookSender(allow_http_loopback=True, ssl_context=tls_receiver.trust,
                               resolve=resolver("127.0.0.1"))
        result = send(sender, f"https://hooks.acme.test:{tls_receiver.server_port}/hook",
                      ["*.acme.test"])
        assert result.status == "delivered"
        ((headers, body, _),) = tls_receiver.requests
        assert headers["Host"] == f"hooks.acme.test:{tls_receiver.server_port}"
        assert verify_webhook(headers, body, SECRET) == EVENT

    def test_https_wrong_certificate(self, tls_receiver):
        """A certificate for another host name fails the delivery; nothing reaches the handler."""
        sender = WebhookSender(allow_http_loopback=True, ssl_context=tls_receiver.trust,
                               resolve=resolver("127.0.0.1"))
        result = send(sender, f"https://other.acme.test:{tls_receiver.server_port}/hook",
                      ["*.acme.test"])
        assert result.status == "retry" and "certificate" in result.detail.lower()
        assert tls_receiver.requests == []
