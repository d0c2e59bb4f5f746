import type { GraphService } from '../graph-service.ts';
import type { MomentRow } from '../repository/index.ts';
import type { SpendBudget } from './budget.ts';
import type { GraphWorkerMetrics } from './metrics.ts';
import { askJson, type TextModel } from './model.ts';
import { CLAIM_SECONDS, inputOf } from './moments.ts';
import { Verdict } from './verdict.ts';

const SYSTEM = [
  'You moderate a public graph of historical moments. Decide whether one proposed moment may be published.',
  'Publish: a plausible, real historical event described neutrally, including wars, crimes and atrocities told as history.',
  'Reject: spam or advertising, explicit sexual content, harassment or slurs, incitement to violence, fabricated or fictional events presented as history, and text that is not about a historical event.',
  'Answer with one JSON object: {"verdict": "publish" | "reject", "reason": one sentence, "categories": [the reject reasons that apply, e.g. "spam", "sexual", "hate", "violence", "fabricated", "off-topic"]}.',
].join('\n');

/** What the offline provider rejects: unmistakable spam and explicit content, nothing that needs judgement. */
const OFFLINE_REJECT = /\b(buy now|click here|free money|casino|viagra|porn\w*|xxx|lorem ipsum)\b/i;

export function offlineVerdict(moment: Pick<MomentRow, 'event_name' | 'description'>): Verdict {
  const hit = OFFLINE_REJECT.exec(`${moment.event_name} ${moment.description}`);
  return hit
    ? { verdict: 'reject', reason: `contains "${hit[0]}", which the offline moderator refuses`, categories: ['spam'] }
    : { verdict: 'publish', reason: 'nothing the offline moderator refuses', categories: [] };
}

/**
 * The Judge: moments waiting with status `pending` (the expander's and daily's proposals, or a writer's)
 * are published (status `active`) or rejected (status `archived` and visibility `private`, so they leave
 * every public read) on the model's verdict. Returns how many were decided; `metrics` counts the verdicts.
 */
export async function judgePending(
  graph: GraphService,
  model: TextModel,
  budget: SpendBudget,
  batch: number,
  signal?: AbortSignal,
  metrics?: GraphWorkerMetrics,
): Promise<number> {
  const candidates = await graph.repository.claims.pendingMoments(batch);
  // Replicas of the judge never judge (and pay for) one moment twice: each takes the ones it could claim.
  const claimed = await graph.repository.claims.claim('judge', candidates, CLAIM_SECONDS);
  const moments = candidates.filter((row) => claimed.has(row.id));
  const outcomes = await Promise.allSettled(
    moments.map(async (row) => {
      const verdict = await askJson(model, budget, {
        system: SYSTEM,
        prompt: JSON.stringify({
          path: row.path,
          event_name: row.event_name,
          description: row.description,
          figures: row.figures,
          tags: row.tags,
          source_type: row.source_type,
        }),
        schema: Verdict,
        offline: () => offlineVerdict(row),
        maxTokens: 300,
        ...(signal ? { signal } : {}),
      });
      return {
        verdict: verdict.verdict,
        input: inputOf(row, verdict.verdict === 'publish' ? { status: 'active' } : { status: 'archived', visibility: 'private' }),
      };
    }),
  );
  const decided = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  try {
    if (decided.length > 0) await graph.writeMoments(decided.map((decision) => decision.input));
  } catch (error) {
    await graph.repository.claims.release('judge', [...claimed]);
    throw error;
  }
  await graph.repository.claims.release(
    'judge',
    moments.filter((_, index) => outcomes[index]!.status === 'rejected').map((row) => row.id),
  );
  for (const decision of decided) metrics?.verdict(decision.verdict);
  // Verdicts that were reached are kept; the first failure (a spent budget, a malformed reply) is reported.
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
  return decided.length;
}
