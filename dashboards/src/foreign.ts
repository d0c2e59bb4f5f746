import type { SeriesInput } from './alerts.ts';
import { COMPONENT_LABEL, COMPONENTS } from './components.ts';

/**
 * Series of the workloads a Tempora shares its Prometheus with, for the tests that every rule ignores
 * them: other processes use the platform's metric names (`up` for every target, controller-runtime's and
 * client-go's for every Go operator and the control plane, OpenTelemetry's HTTP histogram for any
 * instrumented service), and none of them carries `tempora_component`.
 */

/** The job a firing case's series move to when the test replays them from another workload. */
export const FOREIGN_JOB = 'other-team';

/** A series as another workload would export it: the platform's label gone, its own job. */
export function foreign(input: SeriesInput): SeriesInput {
  const [, metric, matchers = ''] = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?$/s.exec(input.series) ?? [];
  if (!metric) throw new Error(`not a series: ${input.series}`);
  const labels = [...matchers.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)]
    .filter(([, name]) => name !== COMPONENT_LABEL && name !== 'job')
    .map(([, name, value]) => `${name}="${value}"`);
  return { ...input, series: `${metric}{${[`job="${FOREIGN_JOB}"`, ...labels].join(', ')}}` };
}

/** Every component scraped and healthy, over `minutes`: so that only what the other workloads do could fire. */
export const healthyPlatform = (minutes: number): SeriesInput[] =>
  COMPONENTS.map((c) => ({ series: `up{${COMPONENT_LABEL}="${c}", job="${c}", instance="${c}-0"}`, values: `1x${minutes}` }));

/** What the issue saw fire Tempora's alerts in a shared Prometheus, going wrong for over an hour. */
export const OTHER_WORKLOADS: SeriesInput[] = [
  // kube-scheduler and kube-controller-manager are not scraped on many managed control planes: up is 0.
  { series: 'up{job="kube-scheduler", instance="10.0.0.2:10259"}', values: '0x80' },
  { series: 'up{job="kube-controller-manager", instance="10.0.0.2:10257"}', values: '0x80' },
  // Another operator failing its reconciles, and the apiserver's queue with keys and no work done.
  { series: 'controller_runtime_reconcile_errors_total{job="cert-manager", controller="certificates"}', values: '0+5x80' },
  { series: 'workqueue_depth{job="cert-manager", name="certificates"}', values: '12x80' },
  { series: 'workqueue_work_duration_seconds_count{job="cert-manager", name="certificates"}', values: '40x80' },
  { series: 'workqueue_depth{job="apiserver", name="APIServiceRegistrationController"}', values: '3x80' },
  { series: 'workqueue_work_duration_seconds_count{job="apiserver", name="APIServiceRegistrationController"}', values: '9x80' },
  // Another team's service, instrumented with OpenTelemetry's HTTP histogram: half its answers 5xx, all slow.
  { series: 'http_server_request_duration_seconds_count{job="shop", route="/checkout", status="200"}', values: '0+50x80' },
  { series: 'http_server_request_duration_seconds_count{job="shop", route="/checkout", status="500"}', values: '0+50x80' },
  { series: 'http_server_request_duration_seconds_bucket{job="shop", route="/checkout", status="200", le="1"}', values: '0x80' },
  { series: 'http_server_request_duration_seconds_bucket{job="shop", route="/checkout", status="500", le="1"}', values: '0x80' },
  // Another service with the same Redis fallback gauge, counting limits in memory.
  { series: 'rate_limiter_memory_fallback{job="shop", instance="shop-0"}', values: '1x80' },
];
