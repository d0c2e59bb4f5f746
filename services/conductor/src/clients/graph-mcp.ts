import { AsyncLocalStorage } from 'node:async_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import { type GraphSession, ToolFailure } from '../domain/tools.ts';
import { Reuse } from './reuse.ts';

/** A tool of the graph's MCP server as it lists itself. */
export interface GraphToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
}

/** A tool call's answer as the conductor reads it: MCP's result, with the graph's `{error, suggestion}` when it refused. */
const ToolReply = z.object({
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
  content: z.array(z.object({ text: z.string().optional() })).optional(),
});
const Refusal = z.object({ error: z.string().optional(), suggestion: z.string().optional() });

/** Whom the call in progress is for: its HTTP request carries them. */
interface CallScope {
  userId?: string;
  requestId: string;
}

/**
 * The graph through its MCP server (Streamable HTTP), as any MCP client reaches it: the conductor lists its
 * tools and calls them. One client serves the process: the graph's server is stateless, so the handshake
 * is made once, not per message (two round trips saved on every request). Each call's HTTP request carries
 * the conductor's X-Service-Key and the user's X-User-ID (set through the transport's fetch for the call
 * in progress), so the graph counts it against the user's own read budget rather than one shared by every
 * user of the conductor. MCP, not @tempora/client: the tools and their schemas are what the graph's MCP
 * server lists (the model is shown them as listed), not operations of its OpenAPI document.
 */
export class GraphMcp {
  private readonly url: URL;
  private readonly serviceKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly listTtlMs: number;
  private readonly scope = new AsyncLocalStorage<CallScope>();
  private client: Promise<Client> | undefined;
  private readonly listed = new Reuse<GraphToolInfo[]>(1);

  constructor(graphUrl: string, serviceKey: string | undefined, timeoutMs: number, listTtlMs = 600_000) {
    this.url = new URL('/mcp', graphUrl);
    this.serviceKey = serviceKey;
    this.timeoutMs = timeoutMs;
    this.listTtlMs = listTtlMs;
  }

  /** The process's client, connected at first use; a failed connection is tried again at the next call. */
  private connected(): Promise<Client> {
    this.client ??= (async () => {
      const client = new Client({ name: 'tempora-conductor', version: '0.1.0' });
      const transport = new StreamableHTTPClientTransport(this.url, {
        fetch: (url, init) => {
          const scope = this.scope.getStore();
          const headers = new Headers(init?.headers);
          if (this.serviceKey) headers.set('X-Service-Key', this.serviceKey);
          if (scope?.userId) headers.set('X-User-ID', scope.userId);
          if (scope) headers.set('X-Request-ID', scope.requestId);
          return fetch(url, { ...init, headers });
        },
      });
      try {
        await client.connect(transport, { timeout: this.timeoutMs });
      } catch (error) {
        await client.close().catch(() => undefined);
        throw new ToolFailure(`the graph's MCP server could not be reached: ${(error as Error).message}`);
      }
      return client;
    })();
    this.client.catch(() => {
      this.client = undefined;
    });
    return this.client;
  }

  /** The graph's tools (listed once every `listTtlMs`; a failed listing is tried again at the next request). */
  tools(requestId: string): Promise<GraphToolInfo[]> {
    return this.listed.get('tools', Date.now() + this.listTtlMs, () =>
      this.scope.run({ requestId }, async () => {
        const { tools: listed } = await (await this.connected()).listTools(undefined, { timeout: this.timeoutMs });
        return listed.map((tool) => ({
          name: tool.name,
          description: tool.description ?? tool.name,
          inputSchema: tool.inputSchema,
          readOnly: tool.annotations?.readOnlyHint === true,
        }));
      }),
    );
  }

  /** Calls made for `userId` within one request. */
  session(userId: string, requestId: string): GraphSession {
    return {
      call: (name, args, signal) =>
        this.scope.run({ userId, requestId }, async () => {
          const client = await this.connected();
          let answer: unknown;
          try {
            answer = await client.callTool({ name, arguments: args }, undefined, { timeout: this.timeoutMs, signal });
          } catch (error) {
            throw new ToolFailure(`the graph's ${name} failed: ${(error as Error).message}`);
          }
          const reply = ToolReply.safeParse(answer);
          if (!reply.success) throw new ToolFailure(`the graph's ${name} answered outside MCP's result: ${reply.error.issues[0]!.message}`);
          const structured = reply.data.structuredContent ?? {};
          if (reply.data.isError) {
            const refusal = Refusal.safeParse(structured);
            const error = (refusal.success && refusal.data.error) || textOf(reply.data.content);
            const suggestion = refusal.success && refusal.data.suggestion ? ` (${refusal.data.suggestion})` : '';
            throw new ToolFailure(`${error}${suggestion}`);
          }
          return structured;
        }),
    };
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.then((connected) => connected.close()).catch(() => undefined);
  }
}

const textOf = (content: Array<{ text?: string | undefined }> | undefined): string =>
  content
    ? content
        .map((part) => part.text ?? '')
        .join(' ')
        .slice(0, 300)
    : 'the tool failed';
