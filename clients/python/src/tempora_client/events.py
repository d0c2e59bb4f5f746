import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .problems import InvalidAnswer


@dataclass(frozen=True)
class ServerEvent:
    """One Server-Sent Event as the services send it: `id` counts from 1, `data` is JSON."""

    id: str
    event: str
    data: Any


def read_events(lines: Iterable[str], operation: str) -> Iterator[ServerEvent]:
    """The events of a text/event-stream body, comments (heartbeats) skipped; each must carry an id, a name and JSON data."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in fields or "event" in fields:
                yield _parsed(fields, operation)
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            fields["data"] = f"{fields['data']}\n{value}" if "data" in fields else value
        elif name in ("event", "id"):
            fields[name] = value


def _parsed(fields: dict[str, str], operation: str) -> ServerEvent:
    if not fields.get("id") or not fields.get("event") or "data" not in fields:
        raise InvalidAnswer(operation, 200, "an event without its id, name or data")
    try:
        return ServerEvent(fields["id"], fields["event"], json.loads(fields["data"]))
    except ValueError:
        raise InvalidAnswer(operation, 200, f"event {fields['id']} ({fields['event']}) carries data that is not JSON") from None
