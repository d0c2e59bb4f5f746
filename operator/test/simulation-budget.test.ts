import assert from 'node:assert/strict';
import { nextPeriodStart, untilNextPoll } from '../src/reconcilers/simulation-budget.ts';

describe('SimulationBudget polling', function () {
  it('polls every BUDGET_POLL_SECONDS, and just past a period boundary when that comes first', function () {
    const poll = 30_000;
    assert.equal(untilNextPoll('daily', poll, new Date('2025-03-10T12:00:00Z')), poll);
    assert.equal(untilNextPoll('daily', poll, new Date('2025-03-10T23:59:50Z')), 11_000, 'a second past midnight UTC');
    assert.equal(untilNextPoll('monthly', poll, new Date('2025-03-31T23:59:55Z')), 6_000, 'a second past the 1st');
    assert.equal(untilNextPoll('monthly', poll, new Date('2025-03-10T23:59:55Z')), poll, 'a day ends, a monthly period does not');
  });

  it('knows where periods end, across months and years, in UTC', function () {
    assert.equal(nextPeriodStart('daily', new Date('2024-02-28T10:00:00Z')).toISOString(), '2024-02-29T00:00:00.000Z');
    assert.equal(nextPeriodStart('daily', new Date('2024-12-31T23:00:00Z')).toISOString(), '2025-01-01T00:00:00.000Z');
    assert.equal(nextPeriodStart('monthly', new Date('2024-12-15T00:00:00Z')).toISOString(), '2025-01-01T00:00:00.000Z');
  });
});
