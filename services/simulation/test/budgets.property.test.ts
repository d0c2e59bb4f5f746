import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type Database, openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import fc from 'fast-check';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { type CallRecord, RunCapReached, RunMeter } from '../src/domain/model.ts';
import { migrations } from '../src/migrations.ts';
import { BudgetRefused, type NewRun, type Reservation, SimulationRepository } from '../src/repository/index.ts';

/**
 * Budgets on the real PostgreSQL: runs reserve their maximum against every budget that covers them
 * (runs.create), spend through metered calls, and settle (finish: the reservation released, the cost spent).
 */

interface RunPlan {
  cap: number;
  /** Which of the budgets cover the run. */
  budgets: boolean[];
  /** Each call's cost, as fractions of the cap: the meter keeps their sum within it. */
  calls: number[];
  status: 'completed' | 'cancelled' | 'failed' | 'stopped';
}

const runPlan = (budgetCount: number): fc.Arbitrary<RunPlan> =>
  fc.record({
    cap: fc.integer({ min: 1, max: 400 }),
    budgets: fc.array(fc.boolean(), { minLength: budgetCount, maxLength: budgetCount }),
    calls: fc.array(fc.double({ min: 0, max: 0.6, noNaN: true }), { maxLength: 4 }),
    status: fc.constantFrom('completed' as const, 'cancelled' as const, 'failed' as const, 'stopped' as const),
  });

const scenario = fc.integer({ min: 1, max: 3 }).chain((budgetCount) =>
  fc.record({
    limits: fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: budgetCount, maxLength: budgetCount }),
    lanes: fc.array(fc.array(runPlan(budgetCount), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 }),
  }),
);

const call = (cost: number): CallRecord => ({
  step: 0,
  action: 'scene',
  provider: 'offline' as CallRecord['provider'],
  model: 'm',
  priced_as: 'm',
  input_tokens: 1,
  output_tokens: 1,
  thinking_tokens: 0,
  cost_micros: cost,
  duration_ms: 1,
});

describe('simulation budgets: properties on PostgreSQL', function () {
  this.timeout(propertyTimeout(60_000));
  let url: string;
  let database: Database;
  let repository: SimulationRepository;

  before(async () => {
    url = await createDatabase('simprop');
    database = await openDatabase({
      service: 'simulation',
      url,
      dataDir: '',
      migrations,
      logger: createLogger('simulation', 'silent'),
      pool: { min: 0, max: 12 },
    });
    repository = new SimulationRepository(database.knex);
  });
  after(async () => {
    await database?.close();
    if (url) await dropDatabase(url);
  });

  it('the run meter never lets calls spend past the cap, and settling releases exactly what was held', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.boolean()), { maxLength: 30 }),
        (cap, asks) => {
          const meter = new RunMeter(cap, 0);
          const held: Array<[number, number]> = [];
          let expectedSpent = 0;
          for (const [ceiling, fraction, settleNow] of asks) {
            const fits = meter.fits(ceiling);
            const inFlight = held.reduce((sum, [c]) => sum + c, 0);
            assert.equal(fits, expectedSpent + inFlight + ceiling <= cap);
            try {
              meter.hold(ceiling);
              assert.ok(fits, 'held only what fits');
              held.push([ceiling, Math.floor(ceiling * fraction)]);
            } catch (error) {
              assert.ok(error instanceof RunCapReached && !fits);
            }
            if (settleNow && held.length > 0) {
              const [c, actual] = held.shift()!;
              meter.settle(c, actual);
              expectedSpent += actual;
            }
            assert.ok(meter.spentMicros + held.reduce((sum, [c]) => sum + c, 0) <= cap, 'spent + held within the cap');
          }
          for (const [c, actual] of held.splice(0)) {
            meter.settle(c, actual);
            expectedSpent += actual;
          }
          assert.equal(meter.spentMicros, expectedSpent);
          assert.ok(meter.fits(cap - expectedSpent), 'once everything settled, all that was not spent is free again');
          assert.ok(!meter.fits(cap - expectedSpent + 1));
        },
      ),
      propertyParameters(1000),
    );
  });

  it('any runs, sequential or concurrent, keep spent + reserved within every limit, and settling restores exactly', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ limits, lanes }) => {
        const tag = randomUUID().slice(0, 8);
        const names = limits.map((_, i) => `b${i}-${tag}`);
        const period = '2026-11-25';
        const started: Array<{ plan: RunPlan; id: string; cost: number }> = [];
        let refused = 0;

        const checkLimits = async () => {
          for (const [i, name] of names.entries()) {
            const ledger = await repository.budgets.ledger(name, period);
            assert.ok(
              ledger.spent_micros + ledger.reserved_micros <= limits[i]!,
              `${name}: spent ${ledger.spent_micros} + reserved ${ledger.reserved_micros} within ${limits[i]}`,
            );
            assert.ok(ledger.reserved_micros >= 0);
          }
        };

        await Promise.all(
          lanes.map(async (lane) => {
            for (const plan of lane) {
              const id = randomUUID();
              const reservations: Reservation[] = names.flatMap((name, i) =>
                plan.budgets[i] ? [{ budget: name, period, limitMicros: limits[i]!, amountMicros: plan.cap }] : [],
              );
              const run: NewRun = {
                id,
                owner: 'acct',
                caller: 'prop',
                mode: 'FORWARD',
                fidelity: 1,
                template: null,
                prompt: null,
                mechanisms: [],
                plan: {},
                state: {},
                steps_total: 1,
                estimate_micros: plan.cap,
                cap_micros: plan.cap,
              };
              try {
                await repository.runs.create(run, reservations);
              } catch (error) {
                if (!(error instanceof BudgetRefused)) throw error;
                const i = names.indexOf(error.budget);
                assert.ok(i >= 0 && plan.budgets[i], 'refused by a budget that covers the run');
                assert.ok(error.remainingMicros < plan.cap, 'refused only when the room left is short');
                refused += 1;
                await checkLimits();
                continue;
              }
              await checkLimits();
              // The meter's guarantee: calls cost at most what is left of the cap.
              let cost = 0;
              for (const fraction of plan.status === 'cancelled' ? [] : plan.calls) {
                const price = Math.min(plan.cap - cost, Math.floor(plan.cap * fraction));
                await repository.execution.recordCall(id, call(price));
                cost += price;
              }
              const ended = await repository.execution.finish(id, null, { status: plan.status });
              assert.equal(ended?.cost_micros, cost, 'the run settles what its calls cost');
              started.push({ plan, id, cost });
              await checkLimits();
              assert.equal(await repository.execution.finish(id, null, { status: 'completed' }), undefined, 'a run settles once');
            }
          }),
        );

        const outstanding = await database.knex('simulation_budget_reservations').whereIn('budget', names).count<{ count: string }[]>('* as count');
        assert.equal(Number(outstanding[0]!.count), 0, 'every reservation released');
        for (const [i, name] of names.entries()) {
          const ledger = await repository.budgets.ledger(name, period);
          const covered = started.filter((run) => run.plan.budgets[i]);
          assert.equal(ledger.reserved_micros, 0, `${name}: releases restore exactly`);
          assert.equal(
            ledger.spent_micros,
            covered.reduce((sum, run) => sum + run.cost, 0),
            `${name}: spent is the sum of its runs' costs`,
          );
          assert.equal(ledger.runs, covered.length);
        }
        if (lanes.length === 1) {
          // One lane is sequential: a run is refused exactly when some covering budget lacks room.
          const spent = limits.map(() => 0);
          let expectedRefusals = 0;
          for (const plan of lanes[0]!) {
            if (plan.budgets.some((covered, i) => covered && limits[i]! - spent[i]! < plan.cap)) {
              expectedRefusals += 1;
              continue;
            }
            const run = started.find((entry) => entry.plan === plan)!;
            plan.budgets.forEach((covered, i) => {
              if (covered) spent[i]! += run.cost;
            });
          }
          assert.equal(refused, expectedRefusals);
        }
      }),
      propertyParameters(20),
    );
  });
});
