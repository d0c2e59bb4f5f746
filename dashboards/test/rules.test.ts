import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { prometheusBinaries } from '../../test/support/prometheus.ts';
import { ALERTS, RECORDING_RULES } from '../src/alerts.ts';
import { PROMETHEUS_DIR } from '../src/build.ts';
import { inspect } from '../src/lint.ts';
import { alertsByName, ruleGroups } from '../src/rules.ts';

const promtool = (...args: string[]) => spawnSync(prometheusBinaries().promtool, args, { cwd: PROMETHEUS_DIR, encoding: 'utf8' });

describe('alert rules', () => {
  it('pass `promtool check rules`', () => {
    const run = promtool('check', 'rules', 'tempora.rules.yaml');
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, new RegExp(`${RECORDING_RULES.length + ALERTS.length} rules found`));
  });

  it('pass `promtool test rules`: every alert fires when it should and stays silent when it should', function () {
    // The slow-burn cases evaluate every recording rule minute by minute over a simulated day (15-20 s).
    this.timeout(120_000);
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
      assert.ok(existsSync(new URL(`../../${alert.annotations.runbook_url}`, import.meta.url)), `${alert.alert}: its runbook exists`);
      assert.deepEqual(inspect(alert.expr).errors, [], `${alert.alert}: PromQL`);
    }
    // One name at several severities (kube-prometheus's way) is one alert to the on-call: one runbook, each severity once.
    for (const [name, rules] of alertsByName()) {
      assert.ok(rules.every((rule) => rule.runbook === rules[0]!.runbook), `${name}: one runbook for every severity`);
      assert.equal(new Set(rules.map((rule) => rule.severity)).size, rules.length, `${name}: each severity once`);
    }
  });

  it('a broken rule fails the unit tests (the tests are not vacuous)', async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { stringify } = await import('yaml');
    const { ruleTests } = await import('../src/rules.ts');
    const dir = mkdtempSync(join(tmpdir(), 'rules-'));
    try {
      const groups = ruleGroups();
      const down = (groups.groups[1]!.rules as Array<{ alert: string; expr: string }>).find((r) => r.alert === 'TemporaTargetDown')!;
      down.expr = 'up == 2';
      writeFileSync(join(dir, 'tempora.rules.yaml'), stringify(groups));
      const tests = ruleTests('tempora.rules.yaml');
      tests.tests = tests.tests.filter((t) => t.name.startsWith('TemporaTargetDown:'));
      writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
      const run = spawnSync(prometheusBinaries().promtool, ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8' });
      assert.notEqual(run.status, 0);
      assert.match(run.stdout + run.stderr, /TemporaTargetDown/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
