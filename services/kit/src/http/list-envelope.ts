import { z } from 'zod';

/**
 * The spec's list envelope, `{items, total, limit, offset}`, of `item`: every list of every service answers
 * in it. `id` names it in the OpenAPI document.
 */
export const listEnvelope = <T extends z.ZodType>(item: T, id?: string) => {
  const envelope = z.object({ items: z.array(item), total: z.number().int(), limit: z.number().int(), offset: z.number().int() });
  return id ? envelope.meta({ id }) : envelope;
};

/** The `limit` (1 to `max`, default `fallback`) and `offset` a list honours. */
export const pageQuery = (fallback = 20, max = 100) =>
  z.object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(max)
      .default(fallback)
      .meta({ description: `1 to ${max}, default ${fallback}` }),
    offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
  });
