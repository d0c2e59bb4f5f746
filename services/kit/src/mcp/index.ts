import type Router from '@koa/router';
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Context } from 'koa';
import { z } from 'zod';
import { forbidden } from '../http/errors.ts';

/** A hostname (`localhost`, `graph.internal`), a bracketed IPv6 address (`[::1]`), or `.domain` for a domain and its subdomains. */
const HOST_ENTRY = /^(\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*|\[[0-9a-f:.]+\])$/;

/**
 * MCP_ALLOWED_HOSTS: the names a request to an MCP endpoint may carry in Host and Origin, comma-separated
 * (port-agnostic, as the SDK's own host validation); unset or blank: `defaultMcpAllowedHosts`.
 */
export const mcpAllowedHostsField = z
  .string()
  .optional()
  .transform((value, ctx) => {
    const entries = (value ?? '')
      .split(',')
      .map((entry) => entry.trim().toLowerCase())
      .filter(Boolean);
    if (entries.length === 0) return undefined;
    const bad = entries.filter((entry) => !HOST_ENTRY.test(entry));
    if (bad.length > 0) {
      ctx.addIssue({
        code: 'custom',
        message: `${bad.join(', ')}: list hostnames (localhost), bracketed IPv6 addresses ([::1]) or .domain for a domain and its subdomains`,
      });
      return z.NEVER;
    }
    return entries;
  });

/**
 * What an MCP endpoint admits by default: the loopback names (the local platform), the host of the
 * service's own URL (its `<SERVICE>_URL`, the Host its peers and the gateway's proxy send: undici sets the
 * upstream's host, never the client's), and TEMPORA_DOMAIN with its subdomains (a browser's Origin there).
 */
export function defaultMcpAllowedHosts(ownUrl: string, domain: string | undefined): string[] {
  const hosts = ['localhost', '127.0.0.1', '[::1]', new URL(ownUrl).hostname.toLowerCase()];
  if (domain) hosts.push(`.${domain.toLowerCase().replace(/^\.+/, '')}`);
  return [...new Set(hosts)];
}

const admits = (allowed: readonly string[], hostname: string) =>
  allowed.some((entry) => (entry.startsWith('.') ? hostname === entry.slice(1) || hostname.endsWith(entry) : hostname === entry));

/** The hostname of a Host value (`name[:port]`), or undefined when it is not one. */
function hostnameOf(host: string): string | undefined {
  if (host === '' || /[/?#@\\\s]/.test(host)) return undefined;
  try {
    return new URL(`http://${host}`).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

/** The hostname of an http(s) Origin, or undefined (`null`, another scheme, not a URL). */
function originHostname(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.hostname.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * DNS-rebinding protection (MCP transports, "Security Warning"): a page on a rebound name reaches a local
 * server with its own name in Host, and in Origin on every POST, so both must be among `allowed`. Through
 * the gateway Host is the upstream's own and Origin the browser's, which the gateway passes on.
 */
function refuseForeignHost(ctx: Context, allowed: readonly string[]): void {
  const hostname = hostnameOf(ctx.get('Host'));
  if (hostname === undefined || !admits(allowed, hostname)) {
    throw forbidden(`Host "${ctx.get('Host')}" is not one this MCP server answers for (MCP_ALLOWED_HOSTS)`);
  }
  const origin = ctx.get('Origin');
  if (origin === '') return;
  const from = originHostname(origin);
  if (from === undefined || !admits(allowed, from)) {
    throw forbidden(`Origin "${origin}" may not call this MCP server (MCP_ALLOWED_HOSTS)`);
  }
}

/**
 * Lists `tools` (as `registerTool` returned them, by name) with input and output schemas in JSON Schema
 * 2020-12, the dialect MCP gives tool schemas since 2025-11-25 and the one zod's own fields are written in:
 * the SDK's McpServer (1.32.2) would convert zod 4 schemas to draft-07. Call it after the last registerTool.
 */
export function listToolsIn2020(server: McpServer, tools: Readonly<Record<string, RegisteredTool>>): void {
  const schema = (zod: unknown, io: 'input' | 'output') =>
    z.toJSONSchema(zod as z.ZodType, { target: 'draft-2020-12', io }) as { type: 'object'; [key: string]: unknown };
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(tools)
      .filter(([, tool]) => tool.enabled)
      .map(([name, tool]) => ({
        name,
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema ? schema(tool.inputSchema, 'input') : { type: 'object' as const, properties: {} },
        ...(tool.outputSchema ? { outputSchema: schema(tool.outputSchema, 'output') } : {}),
        annotations: tool.annotations,
        execution: tool.execution,
        _meta: tool._meta,
      })),
  }));
}

/**
 * Serves MCP over Streamable HTTP at `paths`, stateless: a fresh server (`serverFor`, which may refuse by
 * throwing a Problem) and transport per request, so any replica can answer any call. Only POST carries
 * JSON-RPC; the session streams of GET and DELETE do not exist without sessions (405). A request whose
 * Host or Origin is not among `allowedHosts` is refused (403) before anything else.
 *
 * The SDK's transport options for this (allowedHosts, enableDnsRebindingProtection) are deprecated for a
 * middleware, and its middleware is Express's: hence `refuseForeignHost`, the same rule for Koa.
 *
 * A room of its own because only the services that serve MCP depend on the SDK (an optional peer here).
 */
export function mountStatelessMcp(
  router: Router,
  paths: string | string[],
  serverFor: (ctx: Context) => McpServer,
  options: { allowedHosts: readonly string[] },
): void {
  router.all(paths, async (ctx: Context) => {
    refuseForeignHost(ctx, options.allowedHosts);
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
