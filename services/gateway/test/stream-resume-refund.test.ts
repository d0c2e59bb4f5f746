import assert from 'node:assert/strict';
import { SERVICE_KEY as GENERATION_KEY, type GenerationHarness, startGeneration } from '../../generation/test/harness.ts';
import { type GatewayHarness, startGateway } from './harness.ts';

/**
 * A generation stream is charged before it is forwarded (docs/gateway.md, "Charging proxied calls"); the
 * generation service refuses a Last-Event-ID other than 0 (a stream cannot be resumed) with a 422. Walked
 * through the gateway to the real generation route: the refusal is refunded before its head reaches the
 * client, so the ledger holds the charge and its refund and the balance is where it was.
 */
describe('gateway: a generation stream refused for its Last-Event-ID is refunded', function () {
  this.timeout(60_000);
  let generation: GenerationHarness;
  let gw: GatewayHarness;

  before(async () => {
    generation = await startGeneration();
    gw = await startGateway({ GENERATION_URL: generation.url, GENERATION_SERVICE_KEY: GENERATION_KEY });
  });
  after(async () => {
    await gw?.stop();
    await generation?.stop();
  });

  it('answers the 422 with the balance unchanged: one charge, refunded once', async () => {
    const user = await gw.user();
    const before = await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers });
    const reply = await gw.call('POST', '/api/v1/timepoints/generate/stream', {
      headers: { ...user.headers, 'Last-Event-ID': '3' },
      body: { query: 'The fall of Constantinople, 1453' },
    });
    assert.equal(reply.status, 422);
    assert.match(reply.body.detail, /cannot be resumed/, "the generation service's own refusal");
    const after = await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers });
    assert.equal(after.body.balance, before.body.balance);
    const history = await gw.call('GET', '/api/v1/credits/history', { headers: user.headers });
    const [refund, charge, ...rest] = history.body.items as { id: string; kind: string; amount: number; operation: string | null; refund_of: string | null }[];
    assert.deepEqual([refund?.kind, charge?.kind, ...rest.map((entry) => entry.kind)], ['refund', 'charge', 'signup_grant']);
    assert.equal(charge!.operation, 'generation.balanced');
    assert.equal(refund!.amount, -charge!.amount);
    assert.equal(refund!.refund_of, charge!.id, 'the refund compensates that charge');
    assert.equal(await gw.instance.repository.ledger.ledgerSum(user.userId), after.body.balance, 'the ledger sums to the balance');
  });
});
