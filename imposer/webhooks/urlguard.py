"""The SSRF guard of completion webhooks: where imposer may send a request.

The URL must be https (http only to loopback when enabled for local use),
its host on the tenant's allow-list, and every address the host resolves to
public. The request then connects to an address that was checked, never
resolving the name again, so a DNS answer that changes between check and
connect (rebinding) cannot redirect it. Redirects are not followed and
proxies from the environment are ignored. Residual risk: a public host on
the allow-list that itself forwards requests inward.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import re
import socket
import ssl
import urllib.request
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

import attrs

from imposer.errors import ImposerError

METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class WebhookRefused(ImposerError):
    """A webhook URL points somewhere imposer must not send requests."""


_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def host_pattern_problem(pattern: str) -> str | None:
    """Say why *pattern* can never match a webhook URL's host, or None if it is a host name,
    an IP address or ``*.`` and a domain (what :func:`host_allowed` compares)."""
    name = pattern.lower().rstrip(".")
    if name.startswith("*."):
        name = name[2:]
    try:
        ipaddress.ip_address(name)
        return None if not pattern.startswith("*.") else "a wildcard of an IP address"
    except ValueError:
        pass
    if len(name) > 253 or not name or not all(_LABEL.fullmatch(p) for p in name.split(".")):
        return ("not a host name (a host is matched alone: no scheme, port or path, "
                "e.g. hooks.example.com or *.example.com)")
    return None


def host_allowed(host: str, allowed_hosts: Iterable[str]) -> bool:
    """Say whether *host* is listed exactly or under a ``*.example.com`` wildcard."""
    host = host.lower().rstrip(".")
    for pattern in allowed_hosts:
        pattern = pattern.lower().rstrip(".")
        if pattern.startswith("*.") and host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
            return True
        if host == pattern:
            return True
    return False


def address_problem(text: str, allow_loopback: bool = False) -> str | None:
    """Say why a request must not go to this address, or None if it is public."""
    ip = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return address_problem(str(embedded), allow_loopback)
    if ip in METADATA:
        return "cloud metadata address"
    if ip.is_loopback:
        return None if allow_loopback else "loopback address"
    for kind in ("unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return f"{kind.replace('_', '-')} address"
    return None if ip.is_global else "not a public address"


@attrs.frozen(kw_only=True)
class Target:
    """A webhook URL that passed the guard, with the addresses it may connect to."""

    url: str
    host: str
    port: int
    #: Checked addresses, in resolver order; the request connects to one of them.
    addresses: tuple[str, ...]


def check_url(url: str, allowed_hosts: Iterable[str], allow_http_loopback: bool = False,
              resolve: Callable[..., list] = socket.getaddrinfo) -> Target:
    """Return where *url* may be reached, or raise WebhookRefused saying why not.

    A name that does not resolve raises OSError (socket.gaierror): that may
    pass, so the notifier retries it instead of refusing.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookRefused(f"malformed URL {url!r}: {exc}") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".")
    if scheme not in ("https", "http") or (scheme == "http" and not allow_http_loopback):
        raise WebhookRefused(f"webhook URL must be https: {url!r}")
    if parts.username or parts.password:
        raise WebhookRefused("webhook URL must not carry credentials")
    if not host or not host_allowed(host, allowed_hosts):
        raise WebhookRefused(f"host {host!r} is not on the tenant's webhook allow-list")
    port = port or (443 if scheme == "https" else 80)
    infos = resolve(host, port, type=socket.SOCK_STREAM)
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    for address in addresses:
        problem = address_problem(address, allow_loopback=allow_http_loopback)
        if problem:
            raise WebhookRefused(f"{host} resolves to {address}, a {problem}")
    if scheme == "http" and any(address_problem(a) != "loopback address" for a in addresses):
        raise WebhookRefused("plain http is allowed to loopback only")
    return Target(url=url, host=host, port=port, addresses=addresses)


def _connect(addresses: tuple[str, ...], address: tuple,
             timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT,
             source_address: Any = None) -> socket.socket:
    """Open the TCP connection to a checked address instead of resolving the name again."""
    error: OSError = OSError("no address to connect to")
    for ip in addresses:
        try:
            return socket.create_connection((ip, address[1]), timeout, source_address)
        except OSError as exc:
            error = exc
    raise error


def _pinned(connection_class: type, addresses: tuple[str, ...], host: str, **kwargs: Any):
    # TLS still verifies the certificate and sends SNI for the URL's host name.
    connection = connection_class(host, **kwargs)
    connection._create_connection = functools.partial(_connect, addresses)
    return connection


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx then surfaces as HTTPError: redirects could lead past the guard


def pinned_opener(target: Target, context: ssl.SSLContext) -> urllib.request.OpenerDirector:
    """Build a urllib opener bound to the target's checked addresses, without proxies."""
    plain = urllib.request.HTTPHandler()
    plain.http_open = lambda req: plain.do_open(  # type: ignore[method-assign]
        functools.partial(_pinned, http.client.HTTPConnection, target.addresses), req)
    secure = urllib.request.HTTPSHandler(context=context)
    secure.https_open = lambda req: secure.do_open(  # type: ignore[method-assign]
        functools.partial(_pinned, http.client.HTTPSConnection, target.addresses), req,
        context=context)
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect, plain, secure)
