import { randomUUID } from 'node:crypto';
import { ServiceClient } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { z } from 'zod';
import type { GraphMoment } from './agents/types.ts';

/** The fields of the graph's search hit (its OpenAPI `SearchHit`) a scene builds on. */
const Hit = z.object({
  path: z.string(),
  event_name: z.string(),
  description: z.string(),
  year: z.number().int(),
  month_num: z.number().int(),
  day: z.number().int(),
  time: z.string(),
  country: z.string(),
  region: z.string(),
  city: z.string(),
  era: z.string(),
  latitude: z.number().nullable(),
  longitude: z.number().nullable(),
  figures: z.array(z.string()),
  tags: z.array(z.string()),
  confidence: z.number(),
});
const SearchResult = z.object({ items: z.array(Hit) });

/**
 * Looks the query up in the graph service's public search (`GET {GRAPH_URL}/api/v1/moments?q=`), so the
 * offline provider and Grounding can build on a moment the graph knows. Best effort: short timeout, any
 * failure (an answer outside the graph's schema included) means "unknown moment".
 */
export async function lookupMoment(graphUrl: string, query: string, timeoutMs: number, logger: Logger, signal?: AbortSignal): Promise<GraphMoment | null> {
  const graph = new ServiceClient(graphUrl, undefined, timeoutMs, 'the graph service');
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const reply = await graph.call('GET', `/api/v1/moments?${new URLSearchParams({ q: query.slice(0, 200), limit: '1' })}`, {
      requestId: randomUUID(),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (reply.status < 200 || reply.status >= 300) return null;
    const item = reply.json(SearchResult).items[0];
    if (!item || !relevant(query, item)) return null;
    return { ...item, url: `${graph.baseUrl}/api/v1/moments/${item.path.replace(/^\//, '')}` };
  } catch (error) {
    logger.debug({ err: error }, 'graph lookup failed');
    return null;
  }
}

/** The search's best hit counts only when it shares real words with the query (not just "the"). */
function relevant(query: string, item: z.output<typeof Hit>): boolean {
  const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\d]{4,}/gu) ?? []);
  const asked = words(query);
  if (asked.size === 0) return false;
  const known = words(`${item.event_name} ${item.figures.join(' ')} ${item.year}`);
  let shared = 0;
  for (const word of asked) if (known.has(word)) shared += 1;
  return shared >= Math.min(2, asked.size);
}
