import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DASHBOARDS } from './index.ts';

/** Serialised as Grafana stores it, so the committed JSON is what a provisioner or the chart's ConfigMaps load. */
export const dashboardJson = (dashboard: object): string => `${JSON.stringify(dashboard, null, 2)}\n`;

export const GRAFANA_DIR = fileURLToPath(new URL('../grafana/', import.meta.url));

if (import.meta.main) {
  mkdirSync(GRAFANA_DIR, { recursive: true });
  for (const dashboard of DASHBOARDS) writeFileSync(`${GRAFANA_DIR}${dashboard.uid}.json`, dashboardJson(dashboard));
  console.log(`wrote ${DASHBOARDS.length} dashboards to ${GRAFANA_DIR}`);
}
