import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { ServiceName } from '../../services/kit/src/runtime/config.ts';
import type { Credentials, FuzzPlatform } from './platform.ts';

interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }> }>>;
  components: { schemas: Record<string, Record<string, unknown>> };
}

interface Answer {
  status: number;
  headers: Headers;
}

/** A request Schemathesis found failing, kept as it was sent, and what the service must answer now. */
export interface Regression {
  title: string;
  service: ServiceName;
  method: string;
  path: string;
  headers?: (credentials: Credentials) => Record<string, string>;
  /** The JSON body; a function for one that needs what only the running platform knows. */
  body?: unknown | ((credentials: Credentials) => Promise<unknown>);
  /** Beyond "not a 5xx": what the fixed service answers, and what its document now says about it. */
  check(response: Answer, text: string, document: OpenApiDocument): void;
}

/** The component a response of `method path` with `status` refers to. */
function responseSchema(document: OpenApiDocument, path: string, method: string, status: number, type: string): Record<string, unknown> {
  const reference = document.paths[path]?.[method]?.responses[String(status)]?.content?.[type]?.schema?.$ref;
  assert.ok(reference, `${method.toUpperCase()} ${path} documents no ${type} schema for ${status}`);
  return document.components.schemas[reference.replace('#/components/schemas/', '')]!;
}

/** An unknown method on a known path: the router answered 501 Not Implemented, a 5xx. */
const unknownMethod = (service: ServiceName, path: string, headers?: Regression['headers']): Regression => ({
  title: `${service}: TRACE ${path} is 405 Method Not Allowed with Allow, not 501`,
  service,
  method: 'TRACE',
  path,
  headers,
  check(response) {
    assert.equal(response.status, 405);
    assert.match(response.headers.get('allow') ?? '', /\b(GET|POST)\b/);
  },
});

/** A problem with RFC 9457 extension members, which the document's closed Problem schema refused. */
const problemWithExtensions = (response: Answer, text: string, document: OpenApiDocument, path: string, status: number, members: string[]) => {
  assert.equal(response.status, status, text);
  const body = JSON.parse(text) as Record<string, unknown>;
  for (const member of members) assert.ok(member in body, `${member} missing from ${text}`);
  assert.notEqual(
    responseSchema(document, path, 'post', status, 'application/problem+json').additionalProperties,
    false,
    'the Problem schema refuses extension members',
  );
};

export const REGRESSIONS: Regression[] = [
  unknownMethod('gateway', '/api/v1/credits/costs'),
  unknownMethod('generation', '/api/v1/models'),
  unknownMethod('graph', '/search', (c) => ({ 'X-Service-Key': c.serviceKey })),
  unknownMethod('simulation', '/api/v1/simulate/templates'),
  unknownMethod('conductor', '/api/v1/conductor/settings', (c) => ({ Authorization: `Bearer ${c.userJwt}` })),
  unknownMethod('billing', '/api/v1/billing/packs', (c) => ({ 'X-Service-Key': c.serviceKey })),
  {
    title: 'gateway: a charge above the balance is a 402 problem whose required and available members its schema allows',
    service: 'gateway',
    method: 'POST',
    path: '/api/v1/credits/charge',
    headers: (c) => ({ 'X-Service-Key': c.serviceKey }),
    // A new demo user, whose 20 credits are sure to be fewer than the amount (the run grants its own user many).
    body: async (c: Credentials) => ({
      amount: 67868,
      idempotency_key: '\u008c\uda7c\udcd4#\u0090',
      operation: '\u00ac\u00de\u00ba',
      user_id: (await c.disposableUser()).id,
    }),
    check: (response, text, document) => problemWithExtensions(response, text, document, '/api/v1/credits/charge', 402, ['required', 'available']),
  },
  {
    title: 'billing: a Stripe webhook without a signature is a 400 problem whose reason member its schema allows',
    service: 'billing',
    method: 'POST',
    path: '/api/v1/billing/webhooks/stripe',
    check: (response, text, document) => problemWithExtensions(response, text, document, '/api/v1/billing/webhooks/stripe', 400, ['reason']),
  },
  {
    title: 'billing: an App Store notification without a body is refused as a client error (was 503 where the App Store is not configured)',
    service: 'billing',
    method: 'POST',
    path: '/api/v1/billing/webhooks/apple',
    check(response, text) {
      assert.ok(response.status >= 400 && response.status < 500, `${response.status} ${text}`);
    },
  },
  {
    title: 'generation: each event of a stream matches the documented ServerSentEvent (the document said a string)',
    service: 'generation',
    method: 'POST',
    path: '/api/v1/timepoints/generate/stream',
    headers: (c) => ({ 'X-Service-Key': c.serviceKey }),
    body: { query: '000' },
    check(response, text, document) {
      assert.equal(response.status, 200, text);
      const schema = responseSchema(document, '/api/v1/timepoints/generate/stream', 'post', 200, 'text/event-stream');
      assert.deepEqual(Object.keys(schema.properties as object).sort(), ['data', 'event', 'id']);
      const events = text.split('\n\n').filter((block) => block && !block.startsWith(':'));
      assert.ok(events.length >= 2, text);
      for (const block of events) {
        const fields = Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]));
        assert.deepEqual(Object.keys(fields).sort(), ['data', 'event', 'id'], block);
        JSON.parse(fields.data!);
      }
    },
  },
  {
    title: "simulation: a run's cost carries its currency, which the SimulationRun schema now names",
    service: 'simulation',
    method: 'POST',
    path: '/api/v1/simulate',
    headers: (c) => ({ 'X-Service-Key': c.serviceKey }),
    body: { fidelity: 3, max_cost_usd: 0.01, mechanisms: [], prompt: '000' },
    check(response, text, document) {
      assert.equal(response.status, 202, text);
      assert.equal((JSON.parse(text) as { cost: { currency: string } }).cost.currency, 'USD');
      const cost = (document.components.schemas.SimulationRun!.properties as Record<string, { properties: object }>).cost!.properties;
      assert.ok('currency' in cost, 'SimulationRun.cost does not name currency');
    },
  },
];

/** Sends the kept request to the running service and checks the answer: never a 5xx, and the regression's own check. */
export async function replay(regression: Regression, fuzz: FuzzPlatform): Promise<void> {
  const base = fuzz.urls[regression.service];
  const document = (await (await fetch(`${base}/openapi.json`)).json()) as OpenApiDocument;
  const value = typeof regression.body === 'function' ? await regression.body(fuzz.credentials) : regression.body;
  const body = value === undefined ? undefined : JSON.stringify(value);
  // node:http rather than fetch, which refuses TRACE.
  const { status, headers, text } = await new Promise<{ status: number; headers: Headers; text: string }>((resolve, reject) => {
    const outgoing = request(
      `${base}${regression.path}`,
      { method: regression.method, headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...regression.headers?.(fuzz.credentials) } },
      (incoming) => {
        let text = '';
        incoming.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        incoming.once('end', () =>
          resolve({ status: incoming.statusCode!, headers: new Headers(Object.entries(incoming.headers).map(([name, value]) => [name, String(value)])), text }),
        );
        incoming.once('error', reject);
      },
    );
    outgoing.once('error', reject);
    outgoing.end(body);
  });
  assert.ok(status < 500, `${regression.method} ${regression.path} answered ${status}: ${text}`);
  regression.check({ status, headers }, text, document);
}
