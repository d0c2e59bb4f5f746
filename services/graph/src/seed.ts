import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tdfHash } from '@tempora/kit/moments';
import { z } from 'zod';
import { EDGE_TYPES } from './domain/edge-types.ts';
import { MomentInput, momentPath } from './domain/moment.ts';
import type { GraphService } from './graph-service.ts';

export const SEED_DIR = fileURLToPath(new URL('../seed/', import.meta.url));

const SeedMoment = z.object({
  path: momentPath,
  event_name: z.string(),
  description: z.string(),
  figures: z.array(z.string()),
  tags: z.array(z.string()),
  latitude: z.number(),
  longitude: z.number(),
  type: z.string(),
  confidence: z.number(),
});
const SeedEdge = z.object({
  source: momentPath,
  target: momentPath,
  type: z.enum(EDGE_TYPES),
  weight: z.number(),
  theme: z.string(),
  description: z.string(),
});

/** Reads the hand-written data set: `moments-*.json` and `edges-*.json`, validated like any ingest. */
export function readSeed(directory = SEED_DIR): MomentInput[] {
  const files = readdirSync(directory)
    .filter((file) => file.endsWith('.json'))
    .sort();
  const read = (prefix: string) =>
    files.filter((file) => file.startsWith(prefix)).flatMap((file) => JSON.parse(readFileSync(join(directory, file), 'utf8')) as unknown[]);
  const moments = z.array(SeedMoment).parse(read('moments-'));
  const edges = z.array(SeedEdge).parse(read('edges-'));
  const bySource = new Map<string, Array<z.output<typeof SeedEdge>>>();
  for (const edge of edges) bySource.set(edge.source, [...(bySource.get(edge.source) ?? []), edge]);
  return moments.map((moment) =>
    MomentInput.parse({
      ...moment,
      layer: 1,
      source_type: 'seed',
      edges: (bySource.get(moment.path) ?? []).map(({ target, type, weight, theme, description }) => ({ target, type, weight, theme, description })),
    }),
  );
}

/** Loads the seed once per version of its content: a restart with the same files writes nothing. */
export async function seedGraph(graph: GraphService, inputs = readSeed()): Promise<{ written: boolean; moments: number }> {
  const hash = tdfHash(inputs);
  if ((await graph.repository.meta.get('seed_hash')) === hash) return { written: false, moments: inputs.length };
  await graph.writeMoments(inputs);
  await graph.repository.meta.set('seed_hash', hash);
  return { written: true, moments: inputs.length };
}
