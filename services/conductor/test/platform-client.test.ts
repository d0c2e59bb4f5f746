import assert from 'node:assert/strict';
import { committedFixtures } from '../../../clients/fixtures/fixture.ts';
import { startUpstream, type Upstream } from '../../../test/support/stand-ins/upstream.ts';
import { PlatformPeer } from '../src/clients/platform-client.ts';
import { ToolFailure } from '../src/domain/tools.ts';

/** The conductor's calls through @tempora/client: its service key on every request, the user and request on each call. */
describe('conductor: a platform peer through @tempora/client', () => {
  let upstream: Upstream;
  // A real answer of GET /api/v1/models, as the platform gave it (the client validates what it returns).
  const models = committedFixtures().find((fixture) => fixture.operationId === 'listModels')!;
  const on = () => ({ userId: 'user-1', requestId: 'req-1', signal: new AbortController().signal });

  before(async () => {
    upstream = await startUpstream('generation');
  });
  beforeEach(() => {
    upstream.reset();
    upstream.on('GET /api/v1/models', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(models.response.body));
    });
  });
  after(() => upstream.close());

  it('sends its service key with every call, and the user and request id of each', async () => {
    const peer = new PlatformPeer(upstream.url, 'conductor-key-0123456789', 5_000, 'the generation service');
    for (const userId of ['user-1', 'user-2'])
      assert.deepEqual(await peer.call({ ...on(), userId }, (init) => peer.api.GET('/api/v1/models', { ...init })), models.response.body);
    assert.deepEqual(
      upstream.requests.map(({ headers }) => [headers['x-service-key'], headers['x-user-id'], headers['x-request-id']]),
      [
        ['conductor-key-0123456789', 'user-1', 'req-1'],
        ['conductor-key-0123456789', 'user-2', 'req-1'],
      ],
    );
  });

  it('sends no service key when it has none, and turns a refusal into the tool failure', async () => {
    upstream.on('GET /api/v1/models', (_req, res) => {
      res
        .writeHead(403, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ type: 'about:blank', title: 'Forbidden', status: 403, detail: 'no' }));
    });
    const peer = new PlatformPeer(upstream.url, undefined, 5_000, 'the generation service');
    await assert.rejects(
      peer.call(on(), (init) => peer.api.GET('/api/v1/models', { ...init })),
      (error) => error instanceof ToolFailure && /the generation service answered 403: no/.test(error.message),
    );
    assert.equal(upstream.requests[0]!.headers['x-service-key'], undefined);
  });
});
