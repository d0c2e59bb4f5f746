import type Router from '@koa/router';
import type { Context } from 'koa';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * Serves MCP over Streamable HTTP at `paths`, stateless: a fresh server (`serverFor`, which may refuse by
 * throwing a Problem) and transport per request, so any replica can answer any call. Only POST carries
 * JSON-RPC; the session streams of GET and DELETE do not exist without sessions (405).
 *
 * A room of its own because only the services that serve MCP depend on the SDK (an optional peer here).
 */
export function mountStatelessMcp(router: Router, paths: string | string[], serverFor: (ctx: Context) => McpServer): void {
  router.all(paths, async (ctx: Context) => {
    if (ctx.method !== 'POST') {
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless; POST JSON-RPC requests.' }, id: null };
      return;
    }
    const server = serverFor(ctx);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    ctx.respond = false;
    ctx.res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(ctx.req, ctx.res, (ctx.request as { body?: unknown }).body);
  });
}
