import json
from typing import Any

import httpx
from pydantic import BaseModel, RootModel, ValidationError

from .generated.models import GatewayProblem
from .operation import Operation
from .problems import InvalidAnswer, TemporaProblem, retry_after_seconds


def media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def _explain(error: ValidationError) -> str:
    first = error.errors()[0]
    where = "/".join(str(part) for part in first["loc"]) or "(the body)"
    return f"{where}: {first['msg']}"


def raise_problem(name: str, response: httpx.Response) -> None:
    """A problem becomes a TemporaProblem (also one the operation does not list: the gateway's 401, 402, 429, 502…)."""
    try:
        problem = GatewayProblem.model_validate_json(response.content, strict=True)
    except ValidationError as error:
        raise InvalidAnswer(name, response.status_code, f"a problem that is not one: {_explain(error)}") from None
    body = problem.model_dump(mode="json", exclude_none=True)
    raise TemporaProblem(body, retry_after_seconds(response.headers.get("retry-after")))


def _check_resource(name: str, status: int, asked: dict[str, str], body: Any) -> None:
    """A path parameter the answer names under the same field must be the one asked.

    A graph path may come with or without its leading slash; a TDF record's id is the one asked under its
    kind (`timepoint:<id>`, `simulation:<id>`).
    """
    if not isinstance(body, dict):
        return
    tdf = "tdf_hash" in body
    for field, value in asked.items():
        answered = body.get(field)
        if not isinstance(answered, str):
            continue
        if field == "path":
            same = answered.lstrip("/") == value.lstrip("/")
        else:
            same = answered == value or (tdf and field == "id" and answered.endswith(f":{value}"))
        if not same:
            raise InvalidAnswer(name, status, f"it answers for {field} {json.dumps(answered)}, not {json.dumps(value)}")


def expected(operation: Operation, name: str, response: httpx.Response) -> Any:
    """What checks this answer's body: its model, "stream", "binary", or None for a documented answer without a body.

    A problem is raised as a TemporaProblem and anything undocumented as an InvalidAnswer, before the body is read.
    """
    media = media_type(response)
    if media == "application/problem+json":
        response.read()
        raise_problem(name, response)
    by_media = operation.answers.get(response.status_code)
    if by_media is None:
        raise InvalidAnswer(name, response.status_code, "the status is not documented for this operation")
    if response.status_code == 204 or ("" in by_media and not media):
        if "" not in by_media:
            raise InvalidAnswer(name, response.status_code, "no body where one is documented")
        return None
    # A documented range (`image/*`) admits each type in it.
    documented_as = media if media in by_media else f"{media.split('/')[0]}/*"
    if documented_as not in by_media:
        documented = ", ".join(key for key in by_media if key) or "no body documented"
        raise InvalidAnswer(name, response.status_code, f"media type {json.dumps(media)} is not documented ({documented})")
    return by_media[documented_as]


def checked(operation: Operation, name: str, asked: dict[str, str], response: httpx.Response) -> Any:
    """Fails closed: the answer, validated against the model its operation documents for that status and media type.

    A body that does not match, or that answers for another resource than the one asked, is an InvalidAnswer;
    bytes of a documented non-JSON type (an image) are returned as they are.
    """
    model = expected(operation, name, response)
    if model is None:
        return None
    if model == "binary":
        return response.content
    try:
        body = json.loads(response.content)
    except ValueError:
        raise InvalidAnswer(name, response.status_code, "the body is not JSON") from None
    try:
        value: BaseModel = model.model_validate_json(response.content, strict=True)
    except ValidationError as error:
        raise InvalidAnswer(name, response.status_code, _explain(error)) from None
    _check_resource(name, response.status_code, asked, body)
    # A document's `anyOf` answer (moments or TDF records) is a RootModel: the caller gets the model inside.
    return value.root if isinstance(value, RootModel) else value
