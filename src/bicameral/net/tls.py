"""One TLS context for the clients that talk to fixed services (the Bot API, the model APIs).

Building one loads the whole CA bundle: about 50 ms and 1 MB each time, for the same result.
"""

from __future__ import annotations

import ssl
from functools import cache

import httpx


@cache
def service_context() -> ssl.SSLContext:
    """httpx's default verification (the certifi bundle, or SSL_CERT_FILE / SSL_CERT_DIR), built once."""
    return httpx.create_ssl_context()
