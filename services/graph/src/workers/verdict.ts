import { z } from 'zod';

/** The judge's answer about one pending moment, as the model must give it (and as the offline judge does). */
export const Verdict = z.object({
  verdict: z.enum(['publish', 'reject']),
  reason: z.string().trim().min(1).max(500),
  categories: z.array(z.string().max(60)).max(10).default([]),
});
export type Verdict = z.output<typeof Verdict>;
