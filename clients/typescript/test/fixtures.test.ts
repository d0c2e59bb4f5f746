/**
 * @tempora/client against the platform's recorded answers (clients/fixtures/recorded/): a local server
 * answers each request with its fixture's recorded answer, and the client must send the recorded request
 * and return the recorded body, typed and validated, or throw the recorded problem as a TemporaProblem.
 * test/fixtures-drift.test.ts keeps the fixtures true to the platform and to the documents.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { committedFixtures, type Fixture } from '../../fixtures/fixture.ts';
import { Tempora, TemporaProblem } from '../src/index.ts';
import { type Seen, scriptedServer } from './local-server.ts';

const fixtures = committedFixtures();

function answer(fixture: Fixture, response: ServerResponse) {
  const { status, headers, body } = fixture.response;
  response.writeHead(status, headers);
  response.end(body === undefined ? undefined : JSON.stringify(body));
}

/** A fixture's call, through the client's typed `api` (openapi-fetch), by its method and path template. */
function call(tempora: Tempora, fixture: Fixture) {
  const { path, query, body } = fixture.request;
  // The operation is chosen by the data, so its types are not known statically.
  return (tempora.api.request as any)(fixture.method, fixture.template, { params: { path, query }, body });
}

describe('@tempora/client against the recorded fixtures', () => {
  let current: Fixture;
  let server: Awaited<ReturnType<typeof scriptedServer>>;

  before(async () => {
    server = await scriptedServer((_, response) => answer(current, response));
  });

  after(() => server?.close());

  it('records a session with problems among its answers: a 404, a 422 and a 429 with Retry-After', () => {
    const statuses = fixtures.map((fixture) => fixture.response.status);
    for (const status of [200, 201, 202, 404, 422, 429]) assert.ok(statuses.includes(status), `no fixture answers ${status}`);
    assert.ok(fixtures.find((fixture) => fixture.response.status === 429)?.response.headers['retry-after']);
  });

  for (const fixture of fixtures)
    it(`${fixture.name}: ${fixture.method} ${fixture.template} answers ${fixture.response.status}`, async () => {
      current = fixture;
      const { status, headers, body } = fixture.response;
      // Whether a 429 is waited for is the transport's business (test/fail-closed.test.ts): here it is returned.
      const tempora = new Tempora({ baseUrl: server.url, apiKey: fixture.request.signedIn ? 'fixture-key' : undefined, retry: { maxWaitSeconds: 0 } });
      const sent = server.seen.length;
      if (status >= 400) {
        const problem = await call(tempora, fixture).then(
          () => assert.fail('the recorded problem was not thrown'),
          (error: unknown) => error,
        );
        assert.ok(problem instanceof TemporaProblem, String(problem));
        const expected = body as { type: string; title: string; detail: string; instance?: string; errors?: unknown[] };
        assert.deepEqual(
          { status: problem.status, type: problem.type, title: problem.title, detail: problem.detail, instance: problem.instance, errors: problem.errors },
          { status, type: expected.type, title: expected.title, detail: expected.detail, instance: expected.instance, errors: expected.errors ?? [] },
        );
        assert.equal(problem.retryAfter, headers['retry-after'] === undefined ? undefined : Number(headers['retry-after']));
      } else {
        const { data, response } = await call(tempora, fixture);
        assert.equal(response.status, status);
        assert.deepEqual(data, body);
      }
      assert.equal(server.seen.length, sent + 1, 'one request, not retried');
      assertRequest(server.seen.at(-1)!, fixture);
    });
});

/** The client sent what the recording sent: the method, the path and query (compared decoded), the body and a credential when signed in. */
function assertRequest(seen: Seen, fixture: Fixture) {
  assert.equal(seen.method, fixture.method);
  assert.equal(decodeURIComponent(seen.path), decodeURIComponent(fixture.request.url));
  assert.deepEqual(seen.body ? JSON.parse(seen.body) : undefined, fixture.request.body);
  assert.equal(seen.headers['x-api-key'] !== undefined, fixture.request.signedIn);
}
