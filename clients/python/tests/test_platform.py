"""tempora-client against the whole platform as `npm start` runs it (test/python.test.ts starts it and names
its gateway in TEMPORA_GATEWAY_URL): the session the README shows, typed problems and an idempotent retry."""

import os
import time

import httpx
import pytest

from tempora_client import RetryPolicy, Tempora, TemporaProblem, models


@pytest.fixture
def gateway() -> str:
    url = os.environ.get("TEMPORA_GATEWAY_URL")
    assert url, "TEMPORA_GATEWAY_URL names the gateway of a running platform"
    return url


def test_a_complete_session(gateway):
    tempora = Tempora(gateway)
    signed_in = tempora.sign_in_demo()
    assert signed_in.user.is_demo is True
    assert tempora.api.get_me().id == signed_in.user.id

    stats = tempora.api.get_stats()
    assert stats.total_nodes > 0, stats
    moments = tempora.api.list_moments(limit=3)
    assert isinstance(moments, models.GraphMomentList) and len(moments.items) == 3
    first = moments.items[0]
    moment = tempora.api.get_moment(first.path.lstrip("/"))
    assert isinstance(moment, models.GraphMomentDetail) and moment.path == first.path

    progress = list(tempora.stream_scene({"query": "The signing of Magna Carta at Runnymede, 1215"}))
    assert progress[0].event == "start"
    assert any(event.event == "agent" for event in progress)
    assert progress[-1].event == "done" and "scene" in progress[-1].data, progress[-1].data.keys()

    run = tempora.simulate({"prompt": "The printing press reaches Venice in 1469", "mode": "FORWARD", "fidelity": 1})
    followed = list(tempora.simulation_events(str(run.id)))
    assert followed[0].event == "run" and followed[-1].event == "end"
    assert any(event.event == "step" for event in followed)
    assert [int(event.id) for event in followed] == list(range(1, len(followed) + 1))

    answer = tempora.ask("How many moments does the graph hold?")
    assert isinstance(answer.reply, str)
    assert isinstance(answer.tools_called, list)

    refresh = tempora.tokens.refresh_token
    tempora.refresh()
    assert tempora.tokens.refresh_token != refresh, "the pair rotates"
    tempora.sign_out()
    assert tempora.tokens is None


def test_typed_404_and_422(gateway):
    tempora = Tempora(gateway)
    with pytest.raises(TemporaProblem) as missing:
        tempora.api.get_moment("1066/october/14/0900/england/east-sussex/hastings/no-such-moment")
    assert missing.value.status == 404
    assert isinstance(missing.value.type, str) and missing.value.detail
    with pytest.raises(TemporaProblem) as invalid:
        tempora.api.list_moments(limit=-1)
    assert invalid.value.status == 422
    assert invalid.value.errors


class LosesOneAnswer(httpx.HTTPTransport):
    """The first armed answer is lost on its way back, after the server has acted on the request."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        response = super().handle_request(request)
        if not self.armed:
            return response
        self.armed = False
        response.close()
        raise httpx.ReadError("the connection was reset", request=request)


def test_a_lost_simulation_start_is_sent_again_with_its_key_and_starts_one_run(gateway):
    transport = LosesOneAnswer()
    tempora = Tempora(gateway, retry=RetryPolicy(backoff_seconds=0.01), http=httpx.Client(transport=transport, timeout=60))
    tempora.sign_in_demo()
    transport.keys.clear()
    transport.armed = True
    run = tempora.simulate({"prompt": "The Library of Alexandria survives", "mode": "BRANCHING", "fidelity": 1})
    assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1] and transport.keys[0]
    assert [item.id for item in tempora.api.list_simulations().items] == [run.id], "one run started"


def test_retry_after_on_a_429_is_typed_and_waited_for_by_a_client_that_may(gateway):
    impatient = Tempora(gateway, retry=RetryPolicy(max_wait_seconds=0))
    limited = None
    for _ in range(200):
        try:
            impatient.api.get_stats()
        except TemporaProblem as problem:
            limited = problem
            break
    assert limited is not None, "the anonymous window ran out"
    assert limited.status == 429
    assert limited.retry_after is not None and 0 < limited.retry_after <= 60, limited.retry_after
    started = time.monotonic()
    patient = Tempora(gateway, retry=RetryPolicy(max_wait_seconds=65))
    assert patient.api.get_stats().total_nodes > 0
    assert time.monotonic() - started >= limited.retry_after - 1, "it waited before trying again"
