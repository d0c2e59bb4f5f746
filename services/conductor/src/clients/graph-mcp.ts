import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolFailure, type GraphSession } from '../domain/tools.ts';

/** A tool of the graph's MCP server as it lists itself. */
export interface GraphToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
}

/**
 * The graph through its MCP server (Streamable HTTP), as any MCP client reaches it: the conductor lists its
 * tools and calls them. Calls carry the conductor's X-Service-Key and the user's X-User-ID, so the graph
 * counts them against the user's own read budget rather than one shared by every user of the conductor.
 */
export class GraphMcp {
  private readonly url: URL;
  private readonly serviceKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly listTtlMs: number;
  private listed: { at: number; tools: Promise<GraphToolInfo[]> } | undefined;

  constructor(graphUrl: string, serviceKey: string | undefined, timeoutMs: number, listTtlMs = 600_000) {
    this.url = new URL('/mcp', graphUrl);
    this.serviceKey = serviceKey;
    this.timeoutMs = timeoutMs;
    this.listTtlMs = listTtlMs;
  }

  private async connect(headers: Record<string, string>, signal?: AbortSignal): Promise<Client> {
    const client = new Client({ name: 'tempora-conductor', version: '0.1.0' });
    const transport = new StreamableHTTPClientTransport(this.url, {
      requestInit: { headers: { ...(this.serviceKey ? { 'X-Service-Key': this.serviceKey } : {}), ...headers } },
    });
    try {
      await client.connect(transport, { timeout: this.timeoutMs, ...(signal ? { signal } : {}) });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw new ToolFailure(`the graph's MCP server could not be reached: ${(error as Error).message}`);
    }
    return client;
  }

  /** The graph's tools (listed once every `listTtlMs`; a failed listing is tried again at the next request). */
  tools(requestId: string): Promise<GraphToolInfo[]> {
    const now = Date.now();
    if (this.listed && now - this.listed.at < this.listTtlMs) return this.listed.tools;
    const tools = (async () => {
      const client = await this.connect({ 'X-Request-ID': requestId });
      try {
        const { tools: listed } = await client.listTools(undefined, { timeout: this.timeoutMs });
        return listed.map((tool) => ({
          name: tool.name,
          description: tool.description ?? tool.name,
          inputSchema: tool.inputSchema as Record<string, unknown>,
          readOnly: tool.annotations?.readOnlyHint === true,
        }));
      } finally {
        await client.close().catch(() => undefined);
      }
    })();
    const entry = { at: now, tools };
    this.listed = entry;
    tools.catch(() => {
      if (this.listed === entry) this.listed = undefined;
    });
    return tools;
  }

  session(userId: string, requestId: string): GraphSession {
    let client: Promise<Client> | undefined;
    const open = () => (client ??= this.connect({ 'X-User-ID': userId, 'X-Request-ID': requestId }));
    return {
      call: async (name, args, signal) => {
        let connected: Client;
        try {
          connected = await open();
        } catch (error) {
          client = undefined;
          throw error;
        }
        let reply: { structuredContent?: unknown; isError?: unknown; content?: unknown };
        try {
          reply = (await connected.callTool({ name, arguments: args }, undefined, { timeout: this.timeoutMs, signal })) as typeof reply;
        } catch (error) {
          throw new ToolFailure(`the graph's ${name} failed: ${(error as Error).message}`);
        }
        const structured = (reply.structuredContent ?? {}) as Record<string, unknown>;
        if (reply.isError) {
          const error = typeof structured.error === 'string' ? structured.error : textOf(reply.content);
          const suggestion = typeof structured.suggestion === 'string' && structured.suggestion ? ` (${structured.suggestion})` : '';
          throw new ToolFailure(`${error}${suggestion}`);
        }
        return structured;
      },
      close: async () => {
        if (!client) return;
        await client.then((connected) => connected.close()).catch(() => undefined);
      },
    };
  }
}

const textOf = (content: unknown): string =>
  Array.isArray(content) ? content.map((part) => (typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '')).join(' ').slice(0, 300) : 'the tool failed';
