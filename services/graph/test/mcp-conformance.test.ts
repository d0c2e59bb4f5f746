import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import {
  assertConformant,
  assertInputSchemas2020,
  initialize,
  NEWEST_PROTOCOL,
  OLDER_PROTOCOL,
  postJsonRpc,
  runConformance,
} from '../../../test/support/mcp-conformance.ts';
import { type GatewayHarness, startGateway } from '../../gateway/test/harness.ts';
import { SERVICE_KEY as GRAPH_SERVICE_KEY, type GraphHarness, startGraph } from './harness.ts';

const EXPECTED_FAILURES = fileURLToPath(new URL('./mcp-conformance.expected-failures.yaml', import.meta.url));

/**
 * The graph's MCP server against the official conformance suite (@modelcontextprotocol/conformance), on
 * its own port at both paths and on the public host through a real gateway (docs/graph.md, "MCP server").
 */
describe('graph MCP: the official conformance suite', function () {
  this.timeout(120_000);
  let graph: GraphHarness;
  let gw: GatewayHarness;
  let endpoints: Record<string, string>;

  before(async () => {
    graph = await startGraph();
    gw = await startGateway({ GRAPH_URL: graph.url, GRAPH_SERVICE_KEY });
    endpoints = {
      direct: `${graph.url}/mcp/`,
      'direct, the public alias': `${graph.url}/api/v1/graph/mcp`,
      'through the gateway': `${gw.url}/api/v1/graph/mcp`,
    };
  });
  after(async () => {
    await gw?.stop();
    await graph?.stop();
  });

  for (const where of ['direct', 'direct, the public alias', 'through the gateway']) {
    it(`passes every scenario that applies to its capabilities (tools), DNS rebinding among them: ${where}`, async () => {
      assertConformant(await runConformance(endpoints[where]!, EXPECTED_FAILURES));
    });
  }

  it('negotiates the newest revision the SDK supports and keeps older clients working, through the gateway too', async () => {
    for (const url of [endpoints.direct!, endpoints['through the gateway']!]) {
      for (const version of [NEWEST_PROTOCOL, OLDER_PROTOCOL, '2024-11-05']) {
        const reply = await postJsonRpc(url, initialize(version));
        assert.equal(reply.status, 200, `${url} ${version}: ${JSON.stringify(reply.body)}`);
        assert.equal(reply.body.result.protocolVersion, version, url);
        assert.deepEqual(reply.body.result.serverInfo, { name: 'tempora-graph', version: '1.26.0' });
        // A later request of that client names its revision in MCP-Protocol-Version.
        const listed = await postJsonRpc(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-protocol-version': version });
        assert.equal(listed.status, 200, `${version}: ${JSON.stringify(listed.body)}`);
        assert.ok(listed.body.result.tools.length > 0);
      }
    }
    assert.equal(NEWEST_PROTOCOL, '2025-11-25');
  });

  it('answers a revision it does not know with its newest, and refuses an unsupported MCP-Protocol-Version header', async () => {
    const reply = await postJsonRpc(endpoints.direct!, initialize('2099-01-01'));
    assert.equal(reply.status, 200);
    assert.equal(reply.body.result.protocolVersion, NEWEST_PROTOCOL);
    const listed = await postJsonRpc(endpoints.direct!, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-protocol-version': '2099-01-01' });
    assert.equal(listed.status, 400);
  });

  it('declares every tool input schema as valid JSON Schema 2020-12', async () => {
    const listed = await postJsonRpc(endpoints.direct!, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    assert.equal(listed.status, 200);
    assertInputSchemas2020(listed.body.result.tools);
    assert.equal(listed.body.result.tools.length, 7);
    // Declared, not merely compatible: the SDK alone would declare draft-07.
    for (const tool of listed.body.result.tools) assert.equal(tool.inputSchema.$schema, 'https://json-schema.org/draft/2020-12/schema', tool.name);
  });

  it('rejects a schema that is not 2020-12 (the check can fail)', () => {
    assert.throws(() => assertInputSchemas2020([{ name: 'bad', inputSchema: { type: 'object', properties: { n: { type: 'integer', minimum: 'one' } } } }]));
    assert.throws(() => assertInputSchemas2020([{ name: 'draft7', inputSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' } }]));
    assert.throws(() =>
      assertInputSchemas2020([{ name: 'unknown keyword', inputSchema: { type: 'object', properties: { n: { type: 'integer', minimun: 1 } } } }]),
    );
    // draft-07's tuple form: 2020-12 writes it prefixItems.
    assert.throws(() =>
      assertInputSchemas2020([
        { name: 'tuple', inputSchema: { type: 'object', properties: { pair: { type: 'array', items: [{ type: 'integer' }, { type: 'integer' }] } } } },
      ]),
    );
  });
});
