import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { vendorEnv } from '../../services/generation/test/harness.ts';
import { OFFLINE_MODEL } from '../../services/kit/src/providers/offline.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { type Platform, startPlatform } from '../support/platform.ts';
import { FakeVendors } from '../support/stand-ins/model-vendors.ts';
import { waitFor } from '../support/wait.ts';

/** A span as OTLP/HTTP JSON carries it, with its process's service.name and its attributes as plain values. */
interface Span {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  status: number;
}

const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
const KIND_NAMES = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
const valueOf = (value: AnyValue): unknown =>
  value.stringValue ??
  (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? value.boolValue ?? value.arrayValue?.values?.map(valueOf)));
const attributesOf = (list: Array<{ key: string; value: AnyValue }> = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

/** An OTLP/HTTP receiver (JSON encoding) as a collector would run it: every exported span, kept. */
async function startReceiver(): Promise<{ url: string; spans: Span[]; server: Server }> {
  const spans: Span[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') {
        const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: AnyValue }> }; scopeSpans: Array<{ spans: Array<Record<string, any>> }> }>;
        };
        for (const resource of payload.resourceSpans) {
          const service = String(attributesOf(resource.resource.attributes)['service.name']);
          for (const scope of resource.scopeSpans) {
            for (const span of scope.spans) {
              spans.push({
                service,
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId ?? '',
                name: span.name,
                kind: Number(span.kind),
                attributes: attributesOf(span.attributes),
                links: (span.links ?? []).map((link: { traceId: string; spanId: string }) => ({ traceId: link.traceId, spanId: link.spanId })),
                status: Number(span.status?.code ?? 0),
              });
            }
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, server };
}

/** One trace's spans, with the tree read from their parent ids. */
class Trace {
  readonly spans: Span[];
  private readonly byId: Map<string, Span>;
  constructor(spans: Span[]) {
    this.spans = spans;
    this.byId = new Map(spans.map((span) => [span.spanId, span]));
  }
  parent(span: Span): Span | undefined {
    return this.byId.get(span.parentSpanId);
  }
  children(span: Span): Span[] {
    return this.spans.filter((child) => child.parentSpanId === span.spanId);
  }
  /** Whether `ancestor` is above `span` in the tree. */
  under(span: Span, ancestor: Span): boolean {
    for (let at = this.parent(span); at; at = this.parent(at)) if (at === ancestor) return true;
    return false;
  }
  /** Spans whose parent is not in the trace. */
  roots(): Span[] {
    return this.spans.filter((span) => !this.byId.has(span.parentSpanId));
  }
  find(predicate: (span: Span) => boolean, what: string): Span {
    const span = this.spans.find(predicate);
    assert.ok(span, `${what} in the trace:\n${this.render()}`);
    return span;
  }
  /** The tree as indented lines (`service kind name`), for failure messages. */
  render(): string {
    const lines: string[] = [];
    const walk = (span: Span, depth: number) => {
      lines.push(`${'  '.repeat(depth)}${span.service} ${KIND_NAMES[span.kind]} ${span.name}`);
      for (const child of this.children(span)) walk(child, depth + 1);
    };
    for (const root of this.roots()) walk(root, 0);
    return lines.join('\n');
  }
}

const isModelCall = (span: Span) => span.kind === KIND.client && typeof span.attributes['gen_ai.operation.name'] === 'string';

/** A traceparent of a caller the test plays: the platform's first span is its child. */
const callerContext = () => {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
};

/**
 * Every process of the platform as `npm start` runs it on PostgreSQL and Redis (the gateway, the services,
 * the graph's workers and the agent-pool worker), exporting over OTLP/HTTP JSON to a receiver in the test,
 * with the model vendor a local server speaking Gemini's protocol. One generation through the gateway and
 * one graph render are followed span by span across the processes.
 */
describe('one trace per request across the platform', function () {
  this.timeout(600_000);
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let vendors: FakeVendors;
  let platform: Platform;
  let databaseUrl: string;
  const prefix = `traces-${randomBytes(4).toString('hex')}`;
  const tasks = `${prefix}:generation:agent-tasks`;

  /** The spans of `traceId` once `ready` holds and no span has come for a moment (the processes export in batches). */
  async function collect(traceId: string, ready: (trace: Trace) => boolean): Promise<Trace> {
    const traced = () => new Trace(receiver.spans.filter((span) => span.traceId === traceId));
    let seen = -1;
    const complete = () => {
      const trace = traced();
      const quiet = trace.spans.length === seen;
      seen = trace.spans.length;
      return ready(trace) && quiet && trace;
    };
    return waitFor('the trace to complete', complete, { timeoutMs: 60_000, intervalMs: 750 }).catch((error: Error) =>
      assert.fail(`${error.message}:\n${traced().render()}`),
    );
  }

  /** Below an agent's span: the producer span, the worker's consumer span, its model call and the vendor call. */
  function assertAgentOnThePool(trace: Trace, agentSpan: Span): void {
    const agent = String(agentSpan.attributes['gen_ai.agent.name']);
    const producer = trace.children(agentSpan).find((span) => span.kind === KIND.producer);
    assert.ok(producer, `${agent}: a producer span under its agent span:\n${trace.render()}`);
    assert.equal(producer.name, `send ${tasks}`);
    assert.equal(producer.service, 'tempora-generation');
    assert.deepEqual(
      [
        producer.attributes['messaging.system'],
        producer.attributes['messaging.destination.name'],
        producer.attributes['messaging.operation.type'],
        producer.attributes['messaging.operation.name'],
      ],
      ['redis', tasks, 'send', 'send'],
    );
    assert.match(String(producer.attributes['messaging.message.id']), /^\d+-\d+$/, `${agent}: the stream entry's id`);

    const consumer = trace.spans.find((span) => span.kind === KIND.consumer && span.parentSpanId === producer.spanId);
    assert.ok(consumer, `${agent}: the pool worker's process span, a child of the producer:\n${trace.render()}`);
    assert.equal(consumer.service, 'tempora-generation-worker');
    assert.equal(consumer.name, `process ${tasks}`);
    assert.deepEqual(consumer.links, [{ traceId: producer.traceId, spanId: producer.spanId }], `${agent}: the process span links the producer`);
    assert.equal(consumer.attributes['messaging.operation.type'], 'process');
    assert.equal(consumer.attributes['messaging.message.id'], producer.attributes['messaging.message.id'], 'the same stream entry');
    assert.equal(consumer.attributes['messaging.consumer.group.name'], 'agent-pool');
    assert.equal(consumer.attributes['gen_ai.agent.name'], agent);

    const calls = trace.children(consumer).filter(isModelCall);
    assert.equal(calls.length, 1, `${agent}: one model call under the process span:\n${trace.render()}`);
    const call = calls[0]!;
    assert.equal(call.service, 'tempora-generation-worker');
    assert.equal(call.attributes['gen_ai.operation.name'], 'generate_content');
    assert.equal(call.attributes['gen_ai.provider.name'], 'gcp.gemini');
    assert.equal(call.attributes['gen_ai.system'], 'gcp.gemini');
    assert.equal(call.name, `generate_content ${call.attributes['gen_ai.request.model']}`);
    assert.equal(call.attributes['gen_ai.request.model'], agentSpan.attributes['gen_ai.request.model'], `${agent}: the model its agent asked for`);
    assert.equal(call.attributes['gen_ai.response.model'], call.attributes['gen_ai.request.model']);
    if (agent === 'ImageGen') {
      assert.equal(call.attributes['gen_ai.output.type'], 'image');
      assert.deepEqual([call.attributes['gen_ai.usage.input_tokens'], call.attributes['gen_ai.usage.output_tokens']], [12, 1290], 'the vendor reply usage');
    } else {
      // The vendor's usageMetadata: 100 prompt tokens, 50 candidates plus 7 of thought.
      assert.deepEqual(
        [call.attributes['gen_ai.usage.input_tokens'], call.attributes['gen_ai.usage.output_tokens']],
        [100, 57],
        `${agent}: the vendor reply usage`,
      );
      const sent = vendors.of('native', agent).map((request) => request.body.generationConfig as { temperature?: number; maxOutputTokens?: number });
      assert.ok(sent.length > 0, `${agent} called the vendor`);
      assert.ok(
        sent.some(
          (config) =>
            config.temperature === call.attributes['gen_ai.request.temperature'] && config.maxOutputTokens === call.attributes['gen_ai.request.max_tokens'],
        ),
        `${agent}: the span's temperature ${call.attributes['gen_ai.request.temperature']} and max_tokens ${call.attributes['gen_ai.request.max_tokens']} are what the vendor was sent`,
      );
    }
    const http = trace.children(call).find((span) => span.kind === KIND.client);
    assert.ok(http, `${agent}: the vendor's HTTP call under the model call:\n${trace.render()}`);
    assert.equal(http.attributes['http.request.method'], 'POST');
    assert.ok(String(http.attributes['url.full']).startsWith(`${vendors.url}/v1beta/models/`), String(http.attributes['url.full']));
    assert.equal(http.attributes['http.response.status_code'], 200);
  }

  /** What holds for any trace of the platform: one entry point, and nothing a user wrote in any attribute. */
  function assertWhole(trace: Trace, caller: { spanId: string }, userText: string[]): void {
    const roots = trace.roots();
    assert.equal(roots.length, 1, `one root span, every other span's parent in the trace:\n${trace.render()}`);
    assert.equal(roots[0]!.parentSpanId, caller.spanId, "the root continues the caller's traceparent");
    // As written, and as a URL carries it (a path segment, a query parameter).
    const forms = userText.flatMap((text) => [text, encodeURIComponent(text), new URLSearchParams({ q: text }).toString().slice(2)]);
    for (const span of trace.spans) {
      for (const [key, value] of Object.entries(span.attributes)) {
        assert.ok(!/^gen_ai\.(prompt|completion|input\.messages|output\.messages|system_instructions)/.test(key), `${span.name} records ${key}`);
        for (const form of forms)
          assert.ok(!JSON.stringify(value).includes(form), `${span.name} records what the user wrote in ${key}: ${JSON.stringify(value)}`);
      }
    }
  }

  /** The generation service's part of a trace under `entry` (the call that reached it): server span, graph lookup, every agent. */
  function assertGeneration(trace: Trace, entry: Span): Span {
    const server = trace.children(entry).find((span) => span.kind === KIND.server);
    assert.ok(server, `the generation service's server span, a child of the call that reached it:\n${trace.render()}`);
    assert.equal(server.service, 'tempora-generation');
    assert.equal(server.name, 'POST /api/v1/timepoints/generate/sync');
    assert.equal(server.attributes['http.route'], '/api/v1/timepoints/generate/sync');
    assert.equal(server.attributes['http.response.status_code'], 200);

    const agents = trace.spans.filter((span) => span.name.startsWith('invoke_agent '));
    const names = agents.map((span) => span.attributes['gen_ai.agent.name']);
    // CharacterBio runs once per character, the others once; Optimizer and ImageGen with generate_image.
    for (const agent of [
      'Judge',
      'Timeline',
      'Grounding',
      'Scene',
      'Characters',
      'CharacterBio',
      'Graph',
      'Moment',
      'Camera',
      'Dialog',
      'Critique',
      'ImagePrompt',
      'Optimizer',
      'ImageGen',
    ]) {
      assert.ok(names.includes(agent), `an invoke_agent ${agent} span in ${names.join(', ')}`);
    }
    for (const agent of agents) {
      assert.equal(agent.service, 'tempora-generation');
      assert.ok(trace.under(agent, server), `${agent.name} under the generation server span`);
      assert.equal(agent.attributes['gen_ai.operation.name'], 'invoke_agent');
      assert.equal(agent.attributes['gen_ai.provider.name'], 'gcp.gemini');
      assertAgentOnThePool(trace, agent);
    }
    // Every model call of the request ran on the pool worker.
    for (const call of trace.spans.filter(isModelCall)) assert.equal(trace.parent(call)?.kind, KIND.consumer, `${call.name} under a process span`);
    return server;
  }

  before(async function () {
    if (!process.env.REDIS_URL || !process.env.DATABASE_URL) this.skip();
    receiver = await startReceiver();
    vendors = await new FakeVendors().start();
    databaseUrl = await createDatabase('traces');
    platform = await startPlatform({
      shared: { databaseUrl, redisUrl: process.env.REDIS_URL },
      env: {
        ...vendorEnv(vendors, ['native']),
        // The conductor plans with its offline planner, which maps a request's words to tools; the vendor stand-in calls none.
        CONDUCTOR_MODEL: OFFLINE_MODEL,
        REDIS_KEY_PREFIX: prefix,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '200',
      },
    });
  });

  after(async () => {
    await platform?.stop();
    await vendors?.stop();
    receiver?.server.close();
    if (databaseUrl) await dropDatabase(databaseUrl).catch(() => undefined);
  });

  it('a generation through the gateway: gateway → proxy call → generation → agents → pool producer → pool worker → model calls, one trace', async () => {
    const gateway = platform.urls.gateway;
    const signIn = await fetch(`${gateway}/api/v1/auth/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.ok(signIn.ok, await signIn.clone().text());
    const { access_token: token } = (await signIn.json()) as { access_token: string };
    const query = `The first ascent of Mont Blanc ${randomBytes(3).toString('hex')}, 1786`;
    const caller = callerContext();
    const reply = await fetch(`${gateway}/api/v1/timepoints/generate/sync`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, traceparent: caller.traceparent },
      body: JSON.stringify({ query, generate_image: true }),
    });
    assert.equal(reply.status, 200, `${await reply.clone().text()}\n${platform.output().slice(-3000)}`);

    const trace = await collect(caller.traceId, (t) => {
      const agents = t.spans.filter((span) => span.name.startsWith('invoke_agent '));
      return (
        t.spans.some((span) => span.service === 'tempora-gateway' && span.kind === KIND.server) &&
        agents.length >= 14 &&
        t.spans.filter(isModelCall).length >= agents.length
      );
    });

    const server = trace.find((span) => span.service === 'tempora-gateway' && span.kind === KIND.server, "the gateway's server span");
    assert.equal(server.parentSpanId, caller.spanId);
    assert.equal(server.attributes['http.request.method'], 'POST');
    assert.equal(server.attributes['url.path'], '/api/v1/timepoints/generate/sync');
    assert.equal(server.attributes['http.response.status_code'], 200);

    const proxy = trace.find(
      (span) =>
        span.service === 'tempora-gateway' &&
        span.kind === KIND.client &&
        String(span.attributes['url.full']).startsWith(`${platform.urls.generation}/api/v1/timepoints/generate/sync`),
      "the gateway's proxy call to generation",
    );
    assert.ok(trace.under(proxy, server), 'the proxy call under the gateway server span');
    assert.equal(proxy.name, 'POST');
    assert.equal(proxy.attributes['http.response.status_code'], 200);

    const generation = assertGeneration(trace, proxy);
    // The generation service's own call to the graph (the moment behind the query) continues the trace too.
    const lookup = trace.spans.find((span) => span.service === 'tempora-graph' && span.kind === KIND.server);
    if (lookup) assert.ok(trace.under(lookup, generation), "the graph's server span under generation's");
    assertWhole(trace, caller, [query]);
  });

  it('a conductor request through the gateway: gateway → conductor → execute_tool per tool call → its call → the service it reaches, one trace', async () => {
    const gateway = platform.urls.gateway;
    const signIn = await fetch(`${gateway}/api/v1/auth/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.ok(signIn.ok, await signIn.clone().text());
    const { access_token: token } = (await signIn.json()) as { access_token: string };
    // The offline planner maps it to start_simulation (paid) and then follow_simulation (free).
    const content = 'Simulate what would have happened had the Continental System failed in 1807';
    const caller = callerContext();
    const reply = await fetch(`${gateway}/api/v1/conductor/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, traceparent: caller.traceparent },
      body: JSON.stringify({ content }),
    });
    assert.equal(reply.status, 200, `${await reply.clone().text()}\n${platform.output().slice(-3000)}`);
    const answer = (await reply.json()) as { tools_called: Array<{ tool: string; status: string; credits: number; note: string }> };
    const called = answer.tools_called;
    assert.equal(called.find((call) => call.tool === 'start_simulation')?.status, 'ok', JSON.stringify(answer));

    const reaches = (t: Trace, tool: string) =>
      t.spans.some((span) => span.name === `execute_tool ${tool}`) &&
      t.spans.some((span) => span.service === 'tempora-simulation' && span.kind === KIND.server);
    const trace = await collect(caller.traceId, (t) => called.every((call) => reaches(t, call.tool)));

    // The gateway serves the conductor's own calls too (prices, charges): its entry is the caller's child.
    const entry = trace.find(
      (span) => span.service === 'tempora-gateway' && span.kind === KIND.server && span.parentSpanId === caller.spanId,
      "the gateway's server span, the caller's child",
    );
    assert.equal(entry.attributes['url.path'], '/api/v1/conductor/messages');
    const server = trace.find(
      (span) => span.service === 'tempora-conductor' && span.kind === KIND.server && span.attributes['http.route'] === '/api/v1/conductor/messages',
      "the conductor's server span",
    );
    assert.ok(trace.under(server, entry), `the conductor under the gateway:\n${trace.render()}`);
    assert.equal(server.attributes['http.response.status_code'], 200);

    const tools = trace.spans.filter((span) => span.attributes['gen_ai.operation.name'] === 'execute_tool');
    assert.deepEqual(
      tools.map((span) => span.attributes['gen_ai.tool.name']).sort(),
      called.map((call) => call.tool).sort(),
      'one execute_tool span per tool call',
    );
    for (const tool of tools) {
      const name = String(tool.attributes['gen_ai.tool.name']);
      const record = called.find((call) => call.tool === name)!;
      assert.deepEqual([tool.service, tool.kind, tool.name], ['tempora-conductor', KIND.internal, `execute_tool ${name}`]);
      assert.ok(trace.under(tool, server), `${tool.name} under the conductor's server span`);
      assert.equal(tool.attributes['tempora.credits.charged'], record.credits, `${name}: the credits it was charged`);
      assert.equal(typeof tool.attributes['gen_ai.tool.call.id'], 'string', `${name}: the model's call id`);
      assert.equal(tool.status, 0, `${name}: no error`);

      // The tool's own call to the simulation service, and the service's server span under it.
      const call = trace
        .children(tool)
        .find((span) => span.kind === KIND.client && String(span.attributes['url.full']).startsWith(`${platform.urls.simulation}/api/v1/simulat`));
      assert.ok(call, `${name}: its HTTP call to the simulation service under its span:\n${trace.render()}`);
      assert.equal(call.service, 'tempora-conductor');
      const target = trace.children(call).find((span) => span.kind === KIND.server);
      assert.ok(target, `${name}: the simulation service's server span under the call:\n${trace.render()}`);
      assert.equal(target.service, 'tempora-simulation');
      assert.equal(target.attributes['http.response.status_code'], call.attributes['http.response.status_code']);
    }
    const start = tools.find((span) => span.attributes['gen_ai.tool.name'] === 'start_simulation')!;
    assert.ok(Number(start.attributes['tempora.credits.charged']) > 0, 'a paid call');
    assert.equal(typeof start.attributes['tempora.credits.operation'], 'string');
    assert.equal(
      trace.children(trace.children(start).find((span) => span.kind === KIND.client)!).find((span) => span.kind === KIND.server)?.attributes['http.route'],
      '/api/v1/simulate',
    );
    assertWhole(trace, caller, [content]);
  });

  it('a simulation through the gateway: its run processed under the request that created it (child and link), a span per step, the model calls beneath the steps', async () => {
    const gateway = platform.urls.gateway;
    const signIn = await fetch(`${gateway}/api/v1/auth/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.ok(signIn.ok, await signIn.clone().text());
    const { access_token: token } = (await signIn.json()) as { access_token: string };
    const prompt = `A council in Ragusa ${randomBytes(3).toString('hex')} weighs neutrality, 1667`;
    const caller = callerContext();
    const reply = await fetch(`${gateway}/api/v1/simulate?wait=30`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, traceparent: caller.traceparent },
      body: JSON.stringify({ prompt, mode: 'FORWARD', fidelity: 1 }),
    });
    assert.ok(reply.status < 300, `${reply.status} ${await reply.clone().text()}\n${platform.output().slice(-3000)}`);
    const run = (await reply.json()) as { id: string; status: string; progress: { steps_total: number } };
    assert.ok(['completed', 'stopped', 'failed'].includes(run.status), `the run ended: ${JSON.stringify(run)}`);

    const steps = (t: Trace) => t.spans.filter((span) => span.name === 'simulation step');
    const trace = await collect(
      caller.traceId,
      (t) =>
        t.spans.some((span) => span.name === 'process simulation_runs' && span.attributes['tempora.simulation.status'] !== undefined) && steps(t).length >= 1,
    );

    const server = trace.find(
      (span) => span.service === 'tempora-simulation' && span.kind === KIND.server && span.attributes['http.route'] === '/api/v1/simulate',
      "the simulation service's POST /api/v1/simulate",
    );
    const proxy = trace.parent(server);
    assert.deepEqual([proxy?.service, proxy?.kind], ['tempora-gateway', KIND.client], `the gateway's proxy call above it:\n${trace.render()}`);

    const processes = trace.spans.filter((span) => span.name === 'process simulation_runs');
    assert.equal(processes.length, 1, `one execution of the run:\n${trace.render()}`);
    const processed = processes[0]!;
    assert.deepEqual([processed.service, processed.kind], ['tempora-simulation', KIND.consumer]);
    assert.ok(trace.under(processed, server), `the run under the request that created it:\n${trace.render()}`);
    assert.deepEqual(processed.links, [{ traceId: caller.traceId, spanId: processed.parentSpanId }], 'and linked to it, as the messaging conventions ask');
    assert.deepEqual(
      [
        processed.attributes['messaging.system'],
        processed.attributes['messaging.destination.name'],
        processed.attributes['messaging.operation.type'],
        processed.attributes['messaging.message.id'],
      ],
      ['postgresql', 'simulation_runs', 'process', run.id],
    );
    assert.deepEqual(
      [processed.attributes['tempora.simulation.mode'], processed.attributes['tempora.simulation.attempt'], processed.attributes['tempora.simulation.status']],
      ['FORWARD', 1, run.status],
    );

    const stepSpans = steps(trace);
    if (run.status === 'completed') assert.equal(stepSpans.length, run.progress.steps_total, `a span per step:\n${trace.render()}`);
    for (const step of stepSpans) {
      assert.equal(trace.parent(step), processed, `a step under the run's process span:\n${trace.render()}`);
      assert.equal(step.attributes['tempora.simulation.mode'], 'FORWARD');
    }
    assert.deepEqual(
      stepSpans.map((step) => step.attributes['tempora.simulation.step']).sort((a, b) => Number(a) - Number(b)),
      stepSpans.map((_, index) => index),
      'the steps in order from 0',
    );
    // A prompt-only run plans its scenario first. The vendor stand-in answers only generation's agents, so the
    // plan may be refused and the run fail in it: the failed step carries the error, no kind.
    const first = stepSpans.find((step) => step.attributes['tempora.simulation.step'] === 0)!;
    if (run.status === 'failed' && stepSpans.length === 1) assert.equal(first.status, 2, 'the failed step is an error');
    else assert.equal(first.attributes['tempora.simulation.step.kind'], 'plan');
    // Every model call of the run is made inside a step.
    const calls = trace.spans.filter((span) => span.service === 'tempora-simulation' && isModelCall(span));
    assert.ok(calls.length > 0, `model calls:\n${trace.render()}`);
    for (const call of calls) {
      assert.ok(stepSpans.includes(trace.parent(call)!), `${call.name} under a step:\n${trace.render()}`);
      assert.equal(call.attributes['gen_ai.provider.name'], 'gcp.gemini');
    }
    assertWhole(trace, caller, [prompt]);
  });

  it('a graph render: POST /generate → its render job → the renderer worker → generation → agents → pool worker, one trace', async () => {
    const graph = platform.urls.graph;
    const writer = { authorization: 'Bearer dev-writer-token' };
    const eventName = `The first crossing of the Channel by balloon ${randomBytes(3).toString('hex')}`;
    const path = `/1785/january/7/1300/england/kent/dover/balloon-crossing-${randomBytes(3).toString('hex')}`;
    const caller = callerContext();
    const queued = await fetch(`${graph}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: caller.traceparent, ...writer },
      body: JSON.stringify({ path, event_name: eventName }),
    });
    assert.equal(queued.status, 202, await queued.clone().text());
    const { job } = (await queued.json()) as { job: { id: string; request: Record<string, unknown> } };
    assert.deepEqual(
      Object.keys(job.request).sort(),
      ['generate_image', 'preset', 'query'],
      'the job shows the request as sent, not the trace context kept with it',
    );

    const ended = async () => {
      const { status } = (await (await fetch(`${graph}/api/v1/graph/jobs/${job.id}`, { headers: writer })).json()) as { status: string };
      return ['succeeded', 'failed'].includes(status) && status;
    };
    const status = await waitFor('the render job to end', ended, { timeoutMs: 120_000, intervalMs: 500 }).catch((error: Error) =>
      assert.fail(`${error.message}:\n${platform.output().slice(-3000)}`),
    );
    assert.equal(status, 'succeeded', platform.output().slice(-3000));

    const trace = await collect(caller.traceId, (t) => {
      const agents = t.spans.filter((span) => span.name.startsWith('invoke_agent '));
      return (
        t.spans.some((span) => span.name === 'process render_jobs' && span.attributes['tempora.render.outcome'] === 'rendered') &&
        agents.length >= 14 &&
        t.spans.filter(isModelCall).length >= agents.length
      );
    });

    const server = trace.find(
      (span) => span.service === 'tempora-graph' && span.kind === KIND.server && span.attributes['url.path'] === '/generate',
      "the graph's POST /generate server span",
    );
    assert.equal(server.parentSpanId, caller.spanId);
    assert.equal(server.attributes['http.response.status_code'], 202);
    // The job and its moment are written under the request: PostgreSQL spans.
    assert.ok(
      trace.spans.some((span) => span.attributes['db.system.name'] === 'postgresql' || span.attributes['db.system'] === 'postgresql'),
      `PostgreSQL spans:\n${trace.render()}`,
    );

    const renders = trace.spans.filter((span) => span.name === 'process render_jobs');
    assert.equal(renders.length, 1, `one attempt:\n${trace.render()}`);
    const render = renders[0]!;
    assert.equal(render.service, 'tempora-graph-worker');
    assert.equal(render.kind, KIND.consumer);
    assert.ok(trace.under(render, server), 'the render is a child of the request that queued it');
    assert.deepEqual(render.links, [{ traceId: caller.traceId, spanId: render.parentSpanId }], 'and links it, as the messaging conventions ask');
    assert.deepEqual(
      [
        render.attributes['messaging.system'],
        render.attributes['messaging.destination.name'],
        render.attributes['messaging.operation.type'],
        render.attributes['messaging.message.id'],
      ],
      ['postgresql', 'render_jobs', 'process', job.id],
    );
    assert.equal(render.attributes['tempora.render.path'], path);
    assert.equal(render.attributes['tempora.render.attempt'], 1);

    const call = trace.find(
      (span) =>
        span.service === 'tempora-graph-worker' &&
        span.kind === KIND.client &&
        String(span.attributes['url.full']).startsWith(`${platform.urls.generation}/api/v1/timepoints/generate/sync`),
      "the renderer's call to generation",
    );
    assert.equal(trace.parent(call), render, 'the call to generation under the render');
    assertGeneration(trace, call);
    assertWhole(trace, caller, [eventName]);
  });
});
