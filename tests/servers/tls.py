"""A private certificate authority for TLS test servers on 127.0.0.1 (trustme).

``PrivateCA(directory)`` writes the CA certificate to ``ca_file`` (what REQUESTS_CA_BUNDLE or
SSL_CERT_FILE name) and gives server contexts whose certificate is valid for 127.0.0.1 and
localhost. Nothing trusts it unless told to, as with a company's TLS-inspecting proxy.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme


class PrivateCA:
    def __init__(self, directory: Path) -> None:
        self._ca = trustme.CA(organization_name="ragproof tests")
        self.ca_file = directory / "private-ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_file))
        self._cert = self._ca.issue_cert("127.0.0.1", "localhost")

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(context)
        return context
