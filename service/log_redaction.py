"""Credentials never reach a log: a filter on uvicorn's access and error loggers that blanks tokens in each record.

Installed by the app factory (``service.app.create_app``), so ``compat serve`` and compose's uvicorn both get it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

REDACTED = "[redacted]"
# The loggers whose records carry request lines or raw request data: uvicorn's access log (the request line with its
# query string) and its error log (invalid requests, exceptions).
LOGGERS = ("uvicorn.access", "uvicorn.error")

_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # ?token=...&access_token=...&api_key=...&key=... (any case) in a request line or URL.
    (re.compile(r"(?i)([?&;](?:access_token|api_key|token|key)=)[^&;#\s\"']*"), rf"\1{REDACTED}"),
    # "Authorization: Bearer x", "'authorization': 'Basic x'": the scheme kept, the credential gone.
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(\w+)\s+)?[^\s\"',;]+"),
     lambda m: f"{m[1]}{m[2] + ' ' if m[2] else ''}{REDACTED}"),
    # A bearer credential anywhere else ("Bearer compat_...", long enough not to be the word "token").
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{12,}=*"), rf"\1 {REDACTED}"),
    # This service's own tokens (service.auth.TOKEN_PREFIX), wherever they appear.
    (re.compile(r"compat_[A-Za-z0-9_\-]{20,}"), REDACTED),
)


def redact(text: str) -> str:
    """``text`` with every credential the rules know replaced by ``[redacted]``."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


class RedactCredentials(logging.Filter):
    """Rewrites a record's message and string arguments in place; the arguments keep their count and types, since
    uvicorn's AccessFormatter unpacks them (client, method, path with query, HTTP version, status code)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install(loggers: tuple[str, ...] = LOGGERS) -> None:
    """Attach the filter to ``loggers`` once (a second app in the same process adds nothing)."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactCredentials) for f in logger.filters):
            logger.addFilter(RedactCredentials())
