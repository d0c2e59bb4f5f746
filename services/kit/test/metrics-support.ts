import assert from 'node:assert/strict';
import type { Registry } from 'prom-client';

type Grid = Record<string, readonly string[]>;

const key = (labels: Record<string, string | number>) => JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));

function combinations(grid: Grid): Array<Record<string, string>> {
  let sets: Array<Record<string, string>> = [{}];
  for (const [name, values] of Object.entries(grid)) sets = sets.flatMap((set) => values.map((value) => ({ ...set, [name]: value })));
  return sets;
}

/**
 * Asserts that `registry`, fresh (nothing counted yet), exports `name` with exactly the series of `grids`
 * (every combination of each grid's values), each at 0: a counter's value, a histogram's count and every
 * bucket up to +Inf. The registry's default labels (`service`) are left out of the comparison.
 */
export async function assertZeroed(registry: Registry, name: string, ...grids: Grid[]): Promise<void> {
  const metric = (await registry.getMetricsAsJSON()).find((candidate) => candidate.name === name);
  assert.ok(metric, `${name} is not registered`);
  const defaults = new Set(['service', 'le']);
  const own = (labels: Record<string, string | number>) => Object.fromEntries(Object.entries(labels).filter(([label]) => !defaults.has(label)));
  const histogram = String(metric.type) === 'histogram';
  const series = new Map<string, number>();
  for (const value of metric.values as Array<{ labels: Record<string, string | number>; value: number; metricName?: string }>) {
    assert.equal(value.value, 0, `${value.metricName ?? name} ${JSON.stringify(value.labels)} is not 0`);
    if (!histogram || value.metricName === `${name}_count`) series.set(key(own(value.labels)), value.value);
  }
  const expected = grids.flatMap(combinations).map(key);
  assert.deepEqual([...series.keys()].sort(), [...new Set(expected)].sort(), `${name}: the series exported at 0`);
  if (histogram) {
    const infinite = (metric.values as Array<{ labels: Record<string, string | number>; metricName?: string }>)
      .filter((value) => value.labels.le === '+Inf')
      .map((value) => key(own(value.labels)));
    assert.deepEqual(infinite.sort(), [...new Set(expected)].sort(), `${name}: a +Inf bucket for every series`);
  }
}

/** The Prometheus text a served process exposes on its metrics port (`serve`'s `metrics`, METRICS_PORT). */
export async function scrape(server: { metricsUrl?: string }): Promise<string> {
  assert.ok(server.metricsUrl, 'the server was started without a metrics port');
  const response = await fetch(`${server.metricsUrl}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}
