"""Proxies and CA certificates from the environment, for ragproof's own HTTP clients.

Self-hosted runners often reach the internet only through a proxy, and through a TLS-inspecting
one with a private CA. The GitHub client and the judge client take these settings from the
command's :class:`~gate.core.environment.Environment` (never from ``os.environ`` directly,
and never from ``.netrc``: a credential file must not add an ``Authorization`` header to a
request that should carry none), read the way curl and requests read them:

- proxy for an ``https`` URL: ``https_proxy``, ``HTTPS_PROXY``, then ``all_proxy``,
  ``ALL_PROXY``; for an ``http`` URL: ``http_proxy``, ``HTTP_PROXY``, then the ``all`` pair.
  The lower-case name wins. A value without a scheme (``proxy:3128``) is ``http://proxy:3128``;
  ``user:password@`` in it is sent as proxy authentication. ``https`` URLs go through the proxy
  in a ``CONNECT`` tunnel (TLS stays end to end); ``http`` URLs are forwarded by it.
- ``no_proxy`` / ``NO_PROXY``: comma-separated entries; ``*`` matches every host; a name
  matches itself and its subdomains (a leading ``.`` or ``*.`` is ignored: ``.example.com``
  matches ``api.example.com`` and ``example.com``); an IP address matches itself, a CIDR
  range (``10.0.0.0/8``) every address in it; ``host:port`` matches that port only.
  Host names are compared case-insensitively; no DNS lookup is made.
- CA certificates to verify TLS with: ``REQUESTS_CA_BUNDLE``, else ``SSL_CERT_FILE``, else
  ``CURL_CA_BUNDLE`` (a PEM file), else ``SSL_CERT_DIR`` (a directory of hashed certificates);
  none of them set: the bundled certifi store. An empty value counts as unset (it never turns
  verification off).

The ``http`` pipeline adapter uses the CA bundle but no proxy: see gate/adapters/httpwire.py.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict
from urllib.parse import urlsplit

CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "SSL_CERT_DIR")


class RequestsOptions(TypedDict):
    proxies: dict[str, str]
    verify: bool | str


def _first(variables: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = (variables.get(name) or "").strip()
        if value:
            return value
    return None


def _with_scheme(proxy: str | None) -> str | None:
    if proxy is None:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


@dataclass(frozen=True)
class NetworkSettings:
    """Where requests go (directly or through a proxy) and which CAs TLS trusts."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: tuple[str, ...] = ()
    ca_bundle: str | None = None  # a PEM file or a certificate directory; None: certifi's

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> NetworkSettings:
        """The settings the variables describe (see the module docstring for the names)."""
        fallback = ("all_proxy", "ALL_PROXY")
        no_proxy = _first(variables, "no_proxy", "NO_PROXY") or ""
        return cls(
            http_proxy=_with_scheme(_first(variables, "http_proxy", "HTTP_PROXY", *fallback)),
            https_proxy=_with_scheme(_first(variables, "https_proxy", "HTTPS_PROXY", *fallback)),
            no_proxy=tuple(entry.strip().lower() for entry in no_proxy.split(",") if entry.strip()),
            ca_bundle=_first(variables, *CA_VARIABLES),
        )

    def bypasses(self, url: str) -> bool:
        """Whether ``url``'s host is exempt from the proxy by ``no_proxy``."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        for entry in self.no_proxy:
            if entry == "*":
                return True
            entry_host, entry_port = entry, None
            if entry.startswith("["):  # [::1] or [::1]:8080
                entry_host, _, rest = entry[1:].partition("]")
                entry_port = rest[1:] or None
            elif entry.count(":") == 1:
                entry_host, entry_port = entry.split(":")
            if entry_port is not None and entry_port != str(port):
                continue
            if _host_matches(host, entry_host):
                return True
        return False

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL a request to ``url`` goes through, or None (direct)."""
        scheme = urlsplit(url).scheme
        proxy = self.https_proxy if scheme == "https" else self.http_proxy if scheme == "http" else None
        if proxy is None or self.bypasses(url):
            return None
        return proxy

    def requests_options(self, url: str) -> RequestsOptions:
        """``proxies`` and ``verify`` for a ``requests`` call to ``url`` (on a session whose
        ``trust_env`` is False, so these are the only settings that apply)."""
        proxy = self.proxy_for(url)
        scheme = urlsplit(url).scheme
        return {"proxies": {scheme: proxy} if proxy else {}, "verify": self.ca_bundle or True}


def _host_matches(host: str, entry: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if "/" in entry:
        try:
            return address is not None and address in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    if address is not None:
        try:
            return address == ipaddress.ip_address(entry)
        except ValueError:
            return False
    name = entry.removeprefix("*").lstrip(".")
    return bool(name) and (host == name or host.endswith("." + name))
