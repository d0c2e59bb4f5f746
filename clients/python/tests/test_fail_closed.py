"""The client against a tiny local server that answers as each test scripts it: the answers our services
never give (a wrong resource, a wrong shape, a dropped stream) and the timing of retries."""

import calendar
import json
import re
import threading
import time
from email.utils import formatdate

import pytest
from local_server import Answer, ScriptedServer, Seen, event, problem, simulation_run

from tempora_client import InvalidAnswer, RetryPolicy, Tempora, TemporaProblem, models, retry_after_seconds

RUN = "3f1d9a52-7c1e-4b8a-9d2f-0a1b2c3d4e5f"
OTHER = "9e8d7c6b-5a49-4382-8716-f5e4d3c2b1a0"
FAST = RetryPolicy(attempts=3, max_wait_seconds=5, backoff_seconds=0.01)


@pytest.fixture
def serve():
    servers: list[ScriptedServer] = []

    def start(answer) -> ScriptedServer:
        servers.append(ScriptedServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_refuses_an_answer_for_another_resource(serve):
    other = serve(lambda seen, answer, count: answer.json(200, simulation_run(OTHER)))
    with pytest.raises(InvalidAnswer) as refused:
        Tempora(other.url, api_key="key", retry=FAST).api.get_simulation(RUN)
    assert f'answers for id "{OTHER}", not "{RUN}"' in refused.value.reason
    # The same answer for the id asked passes, as a model.
    own = serve(lambda seen, answer, count: answer.json(200, simulation_run(RUN)))
    run = Tempora(own.url, api_key="key").api.get_simulation(RUN)
    assert isinstance(run, models.SimulationSimulationRun) and str(run.id) == RUN


def test_refuses_a_moment_for_another_path(serve):
    moment = {"path": "/1969/july/20/2017/usa/florida/cape/apollo-11", "name": "Apollo 11"}
    server = serve(lambda seen, answer, count: answer.json(200, moment))
    with pytest.raises(InvalidAnswer):
        Tempora(server.url).api.get_moment("1066/october/14/0900/england/east-sussex/hastings/battle")


def test_refuses_a_wrong_shape_an_undocumented_status_media_type_and_problem(serve):
    answers = [
        lambda answer: answer.json(200, {"moments": "many"}),
        lambda answer: answer.json(201, {"moments": 1}),
        lambda answer: answer.raw(200, b"<html>a captive portal</html>", {"content-type": "text/html"}),
        lambda answer: answer.raw(500, b'{"title": "no status, no type"}', {"content-type": "application/problem+json"}),
        lambda answer: answer.raw(200, b"{not json", {"content-type": "application/json"}),
    ]
    server = serve(lambda seen, answer, count: answers[count - 1](answer))
    tempora = Tempora(server.url, retry=FAST)
    reasons = []
    for _ in answers:
        with pytest.raises(InvalidAnswer) as refused:
            tempora.api.get_stats()
        reasons.append(refused.value.reason)
    assert re.search(r"total_nodes: Field required", reasons[0]), reasons[0]
    assert "status is not documented" in reasons[1]
    assert 'media type "text/html" is not documented' in reasons[2]
    assert "a problem that is not one" in reasons[3]
    assert "not JSON" in reasons[4]


def test_refuses_a_value_of_the_wrong_type_instead_of_coercing_it(serve):
    run = {**simulation_run(RUN), "fidelity": "1"}
    server = serve(lambda seen, answer, count: answer.json(200, run))
    with pytest.raises(InvalidAnswer) as refused:
        Tempora(server.url, api_key="key").api.get_simulation(RUN)
    assert "fidelity" in refused.value.reason


def test_turns_a_problem_into_a_typed_error(serve):
    body = {**problem(404, "Not Found", "no moment at that path"), "type": "https://tempora.dev/problems/not-found"}
    server = serve(lambda seen, answer, count: answer.json(404, body))
    with pytest.raises(TemporaProblem) as raised:
        Tempora(server.url).api.get_moment("1969/x")
    error = raised.value
    assert (error.status, error.type, error.detail, error.retry_after) == (404, "https://tempora.dev/problems/not-found", "no moment at that path", None)


def test_reads_retry_after_in_seconds_and_as_an_http_date():
    now = calendar.timegm((2026, 1, 1, 0, 0, 0))
    assert retry_after_seconds("7", now) == 7
    assert retry_after_seconds("Thu, 01 Jan 2026 00:00:09 GMT", now) == 9
    assert retry_after_seconds("Wed, 31 Dec 2025 23:00:00 GMT", now) == 0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds(None, now) is None


def test_waits_what_retry_after_says_and_gives_up_on_a_wait_past_its_limit(serve):
    times: list[float] = []

    def answer(seen: Seen, reply: Answer, count: int) -> None:
        times.append(time.monotonic())
        if count == 1:
            reply.json(429, problem(429, "Too Many Requests", "slow down"), {"retry-after": formatdate(time.time() + 2, usegmt=True)})
        elif count == 2:
            reply.json(503, problem(503, "Service Unavailable", "later"), {"retry-after": "1"})
        elif count == 3:
            reply.json(200, {"ok": True})
        else:
            reply.json(429, problem(429, "Too Many Requests", "come back in an hour"), {"retry-after": "3600"})

    server = serve(answer)
    tempora = Tempora(server.url, retry=FAST)
    # A body the schema refuses, but only after the two waits: what matters here is when each try came.
    with pytest.raises(InvalidAnswer):
        tempora.api.get_stats()
    assert len(times) == 3
    # An HTTP date has a one-second resolution: at least one full second, at most the two asked.
    assert times[1] - times[0] >= 1.0, f"waited {times[1] - times[0]:.3f} s for the date"
    assert times[2] - times[1] >= 1.0, f"waited {times[2] - times[1]:.3f} s for 1 s"
    started = time.monotonic()
    with pytest.raises(TemporaProblem) as raised:
        tempora.api.get_stats()
    assert (raised.value.status, raised.value.retry_after) == (429, 3600)
    assert time.monotonic() - started < 1.0, "a wait past the limit is not waited"


def test_sends_a_simulation_start_again_with_the_same_idempotency_key(serve):
    def answer(seen: Seen, reply: Answer, count: int) -> None:
        if count == 1:
            return reply.drop()
        if count == 2:
            return reply.json(503, problem(503, "Service Unavailable", "busy"), {"retry-after": "0"})
        reply.json(202, simulation_run(RUN), {"location": f"/api/v1/simulations/{RUN}"})

    server = serve(answer)
    tempora = Tempora(server.url, api_key="key", retry=FAST)
    run = tempora.simulate({"prompt": "the printing press reaches Venice", "mode": "FORWARD", "fidelity": 1})
    assert str(run.id) == RUN
    keys = [seen.headers.get("idempotency-key") for seen in server.seen]
    assert len(keys) == 3
    assert re.fullmatch(r"[0-9a-f-]{36}", keys[0] or "")
    assert len(set(keys)) == 1, f"one key on every try: {keys}"
    assert len({seen.body for seen in server.seen}) == 1
    # A key the caller gives is the one sent; so is a model as the body.
    tempora.simulate(models.SimulationSimulateRequest(prompt="again"), idempotency_key="my-key-1")
    assert server.seen[-1].headers["idempotency-key"] == "my-key-1"
    assert json.loads(server.seen[-1].body) == {"prompt": "again"}


def test_keys_an_asynchronous_generation_too(serve):
    server = serve(lambda seen, answer, count: answer.json(503, problem(503, "Service Unavailable", "busy"), {"retry-after": "0"}))
    with pytest.raises(TemporaProblem):
        Tempora(server.url, api_key="key", retry=FAST).api.generate_async({"query": "the fall of Constantinople"})
    assert len(server.seen) == 3
    assert len({seen.headers["idempotency-key"] for seen in server.seen}) == 1


def test_does_not_send_an_unkeyed_post_twice(serve):
    server = serve(lambda seen, answer, count: answer.json(503, problem(503, "Service Unavailable", "busy"), {"retry-after": "0"}))
    with pytest.raises(TemporaProblem) as raised:
        Tempora(server.url, api_key="key", retry=FAST).ask("who built the pyramids?")
    assert raised.value.status == 503
    assert len(server.seen) == 1
    assert "idempotency-key" not in server.seen[0].headers


def test_rotates_the_token_pair_once_on_a_401(serve):
    user = {"id": "u1", "email": None, "name": None, "tier": "free", "is_demo": True, "balance": 5, "providers": [], "created_at": "2026-01-01T00:00:00Z"}

    def pair(n: int) -> dict:
        return {"access_token": f"access-{n}", "refresh_token": f"refresh-{n}", "token_type": "Bearer", "expires_in": 900, "refresh_expires_in": 86400}

    def answer(seen: Seen, reply: Answer, count: int) -> None:
        if seen.path == "/api/v1/auth/refresh":
            if json.loads(seen.body)["refresh_token"] == "refresh-1":
                time.sleep(0.2)  # long enough for the second caller to wait on the same rotation
                return reply.json(200, pair(2))
            return reply.json(401, problem(401, "Unauthorized", "spent"))
        if seen.headers.get("authorization") == "Bearer access-2":
            return reply.json(200, user)
        reply.json(401, problem(401, "Unauthorized", "expired"))

    server = serve(answer)
    kept: list = []
    tempora = Tempora(server.url, tokens=models.GatewayTokenPair(**pair(1)), on_tokens=kept.append)
    ids: list[str] = []
    callers = [threading.Thread(target=lambda: ids.append(tempora.api.get_me().id)) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert ids == ["u1", "u1"]
    assert len([seen for seen in server.seen if seen.path == "/api/v1/auth/refresh"]) == 1, "one rotation for both callers"
    assert [tokens.model_dump() for tokens in kept] == [pair(2)]
    # A spent refresh token: the pair is dropped and the 401 is the caller's.
    stale = Tempora(server.url, tokens=models.GatewayTokenPair(**pair(3)))
    with pytest.raises(TemporaProblem) as raised:
        stale.api.get_me()
    assert raised.value.status == 401
    assert stale.tokens is None


def test_resumes_a_simulation_stream_that_drops_with_last_event_id(serve):
    def answer(seen: Seen, reply: Answer, count: int) -> None:
        head = ": heartbeat\n\n" + event(1, "run", simulation_run(RUN)) + event(2, "step", {"seq": 1})
        # The first connection drops once its events are out; the server replays from the start, as the simulation service does.
        reply.events(head if count == 1 else head + event(3, "step", {"seq": 2}) + event(4, "end", simulation_run(RUN)))

    server = serve(answer)
    tempora = Tempora(server.url, api_key="key", retry=FAST)
    seen = [f"{item.id}:{item.event}" for item in tempora.simulation_events(RUN)]
    assert seen == ["1:run", "2:step", "3:step", "4:end"]
    assert len(server.seen) == 2
    assert "last-event-id" not in server.seen[0].headers
    assert server.seen[1].headers["last-event-id"] == "2"


def test_refuses_an_event_whose_data_is_not_json_and_raises_an_error_event_as_a_problem(serve):
    def answer(seen: Seen, reply: Answer, count: int) -> None:
        if seen.path.endswith("/events"):
            return reply.events("id: 1\nevent: run\ndata: {not json\n\n")
        reply.events(event(1, "start", {}) + event(2, "error", problem(502, "Bad Gateway", "the model provider failed")))

    server = serve(answer)
    tempora = Tempora(server.url, api_key="key")
    with pytest.raises(InvalidAnswer) as bad:
        list(tempora.simulation_events(RUN))
    assert "not JSON" in bad.value.reason
    names: list[str] = []
    with pytest.raises(TemporaProblem) as failed:
        for item in tempora.stream_scene({"query": "the fall of Constantinople"}):
            names.append(item.event)
    assert names == ["start"]
    assert (failed.value.status, failed.value.detail) == (502, "the model provider failed")


def test_sends_default_headers_with_every_request_and_a_forwarded_authorization_as_given(serve):
    def answer(seen: Seen, reply: Answer, count: int) -> None:
        if seen.path.endswith("/events"):
            return reply.events(event(1, "end", simulation_run(RUN)))
        if seen.path == "/api/v1/auth/me":
            return reply.json(401, problem(401, "Unauthorized", "token expired"))
        if count == 1:
            return reply.json(503, problem(503, "Service Unavailable", "busy"), {"retry-after": "0"})
        reply.json(202, simulation_run(RUN), {"location": f"/api/v1/simulations/{RUN}"})

    server = serve(answer)
    tempora = Tempora(server.url, api_key="key", retry=FAST, headers={"X-Request-ID": "req-1", "Idempotency-Key": "default-key"})
    tempora.simulate({"prompt": "the printing press reaches Venice"})
    tempora.simulate({"prompt": "again"}, idempotency_key="mine")
    list(tempora.simulation_events(RUN))
    sent = [(seen.headers.get("x-request-id"), seen.headers.get("idempotency-key"), seen.headers.get("x-api-key")) for seen in server.seen]
    # The 503 and its retry, a start with its own key in place of the default one, the stream.
    assert sent == [("req-1", "default-key", "key"), ("req-1", "default-key", "key"), ("req-1", "mine", "key"), ("req-1", "default-key", "key")]
    # A forwarded Authorization goes as given, in place of the API key, and a 401 to it is the caller's: not rotated.
    forwarding = Tempora(server.url, api_key="key", retry=FAST, headers={"Authorization": "Bearer caller-token"})
    with pytest.raises(TemporaProblem) as raised:
        forwarding.api.get_me()
    assert raised.value.status == 401
    assert (server.seen[-1].headers["authorization"], "x-api-key" in server.seen[-1].headers) == ("Bearer caller-token", False)
    assert len(server.seen) == 5
