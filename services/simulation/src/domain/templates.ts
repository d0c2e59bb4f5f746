import { readdirSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { ENTITY_KINDS, IMPORTANCE, MECHANISM_IDS, MODES, STATE_VARIABLES } from './vocabulary.ts';

const slug = z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/);
const unit = z.number().min(0).max(1);

export const TemplateEntitySchema = z.strictObject({
  id: slug,
  name: z.string().min(1).max(120),
  role: z.string().min(1).max(200),
  kind: z.enum(ENTITY_KINDS),
  importance: z.enum(IMPORTANCE),
  goals: z.array(z.string().min(1).max(300)).min(1).max(4),
  /** Starting influence, resolve and resources (M4 keeps them in [0, 1]). */
  state: z.strictObject(Object.fromEntries(STATE_VARIABLES.map((name) => [name, unit])) as Record<(typeof STATE_VARIABLES)[number], typeof unit>),
});

export const TemplateSchema = z.strictObject({
  id: slug,
  title: z.string().min(1).max(200),
  description: z.string().min(1).max(1000),
  domain: z.enum(['history', 'business', 'science']),
  mode: z.enum(MODES),
  tier: z.enum(['standard', 'advanced', 'premium']),
  setting: z.strictObject({ place: z.string().min(1), era: z.string().min(1) }),
  entities: z.array(TemplateEntitySchema).min(3).max(10),
  /** What each entity knows at the start: the only knowledge it may use until it is exposed to more. */
  knowledge: z
    .array(z.strictObject({ id: slug, fact: z.string().min(1).max(400), holders: z.array(slug).min(1), secret: z.boolean().default(false) }))
    .min(2)
    .max(20),
  relationships: z.array(z.strictObject({ a: slug, b: slug, trust: unit, affinity: unit, tension: unit })).min(1),
  timepoints: z
    .array(
      z.strictObject({
        label: z.string().min(1).max(200),
        time: z.string().min(1).max(80),
        /** Hour of day, for M14. */
        hour: z.number().int().min(0).max(23),
        /** Entities on stage; the others are carried over unresolved under M5. Unset: everyone. */
        present: z.array(slug).optional(),
      }),
    )
    .min(3)
    .max(12),
  mechanisms: z.array(z.enum(MECHANISM_IDS as [string, ...string[]])).min(1),
  /** Settings of the modes (each has defaults; a template sets those of its own mode). */
  modes: z
    .strictObject({
      portal: z
        .strictObject({
          outcome: z.string().min(1).max(400),
          depth: z.number().int().min(2).max(6).optional(),
          beam: z.number().int().min(1).max(4).optional(),
        })
        .optional(),
      branching: z.strictObject({ branch_at: z.number().int().min(1), intervention: z.string().min(1).max(400) }).optional(),
      cyclical: z.strictObject({ cycles: z.number().int().min(2).max(5), phases: z.array(z.string().min(1).max(120)).min(2).max(5) }).optional(),
      directorial: z.strictObject({ premise: z.string().min(1).max(400) }).optional(),
    })
    .default({}),
  /** Dollars per run at each fidelity in the template's own mode with its own mechanisms (checked against the estimator by the tests). */
  cost_estimate_usd: z.strictObject({ '1': z.number(), '2': z.number(), '3': z.number(), '4': z.number(), '5': z.number() }),
});
export type Template = z.output<typeof TemplateSchema>;

/** Cross-references a schema cannot check: every id named exists, timepoint indexes are in range. */
export function templateProblems(template: Template): string[] {
  const ids = new Set(template.entities.map((entity) => entity.id));
  const problems: string[] = [];
  if (ids.size !== template.entities.length) problems.push('entity ids repeat');
  const named = (id: string, where: string) => {
    if (!ids.has(id)) problems.push(`${where} names unknown entity ${id}`);
  };
  for (const fact of template.knowledge) fact.holders.forEach((holder) => named(holder, `knowledge ${fact.id}`));
  for (const pair of template.relationships) {
    named(pair.a, 'a relationship');
    named(pair.b, 'a relationship');
  }
  template.timepoints.forEach((timepoint, index) => timepoint.present?.forEach((id) => named(id, `timepoint ${index}`)));
  const branchAt = template.modes.branching?.branch_at;
  if (branchAt !== undefined && branchAt >= template.timepoints.length) problems.push('branching.branch_at must name a timepoint before the last');
  if (!template.entities.some((entity) => entity.kind !== 'person' && entity.kind !== 'group'))
    problems.push('no entity for M16 (a place, object, force or institution)');
  return problems;
}

export class TemplateCatalog {
  readonly templates: ReadonlyMap<string, Template>;

  constructor(templates: Template[]) {
    this.templates = new Map(templates.map((template) => [template.id, template]));
  }

  /** Reads every `*.json` of `directory`; a file that does not parse or cross-check stops the service (it ships with it). */
  static load(directory: URL): TemplateCatalog {
    const files = readdirSync(directory)
      .filter((name) => name.endsWith('.json'))
      .sort();
    return new TemplateCatalog(
      files.map((name) => {
        const parsed = TemplateSchema.safeParse(JSON.parse(readFileSync(new URL(name, directory), 'utf8')));
        if (!parsed.success) throw new Error(`template ${name}: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
        const problems = templateProblems(parsed.data);
        if (`${parsed.data.id}.json` !== name) problems.push(`its id must be its file name (${name})`);
        if (problems.length) throw new Error(`template ${name}: ${problems.join('; ')}`);
        return parsed.data;
      }),
    );
  }

  get(id: string): Template | undefined {
    return this.templates.get(id);
  }

  list(): Template[] {
    return [...this.templates.values()];
  }
}

export const TEMPLATE_DIRECTORY = new URL('../../templates/', import.meta.url);
