import type { EdgeType } from '../src/domain/edge-types.ts';

/** A small graph whose answers are known by construction. Paths are in "testland". */
export const at = (slug: string, year = 1900) => `/${year}/march/${(slug.length % 27) + 1}/1200/testland/north/alpha/${slug}`;

export interface FixtureEdge {
  target: string;
  type: EdgeType;
  weight?: number;
}

export const record = (path: string, edges: FixtureEdge[] = [], extra: Record<string, unknown> = {}) => ({
  payload: {
    path,
    event_name: path.split('/').pop()!.replace(/-/g, ' '),
    description: `fixture ${path}`,
    figures: ['Ada Lovelace'],
    tags: ['fixture'],
    edges: edges.map((edge) => ({ weight: 0.8, ...edge })),
    ...extra,
  },
});

export const ANCHOR = at('anchor');
export const DIRECTED: EdgeType[] = ['causes', 'caused_by', 'precedes', 'follows', 'influences'];
export const SYMMETRIC: EdgeType[] = ['contemporaneous', 'same_location', 'thematic', 'same_era', 'same_conflict', 'same_figure', 'challenges'];

/** For each type T: anchor → out-T (stored out of the anchor) and in-T → anchor (stored into it). */
export const outOf = (type: EdgeType) => at(`out-${type.replace(/_/g, '-')}`);
export const into = (type: EdgeType) => at(`in-${type.replace(/_/g, '-')}`);

/** A chain c0 → c1 → ... → c5 (causes), a challenges shortcut c0 – c5, and an island. */
export const chain = (n: number) => at(`chain-${n}`, 1950);
export const ISLAND = at('island', 1999);

export function fixtureRecords() {
  const types = [...DIRECTED, ...SYMMETRIC];
  const neighbours = types.flatMap((type) => [record(outOf(type)), record(into(type), [{ target: ANCHOR, type }])]);
  const anchor = record(
    ANCHOR,
    types.map((type) => ({ target: outOf(type), type })),
  );
  const chainRecords = [0, 1, 2, 3, 4, 5].map((n) => record(chain(n), n < 5 ? [{ target: chain(n + 1), type: 'causes', weight: 0.9 - n * 0.1 }] : []));
  chainRecords[0]!.payload.edges.push({ target: chain(5), type: 'challenges', weight: 0.3 });
  return [...neighbours, anchor, ...chainRecords, record(ISLAND)];
}
