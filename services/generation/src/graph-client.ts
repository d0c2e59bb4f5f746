import type { Logger } from '@tempora/kit/observability';
import type { GraphMoment } from './agents/types.ts';

/**
 * Looks the query up in the graph service's public search (`GET {GRAPH_URL}/api/v1/moments?q=`), so the
 * offline provider and Grounding can build on a moment the graph knows. Best effort: short timeout, any
 * failure means "unknown moment".
 */
export async function lookupMoment(graphUrl: string, query: string, timeoutMs: number, logger: Logger, signal?: AbortSignal): Promise<GraphMoment | null> {
  const base = graphUrl.replace(/\/$/, '');
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const response = await fetch(`${base}/api/v1/moments?${new URLSearchParams({ q: query.slice(0, 200), limit: '1' })}`, {
      headers: { accept: 'application/json' },
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (!response.ok) return null;
    const body = (await response.json()) as { items?: Array<Record<string, unknown>> };
    const item = body.items?.[0];
    if (!item || typeof item.path !== 'string' || typeof item.event_name !== 'string') return null;
    if (!relevant(query, item)) return null;
    return {
      path: item.path,
      event_name: item.event_name,
      description: String(item.description ?? ''),
      year: Number(item.year),
      month_num: Number(item.month_num ?? 1),
      day: Number(item.day ?? 1),
      time: String(item.time ?? '1200'),
      country: String(item.country ?? 'unknown'),
      region: String(item.region ?? 'unknown'),
      city: String(item.city ?? 'unknown'),
      era: String(item.era ?? ''),
      latitude: typeof item.latitude === 'number' ? item.latitude : null,
      longitude: typeof item.longitude === 'number' ? item.longitude : null,
      figures: Array.isArray(item.figures) ? item.figures.map(String) : [],
      tags: Array.isArray(item.tags) ? item.tags.map(String) : [],
      confidence: typeof item.confidence === 'number' ? item.confidence : 0.5,
      url: `${base}/api/v1/moments/${item.path.replace(/^\//, '')}`,
    };
  } catch (error) {
    logger.debug({ err: error }, 'graph lookup failed');
    return null;
  }
}

/** The search's best hit counts only when it shares real words with the query (not just "the"). */
function relevant(query: string, item: Record<string, unknown>): boolean {
  const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\d]{4,}/gu) ?? []);
  const asked = words(query);
  if (asked.size === 0) return false;
  const known = words(`${item.event_name} ${(item.figures as string[] | undefined)?.join(' ') ?? ''} ${item.year}`);
  let shared = 0;
  for (const word of asked) if (known.has(word)) shared += 1;
  return shared >= Math.min(2, asked.size);
}
