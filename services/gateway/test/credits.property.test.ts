import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type Database, openDatabase } from '@tempora/kit/data';
import { createLogger, Metrics } from '@tempora/kit/observability';
import fc from 'fast-check';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { Credits } from '../src/domain/credits.ts';
import { GatewayMetrics } from '../src/metrics.ts';
import { migrations } from '../src/migrations.ts';
import { GatewayRepository, IdempotencyConflict, InsufficientCredits, type LedgerRow } from '../src/repository/index.ts';

/**
 * The credits ledger on the real PostgreSQL: any mix of grants, charges and refunds, sequential or
 * concurrent, with idempotency keys reused on purpose, leaves a ledger that explains the balance.
 */

type Op =
  | { kind: 'grant'; amount: number; key: number }
  | { kind: 'charge'; amount: number; key: number }
  | { kind: 'refund'; key: number }
  | { kind: 'refund-twice'; key: number };

// Few keys, so that retries (same key, same amount) and conflicts (same key, another amount) happen.
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('grant' as const), amount: fc.integer({ min: 1, max: 40 }), key: fc.integer({ min: 0, max: 5 }) }),
  fc.record({ kind: fc.constant('charge' as const), amount: fc.integer({ min: 1, max: 30 }), key: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('charge' as const), amount: fc.constantFrom(1, 5, 10), key: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('refund' as const), key: fc.integer({ min: 0, max: 9 }) }),
  fc.record({ kind: fc.constant('refund-twice' as const), key: fc.integer({ min: 0, max: 9 }) }),
);

interface Outcome {
  op: Op;
  /** Credits the caller was told moved (0 when refused, replayed or not found). */
  moved: number;
  result: 'written' | 'replayed' | 'insufficient' | 'conflict' | 'no-charge';
  balance?: number;
}

describe('gateway credits ledger: properties on PostgreSQL', function () {
  this.timeout(propertyTimeout(60_000));
  let url: string;
  let database: Database;
  let repository: GatewayRepository;
  let credits: Credits;

  before(async () => {
    url = await createDatabase('gwprop');
    const logger = createLogger('gateway', 'silent');
    database = await openDatabase({ service: 'gateway', url, dataDir: '', migrations, logger, pool: { min: 0, max: 12 } });
    repository = new GatewayRepository(database.knex);
    credits = new Credits(repository, new GatewayMetrics(new Metrics('gateway')), logger, { callMaxMs: 900_000, settleGraceMs: 300_000 });
  });
  after(async () => {
    await database?.close();
    if (url) await dropDatabase(url);
  });

  const newUser = async (signupCredits: number) =>
    (await repository.users.findOrCreateByIdentity({ provider: 'property', subject: randomUUID(), signupCredits })).user.id;

  async function apply(userId: string, step: Op): Promise<Outcome[]> {
    try {
      if (step.kind === 'grant') {
        const outcome = await repository.ledger.grant(userId, step.amount, `grant:k${step.key}`, 'admin.grant');
        return [{ op: step, moved: outcome.replayed ? 0 : step.amount, result: outcome.replayed ? 'replayed' : 'written', balance: outcome.balance }];
      }
      if (step.kind === 'charge') {
        const outcome = await credits.charge(userId, step.amount, `service:k${step.key}`, 'property.op');
        return [{ op: step, moved: outcome.replayed ? 0 : -step.amount, result: outcome.replayed ? 'replayed' : 'written', balance: outcome.balance }];
      }
      const times = step.kind === 'refund-twice' ? 2 : 1;
      const outcomes = await Promise.all(Array.from({ length: times }, () => credits.refund(userId, `service:k${step.key}`, 'property')));
      return outcomes.map((outcome) =>
        outcome
          ? {
              op: step,
              moved: outcome.replayed ? 0 : Number(outcome.entry.amount),
              result: outcome.replayed ? 'replayed' : 'written',
              balance: outcome.balance,
            }
          : { op: step, moved: 0, result: 'no-charge' },
      );
    } catch (error) {
      if (error instanceof InsufficientCredits) return [{ op: step, moved: 0, result: 'insufficient' }];
      if (error instanceof IdempotencyConflict) return [{ op: step, moved: 0, result: 'conflict' }];
      throw error;
    }
  }

  /** What must hold of any user's ledger, whatever happened to it. */
  async function checkLedger(userId: string, signup: number, outcomes: Outcome[]): Promise<LedgerRow[]> {
    const rows = (await database.knex<LedgerRow>('credit_ledger').where({ user_id: userId }).orderBy('id')) as LedgerRow[];
    const balance = (await repository.ledger.balance(userId))!;
    let running = 0;
    for (const row of rows) {
      running += Number(row.amount);
      assert.equal(Number(row.balance_after), running, `entry ${row.id} (${row.kind}) records the balance after it: the ledger is one chain`);
      assert.ok(Number(row.balance_after) >= 0, 'never below the floor of 0');
    }
    assert.equal(balance, running, 'balance = sum of the ledger');
    assert.equal(await repository.ledger.ledgerSum(userId), balance);
    assert.equal(signup + outcomes.reduce((sum, outcome) => sum + outcome.moved, 0), balance, 'what callers were told moved is what the ledger holds');

    const byId = new Map(rows.map((row) => [String(row.id), row]));
    const refunded = new Set<string>();
    for (const refund of rows.filter((row) => row.kind === 'refund')) {
      const charge = byId.get(String(refund.refund_of));
      assert.ok(charge && charge.kind === 'charge', 'no refund without its charge');
      assert.ok(Number(charge.id) < Number(refund.id), 'a refund follows its charge');
      assert.equal(Number(refund.amount), -Number(charge.amount), 'a refund gives back exactly the charge');
      assert.ok(!refunded.has(String(charge.id)), 'no charge refunded twice');
      refunded.add(String(charge.id));
    }
    const keys = rows.map((row) => row.idempotency_key);
    assert.equal(new Set(keys).size, keys.length, 'an idempotency key is used once');
    for (const outcome of outcomes) if (outcome.balance !== undefined) assert.ok(outcome.balance >= 0);
    return rows;
  }

  it('sequentially, the ledger behaves as a model of it says', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 50 }), fc.array(op, { minLength: 1, maxLength: 14 }), async (signup, steps) => {
        const userId = await newUser(signup);
        let model = signup;
        const charges = new Map<number, { amount: number; refunded: boolean }>();
        const grants = new Map<number, number>();
        const outcomes: Outcome[] = [];
        for (const step of steps) {
          const results = await apply(userId, step);
          outcomes.push(...results);
          const [first, second] = results as [Outcome, Outcome | undefined];
          if (step.kind === 'grant') {
            const earlier = grants.get(step.key);
            const expected = earlier === undefined ? 'written' : earlier === step.amount ? 'replayed' : 'conflict';
            assert.equal(first.result, expected, `grant k${step.key} of ${step.amount}`);
            if (expected === 'written') {
              grants.set(step.key, step.amount);
              model += step.amount;
            }
          } else if (step.kind === 'charge') {
            const earlier = charges.get(step.key);
            const expected = earlier ? (earlier.amount === step.amount ? 'replayed' : 'conflict') : model < step.amount ? 'insufficient' : 'written';
            assert.equal(first.result, expected, `charge k${step.key} of ${step.amount} on a balance of ${model}`);
            if (expected === 'written') {
              charges.set(step.key, { amount: step.amount, refunded: false });
              model -= step.amount;
            }
          } else {
            const charge = charges.get(step.key);
            const expected = !charge ? 'no-charge' : charge.refunded ? 'replayed' : 'written';
            // Asked twice at once, one of the two refunds and the other is told it was refunded.
            const again = charge ? 'replayed' : 'no-charge';
            assert.deepEqual(results.map((result) => result.result).sort(), (second ? [expected, again] : [expected]).sort(), `refund of k${step.key}`);
            if (charge && !charge.refunded) {
              charge.refunded = true;
              model += charge.amount;
            }
          }
          if (step.kind !== 'refund-twice' && first.result === 'written') assert.equal(first.balance, model, "the balance reported is the model's");
        }
        assert.equal(await repository.ledger.balance(userId), model);
        await checkLedger(userId, signup, outcomes);
      }),
      propertyParameters(40),
    );
  });

  it('concurrently, any interleaving keeps the ledger a chain that sums to the balance, above the floor', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 50 }),
        fc.array(fc.array(op, { minLength: 1, maxLength: 8 }), { minLength: 2, maxLength: 5 }),
        async (signup, lanes) => {
          const userId = await newUser(signup);
          // Each lane is one client doing its steps in order; the lanes run at once.
          const outcomes = (
            await Promise.all(
              lanes.map(async (lane) => {
                const done: Outcome[] = [];
                for (const step of lane) done.push(...(await apply(userId, step)));
                return done;
              }),
            )
          ).flat();
          const rows = await checkLedger(userId, signup, outcomes);
          const written = (kind: string) => outcomes.filter((outcome) => outcome.op.kind.startsWith(kind) && outcome.result === 'written').length;
          assert.equal(rows.filter((row) => row.kind === 'charge').length, written('charge'), 'one entry per charge reported written');
          assert.equal(rows.filter((row) => row.kind === 'refund').length, written('refund'), 'one entry per refund reported written');
          assert.equal(rows.filter((row) => row.kind === 'grant').length, written('grant'), 'one entry per grant reported written');
        },
      ),
      propertyParameters(30),
    );
  });
});
