export const EDGE_TYPES = [
  'causes',
  'caused_by',
  'precedes',
  'follows',
  'influences',
  'contemporaneous',
  'same_location',
  'thematic',
  'same_era',
  'same_conflict',
  'same_figure',
  'challenges',
] as const;
export type EdgeType = (typeof EDGE_TYPES)[number];

export const SYMMETRIC_TYPES: ReadonlySet<EdgeType> = new Set([
  'contemporaneous',
  'same_era',
  'same_location',
  'same_conflict',
  'same_figure',
  'thematic',
  'challenges',
]);

/** The default of traverse's `edge_types`: the directed causal and temporal types. */
export const CAUSAL_TYPES: readonly EdgeType[] = ['causes', 'caused_by', 'precedes', 'follows', 'influences'];

/** The default of path's `edge_types`: every type except `challenges`. */
export const PATH_DEFAULT_TYPES: readonly EdgeType[] = EDGE_TYPES.filter((type) => type !== 'challenges');

export type Direction = 'past' | 'future' | 'both';

/** Stored-direction flags: follow edges out of a node (source → target), into it, or both. */
export const OUT = 1;
export const IN = 2;

/** Types whose stored direction points forward in time (source earlier than target). */
const FORWARD: ReadonlySet<EdgeType> = new Set(['causes', 'precedes', 'influences']);

/**
 * The direction table of the spec: which stored directions each listed type is followed in.
 * future: out-edges of causes/precedes/influences, in-edges of caused_by/follows;
 * past: the reverse; both: the union; symmetric types: both ways, whatever the direction.
 * Indexed by edge type code (position in EDGE_TYPES); 0 means "not followed".
 */
export function directionPlan(types: readonly EdgeType[], direction: Direction): Uint8Array {
  const plan = new Uint8Array(EDGE_TYPES.length);
  for (const type of types) {
    const code = EDGE_TYPES.indexOf(type);
    if (SYMMETRIC_TYPES.has(type)) {
      plan[code] = OUT | IN;
      continue;
    }
    const futureFlag = FORWARD.has(type) ? OUT : IN;
    const pastFlag = futureFlag === OUT ? IN : OUT;
    plan[code] = direction === 'future' ? futureFlag : direction === 'past' ? pastFlag : OUT | IN;
  }
  return plan;
}

export const typeCode = (type: EdgeType): number => EDGE_TYPES.indexOf(type);
export const typeOf = (code: number): EdgeType => EDGE_TYPES[code] as EdgeType;

/** Parses a comma-separated edge type list; unknown names are reported together. */
export function parseEdgeTypes(value: string): { types: EdgeType[]; unknown: string[] } {
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(EDGE_TYPES as readonly string[]).includes(name));
  const types = [...new Set(names.filter((name): name is EdgeType => (EDGE_TYPES as readonly string[]).includes(name)))];
  return { types, unknown };
}
