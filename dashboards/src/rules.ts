import { ALERTS, type AlertRule, RECORDING_RULES } from './alerts.ts';
import { FOREIGN_JOB, foreign, healthyPlatform, OTHER_WORKLOADS } from './foreign.ts';

/**
 * Where docs/runbooks/ is published: the project's documentation at its home (the charts' `home`). The
 * platform chart's `monitoring.prometheusRules.runbookBaseUrl` defaults to the same and replaces it in the
 * PrometheusRule when set, for a fork or a pinned release.
 */
export const RUNBOOK_BASE_URL = 'https://tempora.dev/docs/runbooks/';

export interface RuleOptions {
  /** Base of every runbook_url: `<base>/<alert>.md`, a slash added when it has none. */
  runbookBaseUrl?: string;
}

/** An alert's runbook as an absolute URL, which Alertmanager's receivers can open from a notification. */
export const runbookUrl = (alert: string, base = RUNBOOK_BASE_URL) => new URL(`${alert}.md`, base.endsWith('/') ? base : `${base}/`).href;

/** The rule groups, as a Prometheus rule file and a PrometheusRule's `spec` both hold them. */
export function ruleGroups(options: RuleOptions = {}) {
  return {
    groups: [
      { name: 'tempora-slo', rules: RECORDING_RULES },
      {
        name: 'tempora-alerts',
        rules: ALERTS.map((rule) => ({
          alert: rule.alert,
          expr: rule.expr,
          for: rule.for,
          labels: { severity: rule.severity },
          annotations: annotationsOf(rule, options),
        })),
      },
    ],
  };
}

function annotationsOf(rule: AlertRule, options: RuleOptions = {}) {
  return { summary: rule.summary, description: rule.description, runbook_url: runbookUrl(rule.alert, options.runbookBaseUrl) };
}

/** promtool's duration (`90m`, `1440m`) in minutes, and five more: a baseline that outlasts the case. */
function minutesPast(at: string): number {
  const minutes = /^(\d+)m$/.exec(at)?.[1];
  if (!minutes) throw new Error(`eval_time ${at} is not in minutes`);
  return Number(minutes) + 5;
}

/**
 * promtool's unit tests: every case of every alert, with the annotations it must carry, rendered; each
 * firing case again with its series moved to another workload beside a healthy platform, silent; and the
 * cluster's other workloads misbehaving for an hour beside a healthy platform, where no alert may fire.
 */
export function ruleTests(ruleFile: string) {
  const names = [...alertsByName().keys()];
  return {
    rule_files: [ruleFile],
    evaluation_interval: '1m',
    tests: [
      ...ALERTS.flatMap((rule) => [
        ...rule.tests.map((test) => ({
          name: `${rule.alert}: ${test.name}`,
          interval: '1m',
          input_series: test.input,
          alert_rule_test: [
            {
              eval_time: test.at,
              alertname: rule.alert,
              exp_alerts: test.fires.map((labels) => {
                const annotations = annotationsOf(rule);
                return {
                  exp_labels: { ...labels, severity: rule.severity },
                  exp_annotations: {
                    ...annotations,
                    description: annotations.description.replaceAll(/\{\{ \$labels\.(\w+) \}\}/g, (_, name: string) => labels[name] ?? ''),
                  },
                };
              }),
            },
          ],
        })),
        ...rule.tests
          .filter((test) => test.fires.length > 0)
          .map((test) => ({
            name: `${rule.alert}: ${test.name}, from job ${FOREIGN_JOB} (not Tempora): silent`,
            interval: '1m',
            input_series: [...test.input.map(foreign), ...healthyPlatform(minutesPast(test.at))],
            alert_rule_test: [{ eval_time: test.at, alertname: rule.alert, exp_alerts: [] }],
          })),
      ]),
      {
        name: "the cluster's other workloads failing beside a healthy Tempora: no alert",
        interval: '1m',
        input_series: [...OTHER_WORKLOADS, ...healthyPlatform(80)],
        alert_rule_test: names.map((alertname) => ({ eval_time: '75m', alertname, exp_alerts: [] })),
      },
    ],
  };
}

/** The rules of each alert name: one, or one per severity (TemporaCertificateExpiringSoon), sharing one runbook. */
export function alertsByName(): Map<string, AlertRule[]> {
  const byName = new Map<string, AlertRule[]>();
  for (const rule of ALERTS) byName.set(rule.alert, [...(byName.get(rule.alert) ?? []), rule]);
  return byName;
}

/** docs/runbooks/<alert>.md: what the alert means and what to do, from the same definitions as its rules. */
export function runbookMarkdown(rules: AlertRule[]): string {
  const list = (items: string[]) => items.map((item) => `- ${item}`).join('\n');
  const [rule] = rules as [AlertRule];
  return `# ${rule.alert}

<!-- Generated from dashboards/src/alerts.ts (npm run build -w dashboards); edit it there. -->

${rules.map((level) => `**Severity:** ${level.severity}. **Fires when** \`${level.expr}\` holds for ${level.for}.`).join('\n\n')}

${rule.summary}

## What it means
${rule.runbook.meaning}

## Impact
${rule.runbook.impact}

## Diagnosis
${list(rule.runbook.diagnosis)}

## Mitigation
${list(rule.runbook.mitigation)}
`;
}
