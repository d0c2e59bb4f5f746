"""The client against the platform's recorded answers (clients/fixtures/recorded/): a local server answers each
request with its fixture's recorded answer, and the client must send the recorded request and return the
recorded body as its model, or raise the recorded problem as a TemporaProblem."""

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from local_server import Answer, ScriptedServer, Seen
from pydantic import BaseModel

from tempora_client import RetryPolicy, Tempora, TemporaProblem

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded"
FIXTURES = [json.loads(path.read_text()) for path in sorted(RECORDED.glob("*.json"))]
# Whether a 429 is waited for is the transport's business (test_fail_closed.py): here it is raised.
NO_RETRY = RetryPolicy(attempts=1, max_wait_seconds=0)


class Replay:
    """A local server answering with the current fixture's recorded answer."""

    def __init__(self) -> None:
        self.fixture: dict[str, Any] = {}
        self.server = ScriptedServer(self._answer)

    def _answer(self, seen: Seen, answer: Answer, count: int) -> None:
        response = self.fixture["response"]
        body = b"" if "body" not in response else json.dumps(response["body"]).encode()
        answer.raw(response["status"], body, response["headers"])


@pytest.fixture(scope="module")
def replay():
    replay = Replay()
    yield replay
    replay.server.close()


def plain(value: Any) -> Any:
    """A model as the JSON it was read from: the fields the answer set, under their names in the answer."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def test_the_session_has_problems_among_its_answers():
    statuses = {fixture["response"]["status"] for fixture in FIXTURES}
    assert {200, 201, 202, 404, 422, 429} <= statuses, statuses
    assert any(fixture["response"]["headers"].get("retry-after") for fixture in FIXTURES if fixture["response"]["status"] == 429)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture["name"] for fixture in FIXTURES])
def test_replays_the_recorded_answer(replay, fixture):
    replay.fixture = fixture
    request, response = fixture["request"], fixture["response"]
    tempora = Tempora(replay.server.url, api_key="fixture-key" if request["signedIn"] else None, retry=NO_RETRY)
    sent = len(replay.server.seen)

    def call() -> Any:
        return tempora.call(fixture["operationId"], path=request["path"], query=request["query"], body=request.get("body"))

    if response["status"] >= 400:
        with pytest.raises(TemporaProblem) as raised:
            call()
        problem, body = raised.value, response["body"]
        assert (problem.status, problem.type, problem.title, problem.detail, problem.instance) == (
            response["status"],
            body["type"],
            body["title"],
            body["detail"],
            body.get("instance"),
        )
        assert problem.errors == body.get("errors", [])
        retry_after = response["headers"].get("retry-after")
        assert problem.retry_after == (None if retry_after is None else int(retry_after))
    else:
        assert plain(call()) == response.get("body")
    assert len(replay.server.seen) == sent + 1, "one request, not retried"
    seen = replay.server.seen[-1]
    assert seen.method == fixture["method"]
    assert unquote(seen.path) == unquote(request["url"])
    assert (json.loads(seen.body) if seen.body else None) == request.get("body")
    assert ("x-api-key" in seen.headers) == request["signedIn"]
