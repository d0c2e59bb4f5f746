import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { DASHBOARDS } from './index.ts';
import { alertsByName, ruleGroups, ruleTests, runbookMarkdown } from './rules.ts';

/** Serialised as Grafana stores it, so the committed JSON is what a provisioner or the chart's ConfigMaps load. */
export const dashboardJson = (dashboard: object): string => `${JSON.stringify(dashboard, null, 2)}\n`;
const yaml = (value: unknown) => `# Generated from dashboards/src (npm run build -w dashboards); edit it there.\n${stringify(value, { lineWidth: 0 })}`;

export const GRAFANA_DIR = fileURLToPath(new URL('../grafana/', import.meta.url));
export const PROMETHEUS_DIR = fileURLToPath(new URL('../prometheus/', import.meta.url));
export const RUNBOOK_DIR = fileURLToPath(new URL('../../docs/runbooks/', import.meta.url));

/** Every generated file, by path, with its content. */
export function generated(): Map<string, string> {
  const files = new Map<string, string>();
  for (const dashboard of DASHBOARDS) files.set(`${GRAFANA_DIR}${dashboard.uid}.json`, dashboardJson(dashboard));
  files.set(`${PROMETHEUS_DIR}tempora.rules.yaml`, yaml(ruleGroups()));
  files.set(`${PROMETHEUS_DIR}tempora.rules.test.yaml`, yaml(ruleTests('tempora.rules.yaml')));
  for (const [alert, rules] of alertsByName()) files.set(`${RUNBOOK_DIR}${alert}.md`, runbookMarkdown(rules));
  return files;
}

if (import.meta.main) {
  for (const dir of [GRAFANA_DIR, PROMETHEUS_DIR, RUNBOOK_DIR]) mkdirSync(dir, { recursive: true });
  const files = generated();
  for (const [path, content] of files) writeFileSync(path, content);
  console.log(`wrote ${files.size} files: ${DASHBOARDS.length} dashboards, the rule file and its tests, ${alertsByName().size} runbooks`);
}
