/**
 * Writes each template's `cost_estimate_usd` (its own mode and mechanisms, fidelity 1–5) from the
 * estimator, so the figures the template list shows are the ones a run reserves:
 *   node services/simulation/scripts/estimate-templates.ts
 * The template tests fail when a file and the estimator disagree.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { templateEstimates } from '../src/domain/engine.ts';
import { TEMPLATE_DIRECTORY, TemplateCatalog } from '../src/domain/templates.ts';

for (const template of TemplateCatalog.load(TEMPLATE_DIRECTORY).list()) {
  const file = new URL(`${template.id}.json`, TEMPLATE_DIRECTORY);
  const data = JSON.parse(readFileSync(file, 'utf8'));
  data.cost_estimate_usd = templateEstimates(template);
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
  console.log(template.id, data.cost_estimate_usd);
}
