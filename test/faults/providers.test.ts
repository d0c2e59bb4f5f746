import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { AGENT_NAMES } from '../../services/generation/src/agents/types.ts';
import { FakeVendors, type Recorded } from '../support/stand-ins/model-vendors.ts';
import { waitFor } from '../support/wait.ts';
import { type Answer, assertLedger, call, type FaultPlatform, json, startFaultPlatform, user } from './support.ts';

// Small provider limits so that every fault meets them within seconds (the defaults are 60 s a call, 3 retries, 300 s a generation).
const PROVIDER_TIMEOUT_MS = 2_000;
const PROVIDER_RETRIES = 2;
const PROVIDER_BACKOFF_MS = 100;
const PROVIDER_MAX_BACKOFF_MS = 1_500;
const GENERATION_TIMEOUT_MS = 20_000;
/** One agent call against a provider that never answers: every attempt cut at the timeout, with the back-offs between. */
const HUNG_AGENT_MS = (PROVIDER_RETRIES + 1) * PROVIDER_TIMEOUT_MS + 1.25 * PROVIDER_BACKOFF_MS * (2 ** PROVIDER_RETRIES - 1);
/** What a loaded 2-core machine may add to a generation (the pool's hops, the gateway, twelve other processes). */
const SLACK_MS = 6_000;
/** No call through the gateway may take longer than the generation's own deadline and the slack. */
const DEADLINE_MS = GENERATION_TIMEOUT_MS + SLACK_MS;

interface Event {
  event: string;
  data: any;
}

/** The events of a Server-Sent Events body. */
function eventsOf(body: unknown): Event[] {
  const events: Event[] = [];
  for (const block of String(body).split(/\n\n/)) {
    const name = /^event: (.+)$/m.exec(block)?.[1];
    const data = [...block.matchAll(/^data: ?(.*)$/gm)].map((match) => match[1]).join('\n');
    if (name) events.push({ event: name, data: data ? JSON.parse(data) : null });
  }
  return events;
}

/**
 * A model provider that errs, resets, hangs, sends garbage or 429s, met by the whole platform as `npm start`
 * runs it (every service and worker its own process, agents on the Redis agent pool) with the model vendors
 * as local servers speaking their real protocols: charged generations through the gateway are retried,
 * fall back along the spec's image chain, or end in a clean problem within their deadline, refunded.
 * Also: Redis killed while a stream's agents are on the pool ends that stream with an `error` event.
 */
describe('faults: model providers that fail, through the gateway', function () {
  this.timeout(120_000);
  let vendors: FakeVendors;
  let faults: FaultPlatform;
  let gateway: string;
  /** Every charged call made: who made it, what it cost, whether the client got what it paid for. */
  const ledgerOfCalls: Array<{ user: string; name: string; cost: number; delivered: boolean; ms: number; status: number; last?: string }> = [];
  const users: Array<{ id: string; auth: Record<string, string> }> = [];
  const figures: string[] = [];

  before(async function () {
    this.timeout(420_000);
    vendors = await new FakeVendors().start();
    faults = await startFaultPlatform({
      GEMINI_API_KEY: 'test-gemini-key',
      GEMINI_BASE_URL: vendors.url,
      OPENROUTER_API_KEY: 'test-openrouter-key',
      OPENROUTER_BASE_URL: `${vendors.url}/api/v1`,
      STABILITY_API_KEY: 'test-stability-key',
      STABILITY_BASE_URL: vendors.url,
      FREE_IMAGE_ENABLED: 'false',
      PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS),
      PROVIDER_RETRIES: String(PROVIDER_RETRIES),
      PROVIDER_BACKOFF_MS: String(PROVIDER_BACKOFF_MS),
      PROVIDER_MAX_BACKOFF_MS: String(PROVIDER_MAX_BACKOFF_MS),
      GENERATION_TIMEOUT_MS: String(GENERATION_TIMEOUT_MS),
      // The graph's daily job would call the same vendors; nothing here needs it.
      GRAPH_WORKERS: 'none',
    });
    gateway = faults.platform.urls.gateway;
  });

  after(async function () {
    this.timeout(60_000);
    if (figures.length) process.stderr.write(`      [faults] providers:\n${figures.map((line) => `        ${line}`).join('\n')}\n`);
    await faults?.stop();
    await vendors?.stop();
  });

  afterEach(() => vendors.reset());

  const costOf = (body: { preset?: string; generate_image?: boolean }) =>
    ({ hyper: 1, balanced: 2, gemini3: 3, hd: 5 })[(body.preset ?? 'balanced') as 'hyper'] + (body.generate_image ? 2 : 0);

  async function newUser() {
    const made = await user(gateway, 'pro', 100);
    users.push(made);
    return made;
  }

  /** A charged generation through the gateway, timed and recorded; a stream's events parsed. */
  async function generate(
    who: { id: string; auth: Record<string, string> },
    mode: 'sync' | 'stream',
    body: Record<string, unknown>,
    label: string,
  ): Promise<Answer & { events: Event[] }> {
    const answer = await call(label, `${gateway}/api/v1/timepoints/generate/${mode}`, json(who.auth, body), DEADLINE_MS + 30_000);
    const events = mode === 'stream' && answer.status === 200 ? eventsOf(answer.body) : [];
    const delivered = mode === 'sync' ? answer.status === 200 : events.at(-1)?.event === 'done';
    ledgerOfCalls.push({ user: who.id, name: label, cost: costOf(body), delivered, ms: answer.ms, status: answer.status, last: events.at(-1)?.event });
    assert.notEqual(answer.status, 0, `${label}: no answer within ${DEADLINE_MS + 30_000} ms (${answer.body})`);
    assert.notEqual(answer.status, 500, `${label}: ${JSON.stringify(answer.body).slice(0, 800)}`);
    assert.ok(answer.ms <= DEADLINE_MS, `${label} took ${answer.ms} ms, past its deadline (${GENERATION_TIMEOUT_MS} ms and ${SLACK_MS} ms of slack)`);
    return { ...answer, events };
  }

  /** The user's ledger after its calls: kept charges, refunds, balance against what it was granted. */
  async function ledgerOf(id: string) {
    const entries = await faults.query<{ id: string; amount: string; kind: string; operation: string | null; refund_of: string | null }>(
      'select id, amount, kind, operation, refund_of from credit_ledger where user_id = $1 order by id',
      [id],
    );
    const [account] = await faults.query<{ balance: string }>('select balance from users where id = $1', [id]);
    const granted = entries.filter((entry) => entry.kind === 'signup_grant' || entry.kind === 'grant').reduce((sum, entry) => sum + Number(entry.amount), 0);
    const charges = entries.filter((entry) => entry.kind === 'charge');
    const refunds = entries.filter((entry) => entry.kind === 'refund');
    const refunded = new Set(refunds.map((refund) => String(refund.refund_of)));
    return {
      balance: Number(account!.balance),
      granted,
      charges: charges.length,
      refunds: refunds.length,
      kept: charges.filter((charge) => !refunded.has(String(charge.id))).map((charge) => -Number(charge.amount)),
    };
  }

  const summary = (answer: Answer & { events: Event[] }) =>
    `${answer.status}${answer.events.length ? ` ${answer.events.at(-1)!.event}` : ''} in ${answer.ms} ms`;
  const problemOf = (answer: Answer & { events: Event[] }) => (answer.events.length ? answer.events.at(-1)!.data : answer.body);
  const gaps = (seen: Recorded[]) => seen.slice(1).map((entry, index) => entry.at - seen[index]!.at);

  it('5xx and 429 with Retry-After for a few calls, then recovery: retried with back-off, the scene delivered and charged once', async () => {
    const who = await newUser();
    const since = Date.now();
    vendors.fail('native', 'Judge', { kind: 'status', status: 503 }, { kind: 'status', status: 429, retryAfter: '1' });
    vendors.fail('native', 'Scene', { kind: 'status', status: 500 });
    vendors.fail('native', 'Dialog', { kind: 'status', status: 429, retryAfter: '1' }, { kind: 'status', status: 502 });
    const sync = await generate(who, 'sync', { query: 'The storming of the Bastille, 1789' }, 'sync: 503, 429 then well');
    assert.equal(sync.status, 200, JSON.stringify(sync.body).slice(0, 800));
    assert.equal(sync.headers.get('x-credits-charged'), '2');
    assert.equal(sync.body.models.text.provider, 'native');
    assert.equal(sync.body.model_provider, 'native');
    const judge = vendors.of('native', 'Judge', since);
    assert.deepEqual(
      judge.map((entry) => entry.what),
      ['status', 'status', 'answered'],
      'the Judge: 503, 429, then answered',
    );
    assert.ok(gaps(judge)[1]! >= 950, `the retry after the 429 waited its Retry-After of 1 s: ${gaps(judge)[1]} ms`);
    assert.deepEqual(
      vendors.of('native', 'Scene', since).map((entry) => entry.what),
      ['status', 'answered'],
    );
    assert.deepEqual(
      vendors.of('native', 'Dialog', since).map((entry) => entry.what),
      ['status', 'status', 'answered'],
    );
    assert.equal(vendors.of('aggregator', undefined, since).length, 0, 'nothing went to the aggregator');

    // The same through a stream: its agents retried, its `done` delivered.
    const streamer = await newUser();
    vendors.fail('native', 'Timeline', { kind: 'status', status: 503 }, { kind: 'status', status: 429, retryAfter: '1' });
    const stream = await generate(streamer, 'stream', { query: 'The coronation of Charlemagne, 800', preset: 'hyper' }, 'stream: 503, 429 then well');
    assert.equal(stream.status, 200);
    assert.equal(stream.events.at(-1)?.event, 'done', stream.events.map((event) => event.event).join(', '));
    assert.equal(stream.events.filter((event) => event.event === 'agent').length, 12);

    for (const [id, cost] of [
      [who.id, 2],
      [streamer.id, 1],
    ] as const) {
      const ledger = await ledgerOf(id);
      assert.deepEqual([ledger.charges, ledger.refunds, ledger.kept], [1, 0, [cost]], 'charged once, not refunded');
      assert.equal(ledger.balance, ledger.granted - cost);
    }
    figures.push(
      `recovering provider: sync ${summary(sync)} (Judge 503, 429 Retry-After 1 s, answered; gap ${gaps(judge)[1]} ms), stream ${summary(stream)}; each charged once`,
    );
  });

  it('the native provider hangs: every attempt cut at the timeout; a text agent has no other provider (504, refunded), an image falls back to the image vendor', async () => {
    // A required text agent: docs/generation.md chooses the text model by configuration (native when it is
    // configured, else its aggregator twin); nothing falls back at run time, so the request fails, refunded.
    const who = await newUser();
    let since = Date.now();
    vendors.always('native', 'Characters', { kind: 'hang' });
    const hung = await generate(who, 'sync', { query: 'The Battle of Hastings, 1066', preset: 'hyper' }, 'sync: Characters hangs');
    assert.ok([502, 504].includes(hung.status), `a clean problem: ${hung.status} ${JSON.stringify(hung.body).slice(0, 500)}`);
    assert.equal(hung.body.agent, 'Characters', JSON.stringify(hung.body));
    assert.equal(hung.headers.get('x-credits-charged'), '0', 'refunded before the answer');
    assert.equal(vendors.of('native', 'Characters', since).length, PROVIDER_RETRIES + 1, 'one call and its retries, each cut at the timeout');
    assert.equal(vendors.of('aggregator', undefined, since).length, 0, 'no text fallback to the aggregator (none is documented)');
    assert.ok(hung.ms >= (PROVIDER_RETRIES + 1) * PROVIDER_TIMEOUT_MS, `${hung.ms} ms: each attempt waited its timeout`);
    assert.ok(hung.ms <= HUNG_AGENT_MS + SLACK_MS, `ended ${hung.ms} ms after it began: the hung agent's budget is ${HUNG_AGENT_MS} ms`);
    const metrics = String((await call('metrics', `${faults.platform.metricsUrls.generation}/metrics`)).body);
    assert.match(metrics, /^generation_agent_errors_total\{[^}]*agent="Characters"[^}]*code="timeout"[^}]*\} [1-9]/m, 'the timeout is counted');

    // ImageGen: native hangs, so the image vendor draws it; Grounding (optional) hangs too and is left out.
    vendors.reset();
    since = Date.now();
    vendors.always('native', 'ImageGen', { kind: 'hang' });
    vendors.always('native', 'Grounding', { kind: 'hang' });
    const imaged = await generate(who, 'sync', { query: 'The Battle of Hastings, 1066', preset: 'balanced', generate_image: true }, 'sync: native image hangs');
    assert.equal(imaged.status, 200, JSON.stringify(imaged.body).slice(0, 800));
    assert.equal(imaged.headers.get('x-credits-charged'), '4');
    assert.deepEqual(imaged.body.models.image, { provider: 'image_vendor', model: 'stability/sd3.5-medium' }, 'the second model of the balanced chain');
    assert.deepEqual(
      imaged.body.models.image_chain.map((link: { provider: string }) => link.provider),
      ['native', 'image_vendor', 'aggregator'],
    );
    assert.ok(imaged.body.image_url, 'the scene has its image');
    assert.equal(vendors.of('native', 'ImageGen', since).length, PROVIDER_RETRIES + 1);
    assert.equal(vendors.of('image_vendor', 'ImageGen', since).length, 1);
    assert.equal(vendors.of('aggregator', undefined, since).length, 0);
    assert.ok(
      imaged.body.warnings.some((warning: string) => /gemini-2\.5-flash-image failed: native did not answer within/.test(warning)),
      imaged.body.warnings.join(' | '),
    );
    assert.ok(
      imaged.body.warnings.some((warning: string) => /^Grounding failed and was skipped/.test(warning)),
      imaged.body.warnings.join(' | '),
    );
    assert.equal(imaged.body.confidence.grounding, null);
    assert.ok(imaged.ms <= HUNG_AGENT_MS + SLACK_MS + 4_000, `${imaged.ms} ms`);
    const image = await call('image', imaged.body.image_url.replace(/^https?:\/\/[^/]+/, gateway), { headers: who.auth });
    assert.equal(image.status, 200, 'the image is served');

    const ledger = await ledgerOf(who.id);
    assert.deepEqual([ledger.charges, ledger.refunds, ledger.kept], [2, 1, [4]], 'the failed call refunded, the image charged once');
    assert.equal(ledger.balance, ledger.granted - 4);
    figures.push(
      `native hangs: text (Characters) ${summary(hung)}, ${PROVIDER_RETRIES + 1} attempts of ${PROVIDER_TIMEOUT_MS} ms, refunded; image ${summary(imaged)} from the image vendor after ${PROVIDER_RETRIES + 1} native attempts, Grounding skipped`,
    );
  });

  it('connection resets and garbage bodies: retried; along the image chain to the aggregator; permissive images only from the image vendor', async () => {
    const who = await newUser();
    let since = Date.now();
    vendors.fail('native', 'Timeline', { kind: 'reset' }, { kind: 'garbage' });
    vendors.fail('native', 'Camera', { kind: 'garbage' });
    // Valid JSON on the wire, an agent reply that is not: the agent's repair call (not a transport retry).
    vendors.fail('native', 'Moment', { kind: 'invalid-output', text: 'Sure! Here is the moment you asked for.' });
    vendors.always('native', 'ImageGen', { kind: 'reset' });
    vendors.always('image_vendor', 'ImageGen', { kind: 'garbage' });
    const stream = await generate(
      who,
      'stream',
      { query: 'The fall of Constantinople, 1453', preset: 'hyper', generate_image: true },
      'stream: resets and garbage',
    );
    assert.equal(stream.status, 200);
    assert.equal(stream.events.at(-1)?.event, 'done', JSON.stringify(stream.events.at(-1)).slice(0, 800));
    const scene = stream.events.at(-1)!.data.scene;
    assert.deepEqual(
      vendors.of('native', 'Timeline', since).map((entry) => entry.what),
      ['reset', 'garbage', 'answered'],
    );
    assert.deepEqual(
      vendors.of('native', 'Camera', since).map((entry) => entry.what),
      ['garbage', 'answered'],
    );
    assert.equal(vendors.of('native', 'Moment', since).length, 2, 'the invalid reply repaired by a second call');
    assert.equal(scene.timings.steps.find((step: { agent: string }) => step.agent === 'Moment').attempts, 2);
    assert.equal(vendors.of('native', 'ImageGen', since).length, PROVIDER_RETRIES + 1);
    assert.equal(vendors.of('image_vendor', 'ImageGen', since).length, PROVIDER_RETRIES + 1);
    assert.equal(vendors.of('aggregator', 'ImageGen', since).length, 1);
    assert.deepEqual(scene.models.image, { provider: 'aggregator', model: 'google/gemini-2.5-flash-image' }, 'the third model of the hyper chain');
    assert.equal(stream.events.find((event) => event.event === 'agent' && event.data.agent === 'ImageGen')?.data.provider, 'aggregator');
    assert.equal(scene.model_provider, 'mixed');
    assert.ok(scene.image_url);

    // Permissive: text through the aggregator, images from the image vendor only; the vendor failing leaves the scene without an image.
    since = Date.now();
    vendors.reset();
    vendors.always('image_vendor', 'ImageGen', { kind: 'status', status: 503 });
    const permissive = await generate(
      who,
      'sync',
      { query: 'The fall of Constantinople, 1453', preset: 'hyper', model_policy: 'permissive', generate_image: true },
      'sync: permissive, image vendor down',
    );
    assert.equal(permissive.status, 200, JSON.stringify(permissive.body).slice(0, 800));
    assert.equal(permissive.body.image_url, null, 'no image: no other provider may draw it');
    assert.deepEqual(
      permissive.body.models.image_chain.map((link: { provider: string; model: string }) => `${link.provider} ${link.model}`),
      ['image_vendor stability/sd3.5-large-turbo'],
    );
    assert.equal(vendors.of('native', undefined, since).length, 0, 'the native provider is never called under permissive');
    assert.equal(vendors.of('aggregator', 'ImageGen', since).length, 0, 'nor the aggregator for the image');
    assert.equal(vendors.of('image_vendor', 'ImageGen', since).length, PROVIDER_RETRIES + 1);
    assert.ok(vendors.of('aggregator', 'Scene', since).length >= 1, 'text through the aggregator');
    assert.ok(
      permissive.body.warnings.some((warning: string) => /ImageGen failed and was skipped/.test(warning)),
      permissive.body.warnings.join(' | '),
    );

    const ledger = await ledgerOf(who.id);
    assert.deepEqual(
      [ledger.charges, ledger.refunds, ledger.kept],
      [2, 0, [3, 3]],
      'both delivered a scene (the permissive one without its image), each charged once',
    );
    figures.push(
      `resets and garbage: stream ${summary(stream)}, Timeline reset+garbage then answered, image native ${PROVIDER_RETRIES + 1}x reset → vendor ${PROVIDER_RETRIES + 1}x garbage → aggregator; permissive with the vendor down ${summary(permissive)}, image_url null, 0 native calls`,
    );
  });

  it('every provider failing: a clean problem or an error event, each refunded, none past its deadline', async () => {
    const who = await newUser();
    const since = Date.now();
    for (const vendor of ['native', 'aggregator', 'image_vendor'] as const) vendors.always(vendor, '*', { kind: 'status', status: 503 });
    const refused = await generate(who, 'sync', { query: 'The signing of Magna Carta, 1215', preset: 'hyper', generate_image: true }, 'sync: every vendor 503');
    assert.equal(refused.status, 502, JSON.stringify(refused.body));
    assert.deepEqual([refused.body.agent, refused.body.code], ['Judge', 'http']);
    assert.match(String(refused.headers.get('content-type')), /problem\+json/);
    assert.equal(refused.headers.get('x-credits-charged'), '0');

    // A Retry-After far beyond the back-off cap does not hold the request past it.
    vendors.reset();
    for (const vendor of ['native', 'aggregator', 'image_vendor'] as const) vendors.always(vendor, '*', { kind: 'status', status: 429, retryAfter: '120' });
    const throttled = await generate(who, 'stream', { query: 'The signing of Magna Carta, 1215', preset: 'hyper' }, 'stream: every vendor 429 Retry-After 120');
    assert.equal(throttled.status, 200);
    assert.equal(throttled.events.at(-1)?.event, 'error', throttled.events.map((event) => event.event).join(', '));
    assert.equal(throttled.events.at(-1)!.data.status, 502, JSON.stringify(throttled.events.at(-1)!.data));
    assert.ok(
      throttled.ms <= PROVIDER_RETRIES * PROVIDER_MAX_BACKOFF_MS + SLACK_MS,
      `the waits were capped at ${PROVIDER_MAX_BACKOFF_MS} ms: ${throttled.ms} ms`,
    );

    // Hanging everywhere: sync and stream at once, each Judge cut after its attempts.
    vendors.reset();
    for (const vendor of ['native', 'aggregator', 'image_vendor'] as const) vendors.always(vendor, '*', { kind: 'hang' });
    const [hungSync, hungStream] = await Promise.all([
      generate(who, 'sync', { query: 'The signing of Magna Carta, 1215', generate_image: true }, 'sync: every vendor hangs'),
      generate(who, 'stream', { query: 'The signing of Magna Carta, 1215', model_policy: 'permissive' }, 'stream: every vendor hangs (permissive)'),
    ]);
    assert.ok([502, 504].includes(hungSync.status), `${hungSync.status} ${JSON.stringify(hungSync.body)}`);
    assert.equal(hungSync.body.agent, 'Judge');
    assert.equal(hungStream.events.at(-1)?.event, 'error', hungStream.events.map((event) => event.event).join(', '));
    assert.ok([502, 504].includes(hungStream.events.at(-1)!.data.status));
    for (const answer of [hungSync, hungStream]) assert.ok(answer.ms <= HUNG_AGENT_MS + SLACK_MS, `${answer.name}: ${answer.ms} ms`);

    // Slow everywhere: each call answers only on its third attempt, so each agent takes twice the timeout
    // and the pipeline meets GENERATION_TIMEOUT_MS: 504 at it, sync (native) and stream (permissive) at once.
    vendors.reset();
    for (const agent of AGENT_NAMES) {
      vendors.fail('native', agent, { kind: 'hang' }, { kind: 'hang' });
      vendors.fail('aggregator', agent, { kind: 'hang' }, { kind: 'hang' });
    }
    const [lateSync, lateStream] = await Promise.all([
      generate(who, 'sync', { query: 'The signing of Magna Carta, 1215', preset: 'hd' }, 'sync: every call twice timed out'),
      generate(
        who,
        'stream',
        { query: 'The signing of Magna Carta, 1215', preset: 'hd', model_policy: 'permissive' },
        'stream: every call twice timed out (permissive)',
      ),
    ]);
    assert.equal(lateSync.status, 504, JSON.stringify(lateSync.body));
    assert.equal(lateSync.body.agent ?? null, null, 'the generation timed out, not an agent');
    assert.equal(lateStream.events.at(-1)?.event, 'error', lateStream.events.map((event) => event.event).join(', '));
    assert.equal(lateStream.events.at(-1)!.data.status, 504);
    for (const answer of [lateSync, lateStream])
      assert.ok(answer.ms >= GENERATION_TIMEOUT_MS - 500, `${answer.name}: ended at the generation's deadline (${answer.ms} ms)`);
    // The agents the deadline cut off are stopped on the pool's worker too: no call reaches a vendor after them.
    const ended = Math.max(lateSync.at + lateSync.ms, lateStream.at + lateStream.ms);
    // Time itself: an orphaned agent would call again within an attempt's timeout; none may.
    await sleep(PROVIDER_TIMEOUT_MS + 1_500);
    const orphans = [...vendors.of('native', undefined, ended + 1_000), ...vendors.of('aggregator', undefined, ended + 1_000)];
    assert.deepEqual(
      orphans.map((entry) => `${entry.vendor} ${entry.agent} +${entry.at - ended} ms`),
      [],
      'vendor calls after the requests ended',
    );

    const failed = [refused, throttled, hungSync, hungStream, lateSync, lateStream];
    const ledger = await ledgerOf(who.id);
    assert.deepEqual([ledger.charges, ledger.refunds, ledger.kept], [failed.length, failed.length, []], 'every charge refunded');
    assert.equal(ledger.balance, ledger.granted, 'the balance is what was granted');
    assert.ok(vendors.of('native', undefined, since).length > 0);
    figures.push(
      `every provider failing: ${failed.map((answer) => `${answer.name} → ${summary(answer)} (${JSON.stringify(problemOf(answer)?.status ?? answer.status)})`).join('; ')}; ${failed.length} charges, ${failed.length} refunds, balance unchanged`,
    );
  });

  it('the client leaves while a pool worker waits on a hung provider: that call is stopped, no retry is sent, refunded', async () => {
    const who = await newUser();
    const since = Date.now();
    vendors.always('native', 'Judge', { kind: 'hang' });
    const leaving = new AbortController();
    const answer = fetch(`${gateway}/api/v1/timepoints/generate/sync`, {
      ...json(who.auth, { query: 'The Battle of Marathon, 490 BCE', preset: 'hyper' }),
      signal: leaving.signal,
    }).then(
      (response) => response.status,
      () => 0,
    );
    await waitFor('the Judge to reach the vendor', () => vendors.of('native', 'Judge', since).length > 0, { timeoutMs: 30_000, intervalMs: 20 });
    // Time itself: the client leaves a while into the hang, not as the call arrives.
    await sleep(300);
    leaving.abort();
    const left = Date.now();
    assert.equal(await answer, 0, 'the client left before any answer');
    ledgerOfCalls.push({ user: who.id, name: 'sync: client leaves', cost: 1, delivered: false, ms: left - since, status: 0 });
    // Time itself: the worker's call would otherwise be retried at the timeout, twice; none may be.
    await sleep(HUNG_AGENT_MS + 1_500);
    const later = vendors.of('native', 'Judge', left + 100);
    const refunded = async () => {
      const ledger = await ledgerOf(who.id);
      return ledger.refunds > 0 && ledger;
    };
    const ledger = await waitFor('the charge refunded', refunded, { timeoutMs: 10_000, intervalMs: 200 });
    assert.deepEqual([ledger.charges, ledger.refunds, ledger.kept], [1, 1, []], 'refunded');
    figures.push(
      `client left ${left - since} ms into a hung Judge: ${later.length} further vendor calls for it in the next ${HUNG_AGENT_MS + 1_500} ms${later.length ? ` (${later.map((entry) => entry.at - left).join(', ')} ms after)` : ''}, refunded`,
    );
    assert.equal(
      later.length,
      0,
      `the pool worker kept calling the hung vendor for a request that was gone: ${later.length} calls, ${later.map((entry) => entry.at - left).join(', ')} ms after the client left`,
    );
  });

  it('Redis killed while a stream runs its agents on the pool: the stream ends with an error event within seconds, refunded', async () => {
    const who = await newUser();
    const since = Date.now();
    // Scene answers late, so the kill meets the pipeline with an agent on the pool.
    vendors.fail('native', 'Scene', { kind: 'slow', ms: 1_500 });
    const streamed = generate(who, 'stream', { query: 'The Congress of Vienna, 1815', preset: 'hyper' }, 'stream: Redis killed mid-pipeline');
    await waitFor('the stream to reach Scene', () => vendors.of('native', 'Scene', since).length > 0, { timeoutMs: 30_000, intervalMs: 20 });
    await faults.redis.kill();
    const killed = Date.now();
    const stream = await streamed;
    const endedAfter = Date.now() - killed;
    await faults.redis.up();
    const names = stream.events.map((event) => `${event.event}${event.data?.agent ? ` ${event.data.agent}` : ''}`);
    assert.equal(stream.status, 200);
    assert.equal(stream.events.at(-1)?.event, 'error', `the stream ends with an error event: ${names.join(', ')}`);
    assert.equal(stream.events.at(-1)!.data.status, 502, JSON.stringify(stream.events.at(-1)!.data));
    assert.ok(names.includes('agent Timeline') && !names.includes('agent Scene'), `mid-pipeline: Timeline reported, Scene not: ${names.join(', ')}`);
    assert.ok(endedAfter < 10_000, `ended ${endedAfter} ms after the kill`);
    const ledger = await ledgerOf(who.id);
    assert.deepEqual([ledger.charges, ledger.refunds, ledger.kept], [1, 1, []], 'refunded');
    assert.equal(ledger.balance, ledger.granted);
    figures.push(
      `Redis killed with Scene on the pool: stream ${summary(stream)} (${JSON.stringify(stream.events.at(-1)!.data.detail).slice(0, 160)}), ended ${endedAfter} ms after the kill, refunded`,
    );
  });

  it('the ledger: balance = sum of entries for every user; every delivered call charged once, every other refunded exactly once', async () => {
    for (const who of users) {
      await assertLedger(faults, who.id);
      const ledger = await ledgerOf(who.id);
      const calls = ledgerOfCalls.filter((entry) => entry.user === who.id);
      const delivered = calls.filter((entry) => entry.delivered);
      assert.equal(ledger.charges, calls.length, 'one charge per call');
      assert.equal(ledger.refunds, calls.length - delivered.length, `one refund per undelivered call: ${JSON.stringify(calls)}`);
      assert.deepEqual([...ledger.kept].sort(), delivered.map((entry) => entry.cost).sort());
      assert.equal(ledger.balance, ledger.granted - delivered.reduce((sum, entry) => sum + entry.cost, 0));
    }
    const slowest = Math.max(...ledgerOfCalls.map((entry) => entry.ms));
    figures.push(
      `ledger: ${ledgerOfCalls.length} charged calls by ${users.length} users, ${ledgerOfCalls.filter((entry) => !entry.delivered).length} refunded once each; slowest call ${slowest} ms (deadline ${GENERATION_TIMEOUT_MS} ms)`,
    );
  });
});
