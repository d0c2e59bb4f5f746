/**
 * The conductor's peers for the benchmark, each answering after a fixed latency, so that what is left of a
 * message's wall time is the conductor's own: the gateway (JWKS, introspection, prices, ledger), the graph
 * (a real MCP server, Streamable HTTP, every HTTP request delayed), generation, simulation, and an
 * OpenAI-compatible model that asks for a scripted turn.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { z } from 'zod';

export const USER_ID = '00000000-0000-4000-8000-0000000000be';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What every stand-in shares: its latency, and how many requests it was sent (by kind). */
export interface Latency {
  ms: number;
  counts: Map<string, number>;
}

async function readBody(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A stand-in: `route` answers; requests counted by `kind`; delayed by the latency unless `instant`. */
function standIn(
  latency: Latency,
  route: (req: IncomingMessage, res: ServerResponse, body: any) => { kind: string; instant?: boolean; answer: () => void | Promise<void> },
) {
  const server = createServer(async (req, res) => {
    const body = req.method === 'POST' && !req.url?.startsWith('/mcp') ? await readBody(req) : undefined;
    const handled = route(req, res, body);
    latency.counts.set(handled.kind, (latency.counts.get(handled.kind) ?? 0) + 1);
    if (!handled.instant && latency.ms > 0) await sleep(latency.ms);
    await handled.answer();
  });
  return server;
}

export interface StandIns {
  gateway: string;
  graph: string;
  generation: string;
  simulation: string;
  model: string;
  /** A user's access token, signed by the gateway stand-in's key. */
  token: string;
  latency: Latency;
  /** The model's next turns, by turn number within a request; past the script, a closing answer. */
  modelScript: Array<{ calls?: Array<{ name: string; arguments: Record<string, unknown> }>; text?: string }>;
  close(): Promise<void>;
}

const PRICES = {
  currency: 'credits',
  operations: [
    { operation: 'generation.hyper', cost: 1 },
    { operation: 'generation.balanced', cost: 2 },
    { operation: 'generation.gemini3', cost: 3 },
    { operation: 'generation.hd', cost: 5 },
    { operation: 'generation.image', cost: 2 },
    ...[3, 5, 8, 12, 20].map((cost, index) => ({ operation: `simulation.fidelity-${index + 1}`, cost })),
  ],
};

const moment = (slug: string, year: number) => ({
  path: `/${year}/june/1/1200/france/ile-de-france/paris/${slug}`,
  event_name: slug.replace(/-/g, ' '),
  year,
  figures: [],
  description: slug,
});

/** The graph's MCP server in miniature: the tools the conductor uses, with answers of the real shapes. */
function graphServer(): McpServer {
  const server = new McpServer({ name: 'bench-graph', version: '1' }, { capabilities: { tools: {} } });
  const structured = (value: object) => ({
    content: [{ type: 'text' as const, text: JSON.stringify(value) }],
    structuredContent: value as Record<string, unknown>,
  });
  const read = { annotations: { readOnlyHint: true } };
  server.registerTool(
    'graph_search',
    {
      description: 'search',
      inputSchema: { query: z.string().optional(), year_from: z.number().optional(), year_to: z.number().optional(), limit: z.number().optional() },
      ...read,
    },
    async (args) => {
      const slug = String(args.query ?? 'moment')
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '-');
      return structured({ items: [moment(slug, args.year_from ?? 1800)], total: 1 });
    },
  );
  server.registerTool(
    'find_path',
    { description: 'path', inputSchema: { from_path: z.string(), to_path: z.string(), max_hops: z.number().optional() }, ...read },
    async (args) =>
      structured({
        found: true,
        hops: 1,
        nodes: [
          { id: args.from_path, name: 'from', year: 1789, hop: 0 },
          { id: args.to_path, name: 'to', year: 1815, hop: 1 },
        ],
        edges: [{ source: args.from_path, target: args.to_path, type: 'causes' }],
      }),
  );
  for (const name of ['traverse_moments', 'graph_neighbors']) {
    server.registerTool(
      name,
      {
        description: name,
        inputSchema: { path: z.string(), direction: z.string().optional(), depth: z.number().optional(), limit: z.number().optional() },
        ...read,
      },
      async (args) =>
        structured({
          anchor: args.path,
          direction: args.direction ?? 'both',
          nodes: [
            { id: args.path, name: 'anchor', year: 1800, hop: 0 },
            { id: '/1801/june/1/1200/france/ile-de-france/paris/next', name: 'next', year: 1801, hop: 1 },
          ],
          edges: [],
          truncated: false,
        }),
    );
  }
  server.registerTool('graph_moment', { description: 'moment', inputSchema: { path: z.string() }, ...read }, async (args) =>
    structured({ ...moment('one', 1800), path: args.path, edges: [], edge_count: 0 }),
  );
  return server;
}

export async function startStandIns(latencyMs: number): Promise<StandIns> {
  const latency: Latency = { ms: latencyMs, counts: new Map() };
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' };
  const token = await new SignJWT({ tier: 'pro' })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench', typ: 'JWT' })
    .setSubject(USER_ID)
    .setJti(randomUUID())
    .setIssuer('tempora-gateway')
    .setAudience('tempora')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(privateKey);

  const gateway = standIn(latency, (req, res, body) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    // Key set, introspection and prices are cached by the conductor: answered at once, they stay out of the figures.
    if (path === '/.well-known/jwks.json') return { kind: 'jwks', instant: true, answer: () => json(res, 200, { keys: [jwk] }) };
    if (path === '/api/v1/auth/introspect')
      return { kind: 'introspect', instant: true, answer: () => json(res, 200, { active: true, sub: USER_ID, tier: 'pro' }) };
    if (path === '/api/v1/credits/costs') return { kind: 'costs', instant: true, answer: () => json(res, 200, PRICES) };
    if (path === '/api/v1/credits/charge')
      return { kind: 'charge', answer: () => json(res, 201, { entry: { idempotency_key: body.idempotency_key }, balance: 1_000_000, replayed: false }) };
    if (path === '/api/v1/credits/refund') return { kind: 'refund', answer: () => json(res, 200, { balance: 1_000_000, replayed: false }) };
    if (path.endsWith('/balance')) return { kind: 'balance', answer: () => json(res, 200, { user_id: USER_ID, balance: 1_000_000, currency: 'credits' }) };
    return { kind: 'unknown', instant: true, answer: () => json(res, 404, { detail: path }) };
  });

  const graph = standIn(latency, (req, res) => ({
    kind: 'graph',
    answer: async () => {
      const server = graphServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
    },
  }));

  const generation = standIn(latency, (_req, res, body) => ({
    kind: 'render',
    answer: () => {
      const id = randomUUID();
      json(res, 200, {
        id,
        title: body.query,
        year: 1804,
        path: null,
        image_url: body.generate_image ? `/api/v1/timepoints/${id}/image` : null,
        moment: { summary: 'a scene' },
        characters: [{ name: 'Napoleon' }],
        dialog: [],
        model_provider: 'offline',
      });
    },
  }));

  const runs = new Map<string, object>();
  const simulation = standIn(latency, (req, res, body) => {
    if (req.method === 'POST') {
      return {
        kind: 'simulate',
        answer: () => {
          const id = randomUUID();
          const run = { id, status: 'queued', mode: body.mode ?? 'FORWARD', fidelity: body.fidelity, progress: { steps_done: 0, steps_total: 5, percent: 0 } };
          runs.set(id, run);
          json(res, 202, { ...run, status_url: `/api/v1/simulations/${id}` });
        },
      };
    }
    const id = (req.url ?? '').split('/')[4] ?? '';
    return { kind: 'follow', answer: () => json(res, runs.has(id) ? 200 : 404, runs.get(id) ?? { detail: 'no run' }) };
  });

  const standIns: StandIns = {
    gateway: await listen(gateway),
    graph: await listen(graph),
    generation: await listen(generation),
    simulation: await listen(simulation),
    model: '',
    token,
    latency,
    modelScript: [],
    close: async () => undefined,
  };

  // The model answers at once: the figures are the conductor's and its tools'.
  const model = createServer(async (req, res) => {
    const body = await readBody(req);
    const messages = body.messages as Array<{ role: string }>;
    const turn = messages.slice(messages.map((message) => message.role).lastIndexOf('user') + 1).filter((message) => message.role === 'assistant').length;
    const scripted = standIns.modelScript[turn] ?? { text: 'done' };
    const calls = (scripted.calls ?? []).map((call) => ({
      id: `call_${randomUUID()}`,
      type: 'function',
      function: { name: call.name, arguments: JSON.stringify(call.arguments) },
    }));
    json(res, 200, {
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: scripted.text ?? null, ...(calls.length ? { tool_calls: calls } : {}) },
          finish_reason: calls.length ? 'tool_calls' : 'stop',
        },
      ],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
    });
  });
  standIns.model = `${await listen(model)}/v1`;
  standIns.close = async () => {
    for (const server of [gateway, graph, generation, simulation, model]) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  };
  return standIns;
}
