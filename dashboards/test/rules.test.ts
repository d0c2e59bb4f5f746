import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { prometheusBinaries } from '../../test/support/prometheus.ts';
import { ALERTS, RECORDING_RULES } from '../src/alerts.ts';
import { PROMETHEUS_DIR } from '../src/build.ts';
import { COMPONENT_LABEL } from '../src/components.ts';
import { inspect } from '../src/lint.ts';
import { alertsByName, RUNBOOK_BASE_URL, ruleGroups, ruleTests, runbookUrl } from '../src/rules.ts';

const promtool = (...args: string[]) => spawnSync(prometheusBinaries().promtool, args, { cwd: PROMETHEUS_DIR, encoding: 'utf8' });

describe('alert rules', () => {
  it('pass `promtool check rules`', () => {
    const run = promtool('check', 'rules', 'tempora.rules.yaml');
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, new RegExp(`${RECORDING_RULES.length + ALERTS.length} rules found`));
  });

  it('pass `promtool test rules`: every alert fires when it should and stays silent when it should', function () {
    // The slow-burn cases, and their twins from another workload, evaluate every recording rule minute by
    // minute over a simulated day (about a minute on an idle machine).
    this.timeout(600_000);
    const run = promtool('test', 'rules', 'tempora.rules.test.yaml');
    assert.equal(run.status, 0, run.stdout + run.stderr);
  });

  it('have a firing and a silent case, a severity, a summary, a description and a runbook each (mixtool lint)', () => {
    const alerts = ruleGroups().groups[1]!.rules as Array<{ alert: string; expr: string; labels: { severity: string }; annotations: Record<string, string> }>;
    for (const rule of ALERTS) {
      assert.ok(rule.tests.some((t) => t.fires.length > 0) && rule.tests.some((t) => t.fires.length === 0), `${rule.alert}: needs a firing and a silent test`);
    }
    for (const alert of alerts) {
      assert.match(alert.alert, /^Tempora[A-Z][A-Za-z]+$/, 'alert names are CamelCase and prefixed');
      assert.ok(['critical', 'warning', 'info'].includes(alert.labels.severity), `${alert.alert}: severity`);
      for (const key of ['summary', 'description', 'runbook_url']) assert.ok(alert.annotations[key]?.trim(), `${alert.alert}: ${key}`);
      assert.equal(alert.annotations.runbook_url, `${RUNBOOK_BASE_URL}${alert.alert}.md`, `${alert.alert}: an absolute runbook_url`);
      assert.ok(existsSync(new URL(`../../docs/runbooks/${alert.alert}.md`, import.meta.url)), `${alert.alert}: its runbook exists`);
      assert.deepEqual(inspect(alert.expr).errors, [], `${alert.alert}: PromQL`);
    }
    // One name at several severities (kube-prometheus's way) is one alert to the on-call: one runbook, each severity once.
    for (const [name, rules] of alertsByName()) {
      assert.ok(
        rules.every((rule) => rule.runbook === rules[0]!.runbook),
        `${name}: one runbook for every severity`,
      );
      assert.equal(new Set(rules.map((rule) => rule.severity)).size, rules.length, `${name}: each severity once`);
    }
  });

  it("select every series by the platform's label, tempora_component", () => {
    const rules = ruleGroups().groups.flatMap((g) => g.rules as Array<{ expr: string; record?: string; alert?: string }>);
    for (const rule of rules) {
      for (const selector of inspect(rule.expr).selectors) {
        // A recording rule's output is Tempora's by construction: it keeps the label its inputs were selected by.
        if (RECORDING_RULES.some((r) => r.record === selector.metric)) continue;
        assert.match(
          selector.labels.get(COMPONENT_LABEL) ?? '',
          /^=~?"[a-z|-]+"$/,
          `${rule.alert ?? rule.record}: ${selector.metric} without ${COMPONENT_LABEL}`,
        );
      }
    }
  });

  it('runbook_url is built from a configurable base', () => {
    assert.equal(runbookUrl('TemporaTargetDown'), 'https://tempora.dev/docs/runbooks/TemporaTargetDown.md');
    for (const base of ['https://git.example.com/ops/tempora/blob/v1.2/docs/runbooks', 'https://git.example.com/ops/tempora/blob/v1.2/docs/runbooks/']) {
      const alerts = ruleGroups({ runbookBaseUrl: base }).groups[1]!.rules as Array<{ alert: string; annotations: { runbook_url: string } }>;
      for (const alert of alerts) assert.equal(alert.annotations.runbook_url, `https://git.example.com/ops/tempora/blob/v1.2/docs/runbooks/${alert.alert}.md`);
    }
  });

  it('rules blind to the label fail the tests with other workloads (those tests are not vacuous)', async function () {
    this.timeout(300_000);
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { stringify } = await import('yaml');
    const dir = mkdtempSync(join(tmpdir(), 'rules-'));
    try {
      // The rules as they were before the label: every tempora_component matcher taken out.
      const groups = ruleGroups();
      for (const group of groups.groups)
        for (const rule of group.rules as Array<{ expr: string }>)
          rule.expr = rule.expr.replaceAll(/\{tempora_component=~?"[^"]*"(, )?/g, '{').replaceAll('{}', '');
      writeFileSync(join(dir, 'tempora.rules.yaml'), stringify(groups));
      const tests = ruleTests('tempora.rules.yaml');
      // The day-long cases aside, for time: the hour-long ones show the same.
      tests.tests = tests.tests.filter((t) => /not Tempora|other workloads/.test(t.name) && t.alert_rule_test.every((a) => a.eval_time !== '1440m'));
      writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
      const run = spawnSync(prometheusBinaries().promtool, ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8' });
      assert.notEqual(run.status, 0);
      for (const alert of [
        'TemporaTargetDown',
        'TemporaOperatorReconcileErrors',
        'TemporaOperatorWorkQueueStuck',
        'TemporaErrorBudgetBurn',
        'TemporaLatencyBudgetBurn',
        'TemporaRateLimiterMemoryFallback',
      ]) {
        assert.match(run.stdout + run.stderr, new RegExp(`alertname: ${alert}\\b`), `${alert} fires on another workload's series`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a broken rule fails the unit tests (the tests are not vacuous)', async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { stringify } = await import('yaml');
    const dir = mkdtempSync(join(tmpdir(), 'rules-'));
    try {
      const groups = ruleGroups();
      const down = (groups.groups[1]!.rules as Array<{ alert: string; expr: string }>).find((r) => r.alert === 'TemporaTargetDown')!;
      down.expr = 'up{tempora_component!=""} == 2';
      writeFileSync(join(dir, 'tempora.rules.yaml'), stringify(groups));
      const tests = ruleTests('tempora.rules.yaml');
      tests.tests = tests.tests.filter((t) => t.name.startsWith('TemporaTargetDown:') && !t.name.includes('not Tempora'));
      writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
      const run = spawnSync(prometheusBinaries().promtool, ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8' });
      assert.notEqual(run.status, 0);
      assert.match(run.stdout + run.stderr, /TemporaTargetDown/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
