import type { Knex } from '@tempora/kit/data';

/**
 * The end of a lease taken now (a delivery's, a tier push's): longer than one attempt (its gateway call
 * is cut at its time-out), so two replicas do not deliver one entry at once, and no longer, because a
 * lease whose process died (a SIGKILL, a lost node) holds its entry back until it runs out.
 */
export const leaseEnd = (knex: Knex, leaseMs: number) => knex.raw('now() + make_interval(secs => ?::double precision)', [leaseMs / 1000]);
