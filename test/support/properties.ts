import type { Parameters } from 'fast-check';

/**
 * The fast-check parameters of a property: `defaultRuns` in `npm test` (bounded, so the suite stays quick),
 * FC_NUM_RUNS runs when set (the long run of docs/reliability.md), and FC_SEED with FC_PATH to replay a
 * reported failure (fast-check prints both).
 */
export function propertyParameters<T>(defaultRuns: number): Parameters<T> {
  const runs = Number(process.env.FC_NUM_RUNS);
  const seed = Number(process.env.FC_SEED);
  return {
    numRuns: Number.isInteger(runs) && runs > 0 ? runs : defaultRuns,
    ...(Number.isInteger(seed) ? { seed } : {}),
    ...(process.env.FC_PATH ? { path: process.env.FC_PATH } : {}),
  };
}

/** A mocha timeout for a property: `defaultMs` for the bounded run, none for a longer one. */
export const propertyTimeout = (defaultMs: number): number => (process.env.FC_NUM_RUNS ? 0 : defaultMs);
