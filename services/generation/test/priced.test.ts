import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { signPricedCall } from '@tempora/kit/http';
import { type GenerationHarness, QUERY, SERVICE_KEY, startGeneration, user } from './harness.ts';

const digest = (text: string) => createHash('sha256').update(text).digest('hex');

/** The gateway's priced operation, checked against what the generation service is asked to run (docs/gateway.md). */
describe('generation: runs only what the gateway priced', function () {
  this.timeout(30_000);
  let gen: GenerationHarness;
  before(async () => {
    gen = await startGeneration();
  });
  after(() => gen.stop());

  const path = '/api/v1/timepoints/generate';
  const body = JSON.stringify({ query: QUERY, preset: 'hd', generate_image: true });
  const priced = (operation: string, overrides: { key?: string; method?: string; path?: string; body?: string } = {}) =>
    signPricedCall(overrides.key ?? SERVICE_KEY, {
      operation,
      method: overrides.method ?? 'POST',
      path: overrides.path ?? path,
      bodyDigest: digest(overrides.body ?? body),
    });
  const send = (header: string | undefined, target = path) =>
    fetch(`${gen.url}${target}`, {
      method: 'POST',
      headers: { ...user('priced'), 'content-type': 'application/json', ...(header ? { 'X-Priced-Operation': header } : {}) },
      body,
    });

  it('refuses a call priced as another operation, for another body, path or method, or signed with another key (409), running nothing', async () => {
    const mismatched = [
      priced('generation.hyper'),
      priced('generation.hd'),
      priced('generation.hd+image', { body: JSON.stringify({ query: QUERY, preset: 'hyper' }) }),
      priced('generation.hd+image', { path: '/api/v1/timepoints/generate/sync' }),
      priced('generation.hd+image', { method: 'PUT' }),
      priced('generation.hd+image', { key: 'another-key-0123456789' }),
      'generation.hd+image; sig=nonsense',
    ];
    const before = await gen.instance.knex('generation_jobs').count<Array<{ count: string }>>('* as count');
    for (const header of mismatched) {
      const reply = await send(header);
      assert.equal(reply.status, 409, header);
      assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
    }
    const after = await gen.instance.knex('generation_jobs').count<Array<{ count: string }>>('* as count');
    assert.deepEqual(after, before, 'no job was created');
  });

  it('runs the call priced as exactly what it asks for', async () => {
    const reply = await send(priced('generation.hd+image'));
    assert.equal(reply.status, 202, await reply.text());
  });
});
