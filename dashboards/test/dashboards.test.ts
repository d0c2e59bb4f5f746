import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { GRAFANA_DIR, generated, PROMETHEUS_DIR, RUNBOOK_DIR } from '../src/build.ts';
import { DASHBOARDS } from '../src/index.ts';
import { type DashboardJson, inspect, lintDashboard } from '../src/lint.ts';

/** As Grafana loads them: the serialised JSON, not the builders' objects. */
const asJson = (value: unknown): DashboardJson => JSON.parse(JSON.stringify(value)) as DashboardJson;
const clone = asJson;

describe('dashboards', () => {
  it('are committed exactly as the TypeScript generates them, with the rules and runbooks (run `npm run build -w dashboards`)', () => {
    const files = generated();
    for (const dir of [GRAFANA_DIR, PROMETHEUS_DIR, RUNBOOK_DIR]) {
      const present = readdirSync(dir)
        .map((file) => `${dir}${file}`)
        .sort();
      assert.deepEqual(present, [...files.keys()].filter((path) => path.startsWith(dir)).sort(), `${dir}: one file per generated item, none stale`);
    }
    for (const [path, content] of files) assert.equal(readFileSync(path, 'utf8'), content, path);
  });

  it("pass every rule of Grafana's dashboard-linter", () => {
    for (const dashboard of DASHBOARDS) assert.deepEqual(lintDashboard(asJson(dashboard)), [], dashboard.uid!);
  });

  describe('the linter (each rule catches what it should)', () => {
    const base = asJson(DASHBOARDS.find((d) => d.uid === 'tempora-gateway'));
    const rulesOf = (dashboard: DashboardJson) => new Set(lintDashboard(dashboard).map((f) => f.rule));
    const panelWith = (mutate: (panel: NonNullable<DashboardJson['panels']>[number]) => void) => {
      const broken = clone(base);
      const panel = broken.panels!.find((p) => p.type !== 'row')!;
      mutate(panel);
      return rulesOf(broken);
    };
    const withExpr = (expr: string) => panelWith((panel) => (panel.targets![0]!.expr = expr));

    it('template rules', () => {
      const broken = clone(base);
      broken.templating!.list = broken
        .templating!.list!.filter((v) => v.name !== 'instance')
        .map((v) => (v.name === 'job' ? { ...v, multi: false, refresh: 1 } : v));
      broken.editable = true;
      const rules = rulesOf(broken);
      for (const rule of ['template-instance-rule', 'template-job-rule', 'template-on-time-change-reload-rule', 'uneditable-dashboard'])
        assert.ok(rules.has(rule), rule);
      const noSource = clone(base);
      noSource.templating!.list = noSource.templating!.list!.filter((v) => v.name !== 'datasource');
      assert.ok(rulesOf(noSource).has('template-datasource-rule'));
    });

    it("template-component-rule: All means the dashboard's components, and the job and instance variables select by them", () => {
      const withVariables = (mutate: (list: NonNullable<NonNullable<DashboardJson['templating']>['list']>) => void) => {
        const broken = clone(base);
        mutate(broken.templating!.list!);
        return rulesOf(broken);
      };
      assert.ok(
        withVariables((list) =>
          list.splice(
            list.findIndex((v) => v.name === 'component'),
            1,
          ),
        ).has('template-component-rule'),
        'no component variable',
      );
      assert.ok(withVariables((list) => (list.find((v) => v.name === 'component')!.allValue = '.+')).has('template-component-rule'), 'All as every job');
      assert.ok(
        withVariables((list) => (list.find((v) => v.name === 'component')!.query = 'label_values(up, tempora_component)')).has('template-component-rule'),
        'offers what All does not mean',
      );
      assert.ok(
        withVariables((list) => (list.find((v) => v.name === 'job')!.query = 'label_values(gateway_upstream_duration_seconds_count, job)')).has(
          'template-component-rule',
        ),
        'jobs of every workload',
      );
      assert.ok(
        withVariables(
          (list) => (list.find((v) => v.name === 'instance')!.query = 'label_values(gateway_upstream_duration_seconds_count{job=~"$job"}, instance)'),
        ).has('template-component-rule'),
        'instances of every workload',
      );
    });

    it('panel rules', () => {
      assert.ok(panelWith((panel) => (panel.description = '')).has('panel-title-description-rule'));
      assert.ok(panelWith((panel) => (panel.fieldConfig = { defaults: { unit: 'furlongs' } })).has('panel-units-rule'));
      assert.ok(panelWith((panel) => (panel.datasource = { uid: 'prometheus-prod' })).has('panel-datasource-rule'));
      assert.ok(panelWith((panel) => (panel.targets = [])).has('panel-no-targets-rule'));
    });

    it('target rules', () => {
      const C = 'tempora_component=~"$component"';
      assert.ok(withExpr(`sum(rate(x_total{${C}, job=~"$job", instance=~"$instance"}[$__rate_interval])`).has('target-promql-rule'));
      assert.ok(withExpr(`sum(rate(x_total{${C}, job=~"$job", instance=~"$instance"}[5m]))`).has('target-rate-interval-rule'));
      assert.ok(withExpr(`sum(rate(x_total{${C}, instance=~"$instance"}[$__rate_interval]))`).has('target-job-rule'));
      assert.ok(withExpr(`sum(rate(x_total{${C}, job=~"$job"}[$__rate_interval]))`).has('target-instance-rule'));
      assert.ok(withExpr('sum(rate(x_total{job=~"$job", instance=~"$instance"}[$__rate_interval]))').has('target-component-rule'), "every workload's x_total");
      assert.ok(
        withExpr('sum(rate(x_total{tempora_component=~".+", job=~"$job", instance=~"$instance"}[$__rate_interval]))').has('target-component-rule'),
        'not narrowed by the variable',
      );
      assert.ok(withExpr(`sum(x_total{${C}, job=~"$job", instance=~"$instance"})`).has('target-counter-agg-rule'));
      assert.deepEqual(
        withExpr(`sum by (le) (rate(x_bucket{${C}, job=~"$job", instance=~"$instance"}[$__rate_interval]))`),
        new Set(),
        'a correct query passes',
      );
    });

    it('parses the selectors of a query', () => {
      const { errors, selectors } = inspect('histogram_quantile(0.9, sum by (le) (rate(a_bucket{job=~"x"}[5m]))) / b');
      assert.deepEqual(errors, []);
      assert.deepEqual(
        selectors.map((s) => [s.metric, s.inFunction, s.range]),
        [
          ['a_bucket', 'rate', '[5m]'],
          ['b', undefined, undefined],
        ],
      );
    });
  });
});
