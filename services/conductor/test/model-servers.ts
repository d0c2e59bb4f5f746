import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';

/** One model turn a test scripts: words, tool calls (several make a parallel turn), or a failure status. */
export interface ScriptedTurn {
  text?: string;
  calls?: Array<{ name: string; arguments: Record<string, unknown> | string; id?: string; signature?: string }>;
  /** Total tokens the turn reports. */
  tokens?: number;
  /** Answer this HTTP status instead (a provider failure). */
  status?: number;
}

/** Decides the turn from the request the conductor sent (its body) and the turn's number in the server's life. */
export type Script = (body: any, turn: number) => ScriptedTurn;

export interface ModelServer {
  /** The base URL to configure (OPENROUTER_BASE_URL or GEMINI_BASE_URL). */
  baseUrl: string;
  /** The request bodies received, in order. */
  requests: any[];
  headers: IncomingMessage['headers'][];
  script: Script;
  close(): Promise<void>;
}

async function start(handle: (path: string, body: any, server: ModelServer) => { status: number; body: unknown }, basePath: string): Promise<ModelServer> {
  const model: ModelServer = { baseUrl: '', requests: [], headers: [], script: () => ({ text: 'no script' }), close: async () => undefined };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    model.requests.push(body);
    model.headers.push(req.headers);
    const answer = handle(req.url ?? '/', body, model);
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  model.baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}${basePath}`;
  model.close = () => new Promise((resolve) => server.close(() => resolve()));
  return model;
}

/** An OpenAI-compatible chat-completions server (the aggregator's protocol): `tools` in, `tool_calls` out. */
export function startOpenAiCompatible(): Promise<ModelServer> {
  return start((path, body, server) => {
    if (path !== '/v1/chat/completions') return { status: 404, body: { error: { message: `no route ${path}` } } };
    const turn = server.script(body, server.requests.length - 1);
    if (turn.status) return { status: turn.status, body: { error: { message: 'scripted failure', code: turn.status } } };
    const calls = (turn.calls ?? []).map((call) => ({
      id: call.id ?? `call_${randomBytes(6).toString('hex')}`,
      type: 'function',
      function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
    }));
    const tokens = turn.tokens ?? 100;
    return {
      status: 200,
      body: {
        id: `chatcmpl-${randomBytes(6).toString('hex')}`,
        object: 'chat.completion',
        model: body.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: turn.text ?? null, ...(calls.length ? { tool_calls: calls } : {}) },
            finish_reason: calls.length ? 'tool_calls' : 'stop',
          },
        ],
        usage: { prompt_tokens: tokens - 20, completion_tokens: 20, total_tokens: tokens },
      },
    };
  }, '/v1');
}

/** A Gemini generateContent server (the native provider's protocol): `functionDeclarations` in, `functionCall` parts out. */
export function startGemini(): Promise<ModelServer> {
  return start((path, body, server) => {
    if (!/^\/v1beta\/models\/[^/:]+:generateContent$/.test(path)) return { status: 404, body: { error: { message: `no route ${path}` } } };
    const turn = server.script(body, server.requests.length - 1);
    if (turn.status) return { status: turn.status, body: { error: { code: turn.status, message: 'scripted failure' } } };
    const parts = [
      ...(turn.text ? [{ text: turn.text }] : []),
      ...(turn.calls ?? []).map((call) => ({
        functionCall: { name: call.name, args: call.arguments, ...(call.id ? { id: call.id } : {}) },
        ...(call.signature ? { thoughtSignature: call.signature } : {}),
      })),
    ];
    const tokens = turn.tokens ?? 100;
    return {
      status: 200,
      body: {
        candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: tokens - 20, candidatesTokenCount: 20, totalTokenCount: tokens },
        modelVersion: 'gemini-test',
      },
    };
  }, '');
}
