import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';
import { COMPONENT_LABEL, COMPONENTS } from './components.ts';

/**
 * The rules of Grafana's dashboard-linter (and so mixtool's `lint`) for Prometheus dashboards, which cannot
 * run here as programs (Go binaries from outside the module proxy's reach of this project): the same rule
 * names, applied to the JSON we ship. Each finding names its rule, the dashboard and the panel. Two rules
 * are the platform's own (`template-component-rule`, `target-component-rule`): every query and variable
 * selects by the label its monitors set, so a dashboard shows no other workload that shares a metric name.
 */
export interface Finding {
  rule: string;
  dashboard: string;
  panel?: string;
  message: string;
}

interface Variable {
  type: string;
  name: string;
  query?: unknown;
  datasource?: { uid?: string } | string | null;
  multi?: boolean;
  includeAll?: boolean;
  allValue?: string;
  refresh?: number;
}

interface Target {
  expr?: string;
  datasource?: { uid?: string } | string | null;
}

interface Panel {
  type: string;
  title?: string;
  description?: string;
  datasource?: { uid?: string } | string | null;
  fieldConfig?: { defaults?: { unit?: string } };
  targets?: Target[];
}

export interface DashboardJson {
  uid?: string;
  title?: string;
  editable?: boolean;
  templating?: { list?: Variable[] };
  panels?: Panel[];
}

/** Grafana's unit ids that our panels may use (a subset of its value formats; unknown ids render as raw numbers). */
const UNITS = new Set([
  'short',
  'none',
  'percent',
  'percentunit',
  's',
  'ms',
  'µs',
  'ns',
  'bytes',
  'decbytes',
  'bps',
  'Bps',
  'reqps',
  'ops',
  'rps',
  'wps',
  'cps',
  'currencyUSD',
  'dateTimeAsIso',
  'bool',
  'locale',
]);
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal.
const TEMPLATED = new Set(['$datasource', '${datasource}']);
/** `gateway` or `graph|graph-worker`: what the component variable's All stands for, components only. */
const COMPONENT_ALTERNATION = new RegExp(`^(${COMPONENTS.join('|')})(\\|(${COMPONENTS.join('|')}))*$`);
const RATE_FUNCTIONS = new Set(['rate', 'irate', 'increase', 'delta', 'idelta', 'deriv']);
/** Series that only ever grow: read alone they mean nothing until their rate is taken. */
const COUNTER = /(_total|_count|_sum|_bucket)$/;

const uidOf = (datasource: Variable['datasource']) => (typeof datasource === 'string' ? datasource : datasource?.uid);

/** Grafana's variables replaced by values of the same shape, so the query parses as the server would see it. */
export function substitute(expr: string): string {
  return expr
    .replaceAll('$__rate_interval', '5m')
    .replaceAll('$__interval', '1m')
    .replaceAll('$__range', '1h')
    .replaceAll(/\$\{?\w+\}?/g, 'x');
}

interface Selector {
  metric: string;
  labels: Map<string, string>;
  /** The innermost function around it, if any. */
  inFunction?: string;
  range?: string;
}

/** Parses a PromQL expression: its syntax errors and every vector selector with its matchers and context. */
export function inspect(expr: string): { errors: string[]; selectors: Selector[] } {
  const tree = parser.parse(expr);
  const errors: string[] = [];
  const selectors: Selector[] = [];
  const text = (node: SyntaxNode) => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) errors.push(`syntax error at ${ref.from}: ${JSON.stringify(expr.slice(Math.max(0, ref.from - 10), ref.to + 10))}`);
      if (ref.name !== 'VectorSelector') return;
      const node = ref.node;
      const labels = new Map<string, string>();
      const matchers = node.getChild('LabelMatchers');
      for (let matcher = matchers?.firstChild; matcher; matcher = matcher.nextSibling) {
        const name = matcher.getChild('LabelName');
        const value = matcher.getChild('StringLiteral');
        if (name && value) labels.set(text(name), `${text(matcher.getChild('MatchOp') ?? matcher)}${text(value)}`);
      }
      let inFunction: string | undefined;
      let range: string | undefined;
      for (let up = node.parent; up; up = up.parent) {
        if (up.name === 'MatrixSelector') range ??= text(up).slice(text(node).length);
        if (up.name === 'FunctionCall') {
          inFunction = text(up.getChild('FunctionIdentifier')!);
          break;
        }
      }
      selectors.push({ metric: text(node.getChild('Identifier') ?? node).replace(/\{.*$/s, ''), labels, inFunction, range });
    },
  });
  return { errors, selectors };
}

function lintExpr(expr: string, say: (rule: string, message: string) => void): void {
  const { errors, selectors } = inspect(substitute(expr));
  for (const error of errors) say('target-promql-rule', `${error} in ${expr}`);
  const raw = inspect(expr.replaceAll(/\$\{?(component|job|instance)\}?/g, '$$$1')).selectors;
  for (const [index, selector] of selectors.entries()) {
    const original = raw[index];
    if (!original) continue;
    if (original.labels.get(COMPONENT_LABEL) !== '=~"$component"')
      say('target-component-rule', `${selector.metric} must be selected with ${COMPONENT_LABEL}=~"$component"`);
    if (original.labels.get('job') !== '=~"$job"') say('target-job-rule', `${selector.metric} must be selected with job=~"$job"`);
    if (original.labels.get('instance') !== '=~"$instance"') say('target-instance-rule', `${selector.metric} must be selected with instance=~"$instance"`);
    if (COUNTER.test(selector.metric) && !RATE_FUNCTIONS.has(selector.inFunction ?? ''))
      say('target-counter-agg-rule', `${selector.metric} is a counter: take its rate() or increase()`);
  }
  for (const match of expr.matchAll(/\b(rate|irate|increase)\s*\([^[]*\[([^\]]+)\]/g)) {
    if (match[2] !== '$__rate_interval') say('target-rate-interval-rule', `${match[1]}() must use [$__rate_interval], not [${match[2]}]`);
  }
}

export function lintDashboard(dashboard: DashboardJson): Finding[] {
  const findings: Finding[] = [];
  const name = dashboard.uid ?? dashboard.title ?? '(untitled)';
  const variables = dashboard.templating?.list ?? [];
  const variable = (wanted: string) => variables.find((v) => v.name === wanted);

  const datasource = variable('datasource');
  if (datasource?.type !== 'datasource' || datasource.query !== 'prometheus')
    findings.push({ rule: 'template-datasource-rule', dashboard: name, message: 'a `datasource` variable of type datasource querying prometheus is required' });
  const component = variable('component');
  const sayComponent = (message: string) => findings.push({ rule: 'template-component-rule', dashboard: name, message });
  if (!component) sayComponent('a `component` variable is required');
  else {
    if (!TEMPLATED.has(uidOf(component.datasource) ?? '')) sayComponent('`component` must query the templated datasource');
    if (!component.multi || !component.includeAll || !COMPONENT_ALTERNATION.test(component.allValue ?? ''))
      sayComponent(`\`component\` must be multi-select with All meaning the dashboard's components (a|b), not ${JSON.stringify(component.allValue)}`);
    if (component.query !== `label_values(up{${COMPONENT_LABEL}=~"${component.allValue}"}, ${COMPONENT_LABEL})`)
      sayComponent(`\`component\` must offer the values of ${COMPONENT_LABEL} among its All: ${JSON.stringify(component.query)}`);
  }
  for (const wanted of ['job', 'instance']) {
    const v = variable(wanted);
    const rule = `template-${wanted}-rule`;
    if (!v) {
      findings.push({ rule, dashboard: name, message: `a \`${wanted}\` variable is required` });
      continue;
    }
    if (!TEMPLATED.has(uidOf(v.datasource) ?? '')) findings.push({ rule, dashboard: name, message: `\`${wanted}\` must query the templated datasource` });
    if (!v.multi || !v.includeAll || v.allValue !== '.+')
      findings.push({ rule, dashboard: name, message: `\`${wanted}\` must be multi-select with All meaning .+` });
    const selector = /^label_values\((.*),\s*\w+\)$/.exec(typeof v.query === 'string' ? v.query : '')?.[1] ?? '';
    if (!inspect(selector).selectors.every((s) => s.labels.get(COMPONENT_LABEL) === '=~"$component"'))
      sayComponent(`\`${wanted}\` must select ${COMPONENT_LABEL}=~"$component": ${JSON.stringify(v.query)}`);
  }
  for (const v of variables) {
    if (v.type !== 'query') continue;
    if (v.refresh !== 2)
      findings.push({ rule: 'template-on-time-change-reload-rule', dashboard: name, message: `\`${v.name}\` must reload on time range change (refresh 2)` });
    const query = typeof v.query === 'string' ? v.query : '';
    const inner = /^label_values\((.*),\s*\w+\)$/.exec(query)?.[1];
    if (!inner || inspect(substitute(inner)).errors.length > 0)
      findings.push({
        rule: 'template-label-promql-rule',
        dashboard: name,
        message: `\`${v.name}\` query is not label_values(<valid PromQL>, label): ${query}`,
      });
  }
  if (dashboard.editable !== false) findings.push({ rule: 'uneditable-dashboard', dashboard: name, message: 'a provisioned dashboard must not be editable' });

  for (const panel of dashboard.panels ?? []) {
    if (panel.type === 'row') continue;
    const say = (rule: string, message: string) => findings.push({ rule, dashboard: name, panel: panel.title, message });
    if (!panel.title?.trim() || !panel.description?.trim()) say('panel-title-description-rule', 'a panel needs a title and a description');
    const unit = panel.fieldConfig?.defaults?.unit;
    if (!unit || !UNITS.has(unit)) say('panel-units-rule', `unit ${JSON.stringify(unit)} is not a Grafana unit`);
    if (!TEMPLATED.has(uidOf(panel.datasource) ?? '')) say('panel-datasource-rule', 'the panel must use the templated datasource');
    if (!panel.targets?.length) say('panel-no-targets-rule', 'the panel has no query');
    for (const target of panel.targets ?? []) {
      if (!TEMPLATED.has(uidOf(target.datasource) ?? uidOf(panel.datasource) ?? ''))
        say('panel-datasource-rule', 'the query must use the templated datasource');
      if (!target.expr?.trim()) say('target-promql-rule', 'empty query');
      else lintExpr(target.expr, say);
    }
  }
  return findings;
}
