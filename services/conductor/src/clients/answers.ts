import { type ServiceReply, UnexpectedAnswer } from '@tempora/kit/http';
import type { z } from 'zod';

/**
 * A peer's answer read with its schema. One outside it is the caller's own failure (a tool's, so a paid call is
 * refunded; the ledger's, so nothing is assumed about the money), carrying the kit's detail: the peer and what
 * did not match.
 */
export function readAnswer<S extends z.ZodType>(reply: ServiceReply, schema: S, Failure: new (message: string) => Error): z.output<S> {
  try {
    return reply.json(schema);
  } catch (error) {
    if (error instanceof UnexpectedAnswer) throw new Failure(error.message);
    throw error;
  }
}
