import { ALERTS, RECORDING_RULES, type AlertRule } from './alerts.ts';

/**
 * Where each alert's runbook lies, relative to the repository: it declares no public URL to make it absolute
 * with. The platform chart rewrites it to `<monitoring.prometheusRules.runbookBaseUrl>/<alert>.md` in the
 * PrometheusRule when that value says where `docs/runbooks/` is published.
 */
export const runbookUrl = (alert: string) => `docs/runbooks/${alert}.md`;

/** The rule groups, as a Prometheus rule file and a PrometheusRule's `spec` both hold them. */
export function ruleGroups() {
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
          annotations: annotationsOf(rule),
        })),
      },
    ],
  };
}

function annotationsOf(rule: AlertRule) {
  return { summary: rule.summary, description: rule.description, runbook_url: runbookUrl(rule.alert) };
}

/** promtool's unit tests: every case of every alert, with the annotations it must carry, rendered. */
export function ruleTests(ruleFile: string) {
  return {
    rule_files: [ruleFile],
    evaluation_interval: '1m',
    tests: ALERTS.flatMap((rule) =>
      rule.tests.map((test) => ({
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
                exp_annotations: { ...annotations, description: annotations.description.replaceAll(/\{\{ \$labels\.(\w+) \}\}/g, (_, name: string) => labels[name] ?? '') },
              };
            }),
          },
        ],
      })),
    ),
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
