import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from .answers import checked, expected, raise_problem
from .events import ServerEvent, read_events
from .generated import models
from .generated.api import Api
from .generated.operations import OPERATIONS
from .problems import InvalidAnswer, TemporaProblem, retry_after_seconds


@dataclass(frozen=True)
class RetryPolicy:
    #: Tries in all, the first included.
    attempts: int = 3
    #: A Retry-After longer than this is not waited for: the problem (a 429 or 503) is raised instead.
    max_wait_seconds: float = 30
    #: The wait before the second try when the server names none; doubled for each further try.
    backoff_seconds: float = 0.25


#: The operations whose POST starts paid, asynchronous work: each gets an Idempotency-Key, so a retry never starts it twice.
KEYED = {"generateAsync", "simulate"}
IDEMPOTENT_METHODS = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
RETRIED_STATUSES = {408, 429, 502, 503, 504}
REFRESH = "/api/v1/auth/refresh"


class Tempora:
    """The typed client of Tempora's public HTTP surface, through the gateway.

    `tempora.api` has one typed method per public operation; the methods here are the session's shortcuts.
    Every answer is validated before it is returned; problems are raised as TemporaProblem, anything the
    client refuses as InvalidAnswer.
    """

    def __init__(
        self,
        base_url: str,
        *,
        tokens: models.GatewayTokenPair | None = None,
        api_key: str | None = None,
        on_tokens: Callable[[models.GatewayTokenPair | None], None] | None = None,
        retry: RetryPolicy = RetryPolicy(),
        http: httpx.Client | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.api = Api(self)
        self.retry = retry
        self._base_url = base_url.rstrip("/")
        self._tokens = tokens
        self._api_key = api_key
        self._on_tokens = on_tokens
        # Sent with every request, retries and streams included (an X-Request-ID, a forwarded Authorization);
        # an operation's own header of the same name takes the place of one of them.
        self._headers = httpx.Headers(headers or {})
        self._rotation = threading.Lock()
        # Streams wait as long as the server keeps them open; a plain answer gets a minute.
        self._http = http or httpx.Client(timeout=httpx.Timeout(60.0, read=300.0))

    @property
    def tokens(self) -> models.GatewayTokenPair | None:
        return self._tokens

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Tempora":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # The session.

    def sign_in_demo(self) -> models.GatewaySignIn:
        """Signs in as the store-review demo account; the token pair is kept and rotated by itself on a 401."""
        return self._signed_in(self.api.sign_in_demo())

    def sign_in_with_apple(self, identity_token: str, *, nonce: str | None = None, name: str | None = None) -> models.GatewaySignIn:
        return self._signed_in(self.api.sign_in_with_apple(_present(identity_token=identity_token, nonce=nonce, name=name)))

    def sign_in_with_google(self, id_token: str, *, nonce: str | None = None) -> models.GatewaySignIn:
        return self._signed_in(self.api.sign_in_with_google(_present(id_token=id_token, nonce=nonce)))

    def sign_in_with_github(self, code: str, *, redirect_uri: str | None = None, code_verifier: str | None = None) -> models.GatewaySignIn:
        return self._signed_in(self.api.sign_in_with_git_hub(_present(code=code, redirect_uri=redirect_uri, code_verifier=code_verifier)))

    def refresh(self) -> None:
        """Rotates the pair now: the refresh token is spent and a new pair kept; a refused refresh drops the pair."""
        with self._rotation:
            self._rotate()

    def sign_out(self) -> None:
        """Ends this session on the server (its refresh token is revoked) and forgets the pair."""
        if self._tokens:
            self.api.logout({"refresh_token": self._tokens.refresh_token})
        self._keep(None)

    def create_api_key(self, name: str, *, scopes: list[str] | None = None) -> models.GatewayCreatedApiKey:
        """Creates an API key for the signed-in account (its secret is shown only in this answer)."""
        return self.api.create_api_key(_present(name=name, scopes=scopes))

    def use_api_key(self, key: str) -> None:
        """Uses an API key (X-API-Key) instead of a token pair."""
        self._api_key = key
        self._keep(None)

    def stream_scene(self, body: models.GenerationGenerateRequest | dict[str, Any]) -> Iterator[ServerEvent]:
        """Renders a scene, yielding `start`, one `agent` per agent as it reports, then `done`, whose data carries the scene.

        Closing the stream cancels the remaining agents, so it is neither retried nor resumed; an `error` event is raised as a TemporaProblem.
        """
        name = "POST /api/v1/timepoints/generate/stream"
        for event in self.api.generate_stream(body):
            if event.event == "error":
                raise _problem_event(name, event)
            yield event
            if event.event == "done":
                return
        raise InvalidAnswer(name, 200, "the stream ended before `done`")

    def simulate(self, body: models.SimulationSimulateRequest | dict[str, Any], *, idempotency_key: str | None = None) -> models.SimulationSimulationRun:
        """Starts a simulation; its Idempotency-Key (given, or drawn by the client) is the same on every retry, so one run starts."""
        return self.api.simulate(body, idempotency_key=idempotency_key)

    def simulation_events(self, id: str, *, last_event_id: str | None = None, reconnects: int = 3) -> Iterator[ServerEvent]:
        """A run's events, `run`, one `step` per completed step, until `end`.

        The stream replays the steps completed before it opened, so a dropped connection is opened again
        (with Last-Event-ID) and the events already yielded are skipped; `error` (the stream cannot go on,
        the run does) is a reason to reconnect too.
        """
        name = "GET /api/v1/simulations/{id}/events"
        last = int(last_event_id or 0)
        while True:
            try:
                header = {"last-event-id": str(last)} if last > 0 else {}
                for event in self.stream("streamSimulation", path={"id": id}, header=header):
                    if event.event == "error":
                        raise _problem_event(name, event)
                    if int(event.id) <= last:
                        continue
                    last = int(event.id)
                    yield event
                    if event.event == "end":
                        return
            except (TemporaProblem, httpx.TransportError) as error:
                # A refusal the server answered before the stream is final; a dropped stream or a 503 is not.
                if (isinstance(error, TemporaProblem) and error.status != 503) or reconnects <= 0:
                    raise
                reconnects -= 1
                continue
            if reconnects <= 0:
                raise InvalidAnswer(name, 200, "the stream keeps ending before `end`")
            reconnects -= 1

    def ask(self, content: str) -> models.ConductorConductorResponse:
        """Asks the conductor; it answers with its reply and what each tool it called spent."""
        return self.api.send_message({"content": content})

    # What every operation goes through.

    def call(self, name: str, *, path: dict[str, str] | None = None, query: dict[str, Any] | None = None, header: dict[str, Any] | None = None, body: Any = None) -> Any:
        """Sends one operation (by its operationId) and returns its validated answer."""
        operation = OPERATIONS[name]
        response = self._send(name, path or {}, query, header, body)
        try:
            response.read()
            return checked(operation, f"{operation.method} {operation.path}", path or {}, response)
        finally:
            response.close()

    def stream(self, name: str, *, path: dict[str, str] | None = None, query: dict[str, Any] | None = None, header: dict[str, Any] | None = None, body: Any = None) -> Iterator[ServerEvent]:
        """Sends one operation that answers with an event stream and yields its events as they arrive."""
        operation = OPERATIONS[name]
        label = f"{operation.method} {operation.path}"
        response = self._send(name, path or {}, query, header, body)
        try:
            if expected(operation, label, response) != "stream":
                raise InvalidAnswer(label, response.status_code, "an answer that is not an event stream")
            yield from read_events(response.iter_lines(), label)
        finally:
            response.close()

    def _send(self, name: str, path: dict[str, str], query: dict[str, Any] | None, header: dict[str, Any] | None, body: Any) -> httpx.Response:
        operation = OPERATIONS[name]
        url = self._base_url + operation.path
        for param in operation.path_params:
            url = url.replace(f"{{{param}}}", quote(str(path[param]), safe=""))
        headers = self._headers.copy()
        headers.update({key: str(value) for key, value in (header or {}).items() if value is not None})
        if name in KEYED and "idempotency-key" not in headers:
            headers["idempotency-key"] = str(uuid.uuid4())
        content = None
        if body is not None:
            if isinstance(body, BaseModel):
                body = body.model_dump(mode="json", by_alias=True, exclude_unset=True)
            # Encoded once: every retry sends the same bytes with the same key.
            content = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        params = {key: value for key, value in (query or {}).items() if value is not None}
        request = self._http.build_request(operation.method, url, params=params, headers=headers, content=content)
        return self._retrying(request)

    def _retrying(self, request: httpx.Request) -> httpx.Response:
        """Sends a retriable request again after a network failure or a 408/429/502/503/504, waiting what Retry-After says.

        Retriable: an idempotent method, or a request whose Idempotency-Key makes the server answer a repeat
        with the first outcome. Anything else is sent once.
        """
        retriable = request.method in IDEMPOTENT_METHODS or "idempotency-key" in request.headers
        attempts = max(1, self.retry.attempts) if retriable else 1
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            backoff = self.retry.backoff_seconds * 2 ** (attempt - 1)
            try:
                response = self._authorised(request)
            except httpx.TransportError:
                if last:
                    raise
                time.sleep(backoff)
                continue
            if last or response.status_code not in RETRIED_STATUSES:
                return response
            wait = retry_after_seconds(response.headers.get("retry-after"))
            if wait is not None and wait > self.retry.max_wait_seconds:
                return response
            response.close()
            time.sleep(backoff if wait is None else wait)
        raise AssertionError("unreachable")

    def _authorised(self, request: httpx.Request) -> httpx.Response:
        """Puts the credential on the request; a 401 to the access token rotates the pair once and sends it again."""
        used = self._credential(request)
        response = self._http.send(request, stream=True)
        if response.status_code != 401 or used is None or request.url.path == REFRESH:
            return response
        response.close()
        with self._rotation:
            # Concurrent callers share one rotation: who comes second finds the pair already new.
            if self._tokens is not None and self._tokens.access_token == used:
                self._rotate()
        self._credential(request)
        return self._http.send(request, stream=True)

    def _credential(self, request: httpx.Request) -> str | None:
        """Sets the current credential; the access token when it is one (a 401 to it may be rotated away).

        One among the default headers is sent as given (in place of `api_key`), but for a Bearer one while
        the client holds a pair, whose access token takes its place (as it does that of a spent one, on a retry).
        """
        given = "authorization" in request.headers or "x-api-key" in request.headers
        if given and (self._tokens is None or not request.headers.get("authorization", "").startswith("Bearer ")):
            return None
        if self._tokens is not None:
            request.headers["authorization"] = f"Bearer {self._tokens.access_token}"
            return self._tokens.access_token if self._tokens.refresh_token else None
        if self._api_key is not None:
            request.headers["x-api-key"] = self._api_key
        return None

    def _rotate(self) -> None:
        if self._tokens is None:
            raise RuntimeError("no refresh token to rotate")
        try:
            self._keep(self.api.refresh_tokens({"refresh_token": self._tokens.refresh_token}))
        except TemporaProblem as problem:
            if problem.status == 401:
                self._keep(None)
            raise

    def _signed_in(self, answer: models.GatewaySignIn) -> models.GatewaySignIn:
        fields = ("access_token", "refresh_token", "token_type", "expires_in", "refresh_expires_in")
        self._keep(models.GatewayTokenPair.model_validate({field: getattr(answer, field) for field in fields}))
        return answer

    def _keep(self, tokens: models.GatewayTokenPair | None) -> None:
        self._tokens = tokens
        if self._on_tokens is not None:
            self._on_tokens(tokens)


def _present(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _problem_event(name: str, event: ServerEvent) -> Exception:
    """An `error` event: the problem it carries, or an InvalidAnswer when it carries none."""
    try:
        return TemporaProblem(models.GatewayProblem.model_validate(event.data, strict=True).model_dump(mode="json", exclude_none=True))
    except ValueError:
        return InvalidAnswer(name, 200, f"event {event.id} (error) does not carry a problem")
