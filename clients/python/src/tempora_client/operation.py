from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Operation:
    """One public operation as the document describes it: what checks each answer, by status and media type.

    A media type maps to the model its body must match, to "stream" for an event stream, to "binary" for bytes
    of a non-JSON type (a range such as `image/*` admits each type in it), and "" (no media type) to None for a
    documented answer without a body.
    """

    method: str
    path: str
    path_params: tuple[str, ...]
    answers: dict[int, dict[str, Any]]
