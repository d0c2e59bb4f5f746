import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { loadConfig } from '@tempora/kit/runtime';
import { GraphConfigSchema } from '../src/config.ts';
import { ADMIN_KEY, type GraphHarness, SERVICE_KEY, serviceKey, startGraph, WRITER_TOKEN, writer } from './harness.ts';

const OTHER_TOKEN = 'other-writer-token-0123456789';
const otherWriter = { Authorization: `Bearer ${OTHER_TOKEN}` };
/** A signed-in user's request as the gateway forwards it (services/gateway/src/proxy/header-contract.ts). */
const gatewayUser = { 'X-Service-Key': SERVICE_KEY, 'X-User-ID': '7b0d2a4e-4a8f-4c1e-9d55-0f6a3c2b1e90' };
const admin = { 'X-Admin-Key': ADMIN_KEY };

describe('graph render jobs: who may read them', function () {
  this.timeout(30_000);
  let h: GraphHarness;
  let jobId: string;
  let mcpJobId: string;

  before(async () => {
    // No renderer: the jobs stay queued, which is all these tests read.
    h = await startGraph({ WRITER_TOKENS: `tester:${WRITER_TOKEN},other:${OTHER_TOKEN}`, GRAPH_WORKERS: 'none' });
    const path = '/1903/july/1/1516/france/ile-de-france/montgeron/a-render-of-their-own';
    const ingested = await h.post('/ingest/tdf', { payload: { path, event_name: 'A render of their own', visibility: 'private' } }, writer);
    assert.equal(ingested.status, 200);
    const reply = await h.post('/generate', { path, event_name: 'A render of their own' }, writer);
    assert.equal(reply.status, 202);
    jobId = reply.body.job.id;
    assert.equal(reply.body.job.requested_by, 'writer:tester');
    // The MCP tool queues under the service key's own principal.
    const client = new Client({ name: 'render-jobs-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`), { requestInit: { headers: serviceKey } }));
    const queuedByService = (await client.callTool({
      name: 'gen_render',
      arguments: { path: '/1903/july/2/1200/france/ile-de-france/paris/a-service-render', event_name: 'A service render' },
    })) as unknown as {
      structuredContent: { job: { id: string; requested_by: string } };
    };
    await client.close();
    mcpJobId = queuedByService.structuredContent.job.id;
    assert.match(queuedByService.structuredContent.job.requested_by, /^service:/);
  });
  after(async () => {
    await h?.stop();
  });

  it('answers the writer who queued the job, admins and the service key acting as itself', async () => {
    for (const headers of [writer, serviceKey, admin]) {
      const reply = await h.get(`/api/v1/graph/jobs/${jobId}`, headers);
      assert.equal(reply.status, 200, JSON.stringify(headers));
      assert.equal(reply.body.id, jobId);
    }
    for (const headers of [serviceKey, admin]) assert.equal((await h.get(`/api/v1/graph/jobs/${mcpJobId}`, headers)).status, 200);
  });

  it('tells anyone else, a signed-in user through the gateway included, that the job does not exist', async () => {
    for (const [who, headers, id] of [
      ['another writer', otherWriter, jobId],
      ['a user forwarded by the gateway', gatewayUser, jobId],
      ["a writer, for the service key's job", writer, mcpJobId],
      ["a user, for the service key's job", gatewayUser, mcpJobId],
    ] as const) {
      const reply = await h.get(`/api/v1/graph/jobs/${id}`, headers);
      assert.equal(reply.status, 404, who);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
      const missing = await h.get('/api/v1/graph/jobs/00000000-0000-4000-8000-000000000000', headers);
      assert.equal(
        reply.body.detail.replace(id, ''),
        missing.body.detail.replace('00000000-0000-4000-8000-000000000000', ''),
        `${who}: the same answer as for no job at all`,
      );
    }
    assert.equal((await h.get(`/api/v1/graph/jobs/${jobId}`)).status, 401, 'no credential');
  });

  it('documents who may read a job', () => {
    const operation = (h.instance.openapi as { paths: Record<string, { get: { security: object[]; description: string } }> }).paths['/api/v1/graph/jobs/{id}']!
      .get;
    assert.deepEqual(operation.security.flatMap((entry) => Object.keys(entry)).sort(), ['AdminKey', 'ServiceKey', 'WriterToken']);
    assert.match(operation.description, /writer who queued it/);
  });

  it('refuses writer names the generation service could not take as an owner', () => {
    const load = (tokens: string) => () => loadConfig(GraphConfigSchema, { WRITER_TOKENS: tokens, SERVICE_KEY, DATABASE_URL: '', LOG_LEVEL: 'silent' });
    assert.throws(load('data team:token-0123456789'), /WRITER_TOKENS.*writer name "data team"/s);
    assert.doesNotThrow(load('curator.eu@tempora+1:token-0123456789'));
  });
});
