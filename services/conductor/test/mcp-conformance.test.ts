import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import type { StandIn } from '../../../test/support/http.ts';
import {
  assertConformant,
  assertInputSchemas2020,
  credentialRelay,
  initialize,
  NEWEST_PROTOCOL,
  OLDER_PROTOCOL,
  postJsonRpc,
  runConformance,
} from '../../../test/support/mcp-conformance.ts';
import { type Platform, startPlatform, type User } from './harness.ts';

const EXPECTED_FAILURES = fileURLToPath(new URL('./mcp-conformance.expected-failures.yaml', import.meta.url));

/**
 * The conductor's MCP server against the official conformance suite (@modelcontextprotocol/conformance),
 * with a user's Bearer token, on its own port at both paths and through the gateway (docs/conductor.md,
 * "MCP"). The suite sends no credentials, so it talks to a loopback relay that adds the token and passes
 * Host and Origin on as the suite wrote them.
 */
describe('conductor MCP: the official conformance suite', function () {
  this.timeout(180_000);
  let platform: Platform;
  let user: User;
  let toConductor: StandIn;
  let toGateway: StandIn;

  before(async () => {
    platform = await startPlatform();
    user = await platform.user(100);
    toConductor = await credentialRelay(platform.conductor.url, user.headers);
    toGateway = await credentialRelay(platform.gateway.url, user.headers);
  });
  after(async () => {
    await toGateway?.stop();
    await toConductor?.stop();
    await platform?.stop();
  });

  const endpoints = () => ({
    direct: `${toConductor.url}/mcp`,
    'direct, the public alias': `${toConductor.url}/api/v1/conductor/mcp`,
    'through the gateway': `${toGateway.url}/api/v1/conductor/mcp`,
  });

  for (const where of ['direct', 'direct, the public alias', 'through the gateway'] as const) {
    it(`passes every scenario that applies to its capabilities (tools), DNS rebinding among them: ${where}`, async () => {
      assertConformant(await runConformance(endpoints()[where], EXPECTED_FAILURES));
    });
  }

  it('refuses a foreign Host or Origin before the credentials are looked at, with a problem', async () => {
    const foreign: Array<Record<string, string>> = [
      { host: 'evil.example.com' },
      { host: `localhost:${new URL(platform.conductor.url).port}`, origin: 'http://evil.example.com' },
    ];
    for (const headers of foreign) {
      for (const credentials of [user.headers, {}]) {
        const reply = await postJsonRpc(`${platform.conductor.url}/mcp`, initialize(NEWEST_PROTOCOL), { ...credentials, ...headers });
        assert.equal(reply.status, 403, JSON.stringify(headers));
        assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
        assert.match(reply.body.detail, /MCP_ALLOWED_HOSTS/);
      }
    }
    // Through the gateway the Host is the conductor's own; the browser's Origin is what gives a rebound page away.
    const viaGateway = await postJsonRpc(`${platform.gateway.url}/api/v1/conductor/mcp`, initialize(NEWEST_PROTOCOL), {
      ...user.headers,
      host: 'evil.example.com',
      origin: 'http://evil.example.com',
    });
    assert.equal(viaGateway.status, 403);
  });

  it('negotiates the newest revision the SDK supports and keeps older clients working, through the gateway too', async () => {
    for (const url of [`${platform.conductor.url}/mcp`, `${platform.gateway.url}/api/v1/conductor/mcp`]) {
      for (const version of [NEWEST_PROTOCOL, OLDER_PROTOCOL]) {
        const reply = await postJsonRpc(url, initialize(version), user.headers);
        assert.equal(reply.status, 200, `${url} ${version}: ${JSON.stringify(reply.body)}`);
        assert.equal(reply.body.result.protocolVersion, version);
        assert.equal(reply.body.result.serverInfo.name, 'tempora-conductor');
        const listed = await postJsonRpc(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...user.headers, 'mcp-protocol-version': version });
        assert.equal(listed.status, 200);
        assert.deepEqual(
          listed.body.result.tools.map((tool: { name: string }) => tool.name),
          ['converse'],
        );
      }
    }
  });

  it('declares the input schema of converse as valid JSON Schema 2020-12', async () => {
    const listed = await postJsonRpc(`${platform.conductor.url}/mcp`, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, user.headers);
    assert.equal(listed.status, 200);
    assertInputSchemas2020(listed.body.result.tools);
    const [converse] = listed.body.result.tools;
    assert.equal(converse.inputSchema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.deepEqual(converse.inputSchema.required, ['content']);
  });
});
