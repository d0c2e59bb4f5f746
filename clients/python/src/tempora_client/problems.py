import email.utils
import re
import time
from typing import Any


class TemporaProblem(Exception):
    """An RFC 9457 problem the server answered with (application/problem+json), validated against its schema."""

    def __init__(self, problem: dict[str, Any], retry_after: int | None = None) -> None:
        super().__init__(f"{problem['status']} {problem['title']}: {problem['detail']}")
        self.status: int = problem["status"]
        self.type: str = problem["type"]
        self.title: str = problem["title"]
        self.detail: str = problem["detail"]
        self.instance: str | None = problem.get("instance")
        #: Field errors of a 422, as the server lists them ({"path", "message"}).
        self.errors: list[dict[str, str]] = problem.get("errors") or []
        #: Seconds to wait before trying again (Retry-After, in seconds or as an HTTP date), when the server said.
        self.retry_after = retry_after


class InvalidAnswer(Exception):
    """An answer the client refuses, never passed on.

    It does not match its documented schema, has a status or media type the operation does not document,
    or answers for another resource than the one asked.
    """

    def __init__(self, operation: str, status: int, reason: str) -> None:
        super().__init__(f"{operation} answered {status}, which the client refuses: {reason}")
        self.operation = operation
        self.status = status
        self.reason = reason


def retry_after_seconds(header: str | None, now: float | None = None) -> int | None:
    """Retry-After in seconds, from either of its forms (delay-seconds or an HTTP date); None when absent or unreadable."""
    if header is None or header.strip() == "":
        return None
    if re.fullmatch(r"\d+", header.strip()):
        return int(header.strip())
    try:
        at = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        return None
    wait = at.timestamp() - (time.time() if now is None else now)
    return max(0, -int(-wait // 1))
