import { z } from 'zod';
import { baseConfigSchema, csv } from '@tempora/kit/config';
import { parseWriterTokens } from '@tempora/kit/auth';

const perMinute = (fallback: number) => z.coerce.number().int().min(1).default(fallback);

export const GraphConfigSchema = baseConfigSchema('graph').extend({
  WRITER_TOKENS: csv.transform((entries, ctx) => {
    try {
      return parseWriterTokens(entries);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  }),
  /** Automatic links per type per moment (contemporaneous, same_location, thematic). */
  AUTOLINK_MAX_PER_TYPE: z.coerce.number().int().min(0).max(100).default(8),
  RATE_LIMIT_PUBLIC_PER_MINUTE: perMinute(60),
  RATE_LIMIT_READ_PER_MINUTE: perMinute(300),
  RATE_LIMIT_WRITE_PER_MINUTE: perMinute(30),
  GRAPH_SEED: z.enum(['true', 'false']).default('true').transform((value) => value === 'true'),
  /** Share of the index living in its overlay at which it is rebuilt from PostgreSQL. */
  INDEX_REBUILD_RATIO: z.coerce.number().min(0.01).max(10).default(0.25),
  BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i).default('8mb'),
});
export type GraphConfig = z.output<typeof GraphConfigSchema>;
