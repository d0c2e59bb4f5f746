import assert from 'node:assert/strict';
import { Histogram, Registry } from 'prom-client';
import { SeriesHistogram } from '../src/observability/series-histogram.ts';

const options = {
  name: 'request_duration_seconds',
  help: 'Duration of requests, by "route" and status\\code',
  labelNames: ['route', 'status'] as const,
  buckets: [0.001, 0.01, 0.1, 1],
};
const registries = () => {
  const ours = new Registry();
  const theirs = new Registry();
  for (const registry of [ours, theirs]) registry.setDefaultLabels({ service: 'gateway' });
  return {
    ours,
    theirs,
    series: new SeriesHistogram({ ...options, registers: [ours] }),
    histogram: new Histogram({ ...options, labelNames: [...options.labelNames], registers: [theirs] }),
  };
};

describe('kit series histogram', () => {
  it('is exposed exactly as prom-client exposes its Histogram given the same observations', async () => {
    const { ours, theirs, series, histogram } = registries();
    const observations: Array<[string, string, number]> = [
      ['proxy:graph', '200', 0.0004],
      ['proxy:graph', '200', 0.001],
      ['proxy:graph', '200', 0.0100001],
      ['proxy:graph', '502', 2.5],
      ['/api/v1/auth/me', '200', 0],
      ['a "quoted" \\ route\nwith a newline', '404', 0.05],
    ];
    for (const [route, status, seconds] of observations) {
      series.series(route, status).observe(seconds);
      histogram.observe({ route, status }, seconds);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    // prom-client's lines also carry an exemplar field (empty here: none was given).
    const withoutExemplars = (json: unknown) => JSON.parse(JSON.stringify(json, (key, value) => (key === 'exemplar' ? undefined : value)));
    assert.deepEqual(await ours.getMetricsAsJSON(), withoutExemplars(await theirs.getMetricsAsJSON()));
    assert.match(await ours.metrics(), /request_duration_seconds_bucket\{le="0.01",service="gateway",route="proxy:graph",status="200"\} 2/);
  });
  it('keeps one series per label values, in the order of the label names', () => {
    const { series } = registries();
    const first = series.series('proxy:graph', '200');
    assert.equal(series.series('proxy:graph', '200'), first);
    assert.notEqual(series.series('proxy:graph', '201'), first);
    assert.notEqual(series.series('200', 'proxy:graph'), first);
    assert.deepEqual(first.labels, { route: 'proxy:graph', status: '200' });
  });
  it('refuses the wrong number of label values and a value that is not a finite number', () => {
    const { series } = registries();
    assert.throws(() => series.series('proxy:graph'), /expected values for route, status/);
    assert.throws(() => series.series('a', 'b', 'c'), /expected values/);
    assert.throws(() => series.series('a', 'b').observe(Number.NaN), TypeError);
    assert.throws(() => series.series('a', 'b').observe(Number.POSITIVE_INFINITY), TypeError);
    assert.throws(() => new SeriesHistogram({ ...options, labelNames: [], registers: [] }), /at least one label/);
  });
  it('zeroes its series in place on reset, so series callers hold go on counting', async () => {
    const { ours, series } = registries();
    const held = series.series('proxy:graph', '200');
    held.observe(0.5);
    ours.resetMetrics();
    held.observe(0.05);
    const text = await ours.metrics();
    assert.match(text, /request_duration_seconds_count\{service="gateway",route="proxy:graph",status="200"\} 1\n/);
    assert.match(text, /request_duration_seconds_sum\{service="gateway",route="proxy:graph",status="200"\} 0.05\n/);
  });
});
