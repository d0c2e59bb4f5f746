import assert from 'node:assert/strict';
import { Counter, Histogram } from 'prom-client';
import { Metrics, SeriesHistogram, zeroed } from '../src/observability/index.ts';
import { assertZeroed } from './metrics-support.ts';

const fresh = () => {
  const metrics = new Metrics('kit-test');
  const registers = [metrics.registry];
  return {
    registry: metrics.registry,
    counter: new Counter({ name: 'things_total', help: 'Things by kind and outcome', labelNames: ['kind', 'outcome'], registers }),
    histogram: new Histogram({ name: 'thing_duration_seconds', help: 'Durations by kind', labelNames: ['kind'], buckets: [0.1, 1], registers }),
    series: new SeriesHistogram({
      name: 'thing_wait_seconds',
      help: 'Waits by kind and outcome',
      labelNames: ['kind', 'outcome'],
      buckets: [0.1, 1],
      registers,
    }),
  };
};

describe('kit zeroed metrics', () => {
  it('exports every combination of a grid at 0 before anything is counted', async () => {
    const { registry, counter, histogram, series } = fresh();
    zeroed(counter, { kind: ['a', 'b'], outcome: ['ok', 'failed', 'refused'] });
    zeroed(histogram, { kind: ['a', 'b'] });
    zeroed(series, { kind: ['a'], outcome: ['ok', 'failed'] });
    await assertZeroed(registry, 'things_total', { kind: ['a', 'b'], outcome: ['ok', 'failed', 'refused'] });
    await assertZeroed(registry, 'thing_duration_seconds', { kind: ['a', 'b'] });
    await assertZeroed(registry, 'thing_wait_seconds', { kind: ['a'], outcome: ['ok', 'failed'] });
    const text = await registry.metrics();
    assert.match(text, /^thing_duration_seconds_bucket\{le="0\.1",service="kit-test",kind="b"\} 0$/m);
    assert.match(text, /^thing_wait_seconds_bucket\{le="\+Inf",service="kit-test",kind="a",outcome="failed"\} 0$/m);
  });

  it('takes several grids for combinations that are not a full product', async () => {
    const { registry, counter } = fresh();
    zeroed(counter, { kind: ['a', 'b'], outcome: ['ok', 'failed'] }, { kind: ['c'], outcome: ['ok'] });
    await assertZeroed(registry, 'things_total', { kind: ['a', 'b'], outcome: ['ok', 'failed'] }, { kind: ['c'], outcome: ['ok'] });
    assert.doesNotMatch(await registry.metrics(), /kind="c",outcome="failed"/);
  });

  it('leaves the series counting as usual', async () => {
    const { registry, counter, histogram, series } = fresh();
    zeroed(counter, { kind: ['a'], outcome: ['ok'] });
    zeroed(histogram, { kind: ['a'] });
    zeroed(series, { kind: ['a'], outcome: ['ok'] });
    counter.inc({ kind: 'a', outcome: 'ok' }, 2);
    histogram.observe({ kind: 'a' }, 0.5);
    series.series('a', 'ok').observe(0.05);
    const text = await registry.metrics();
    assert.match(text, /^things_total\{kind="a",outcome="ok",service="kit-test"\} 2$/m);
    assert.match(text, /^thing_duration_seconds_bucket\{le="0\.1",service="kit-test",kind="a"\} 0$/m);
    assert.match(text, /^thing_duration_seconds_bucket\{le="1",service="kit-test",kind="a"\} 1$/m);
    assert.match(text, /^thing_wait_seconds_count\{service="kit-test",kind="a",outcome="ok"\} 1$/m);
  });

  it('refuses a series histogram grid given out of the order of its label names', () => {
    const { series } = fresh();
    assert.throws(
      () => zeroed(series, { outcome: ['ok'], kind: ['a'] }),
      /thing_wait_seconds: list the labels to zero in the order of its label names \(kind, outcome\)/,
    );
  });

  it('refuses a label the metric does not have', () => {
    const { counter } = fresh();
    // @ts-expect-error -- a grid names exactly the metric's labels (the type check's refusal; prom-client's is at run time)
    assert.throws(() => zeroed(counter, { kind: ['a'], outcome: ['ok'], region: ['eu'] }), /region/);
  });
});
