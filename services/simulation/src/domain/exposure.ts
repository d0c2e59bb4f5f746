import { knownFacts, type World } from './world.ts';

/**
 * The exposure validator: an entity may use, tell or reveal only a fact it has been exposed to (it held it
 * at the start, produced it, witnessed it, or was told it) before the moment it uses it. A step whose
 * model answer breaks this is refused, never repaired silently.
 */
export interface ExposureViolation {
  entity: string;
  fact: string;
  where: string;
  reason: 'not exposed' | 'unknown fact';
}

export class ExposureRefused extends Error {
  override name = 'ExposureRefused';
  readonly violations: ExposureViolation[];
  constructor(violations: ExposureViolation[]) {
    super(`the answer uses knowledge its entity was not exposed to: ${violations.map((v) => `${v.entity} → ${v.fact} (${v.where}: ${v.reason})`).join('; ')}`);
    this.violations = violations;
  }
}

/** What one answer claims an entity used: facts drawn on, told or revealed, at `where`. */
export interface KnowledgeUse {
  entity: string;
  facts: string[];
  where: string;
}

/** Checks uses against what each entity knew when the step began (`extra` adds what it learned earlier in the same step). */
export function exposureViolations(world: World, uses: KnowledgeUse[], extra?: ReadonlyMap<string, ReadonlySet<string>>): ExposureViolation[] {
  const cache = new Map<string, Set<string>>();
  const known = (entity: string) => {
    let set = cache.get(entity);
    if (!set) cache.set(entity, (set = new Set(knownFacts(world, entity))));
    return set;
  };
  const violations: ExposureViolation[] = [];
  for (const use of uses) {
    for (const fact of use.facts) {
      if (!world.facts[fact]) violations.push({ entity: use.entity, fact, where: use.where, reason: 'unknown fact' });
      else if (!known(use.entity).has(fact) && !extra?.get(use.entity)?.has(fact))
        violations.push({ entity: use.entity, fact, where: use.where, reason: 'not exposed' });
    }
  }
  return violations;
}

/**
 * A dialog is checked turn by turn: what a speaker reveals is learned by its listeners (under M3) from
 * that turn on, so a later turn may use it and an earlier one may not.
 */
export function dialogViolations(
  world: World,
  turns: ReadonlyArray<{ speaker: string; to: string | null; uses_knowledge: string[]; reveals: string | null }>,
  listeners: readonly string[],
  spreads: boolean,
): ExposureViolation[] {
  const learned = new Map<string, Set<string>>();
  const violations: ExposureViolation[] = [];
  turns.forEach((turn, index) => {
    const facts = [...turn.uses_knowledge, ...(turn.reveals ? [turn.reveals] : [])];
    violations.push(...exposureViolations(world, [{ entity: turn.speaker, facts, where: `dialog turn ${index + 1}` }], learned));
    if (spreads && turn.reveals) {
      const hearers = turn.to ? [turn.to] : listeners.filter((entity) => entity !== turn.speaker);
      for (const hearer of hearers) {
        let set = learned.get(hearer);
        if (!set) learned.set(hearer, (set = new Set()));
        set.add(turn.reveals);
      }
    }
  });
  return violations;
}
