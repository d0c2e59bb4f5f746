/**
 * The operation the gateway priced, carried to the service that runs it (docs/gateway.md, "One reading of
 * every request"): `X-Priced-Operation: <operation>; sig=<hex>`, an HMAC-SHA256 under the service key the
 * gateway presents, over the operation, the method, the canonical path and the SHA-256 of the exact body
 * bytes forwarded. A service that runs a priced call compares it with what it is about to run, so a
 * reading of the request that differs between the two ends (a price for one thing, a run of another)
 * is refused instead of served.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { Problem } from './errors.ts';

export const PRICED_OPERATION_HEADER = 'X-Priced-Operation';

/** What a priced call is bound to. */
export interface PricedCall {
  operation: string;
  method: string;
  path: string;
  /** The SHA-256 of the body bytes, hex ('' bytes for no body). */
  bodyDigest: string;
}

export const bodyDigest = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const mac = (key: string, call: PricedCall) => createHmac('sha256', key).update(`${call.operation}\n${call.method}\n${call.path}\n${call.bodyDigest}`).digest();

/** The header's value for `call`, signed with the service key the caller presents. */
export const signPricedCall = (key: string, call: PricedCall) => `${call.operation}; sig=${mac(key, call).toString('hex')}`;

/**
 * The preset a generation without one is priced at (the spec's default). The generation service may select
 * another (an AgentPool's policy default), but what it checks against the price is what was asked.
 */
export const DEFAULT_GENERATION_PRESET = 'balanced';

/** The operation names, one spelling for the gateway's price list and the services that run them. */
export const generationOperation = (preset: string, image: boolean) => `generation.${preset}${image ? '+image' : ''}`;
export const simulationOperation = (fidelity: number) => `simulation.fidelity-${fidelity}`;

const HEADER = /^([a-z0-9.+-]{1,64}); sig=([0-9a-f]{64})$/;

/**
 * At a service, before a paid operation runs: when the request carries a priced operation, it must be
 * signed by one of `keys` over this very request (method, path, body digest kept by the kit's body
 * reader) and name `operation`, what the service is about to run; 409 otherwise, and nothing runs.
 */
export function requirePricedAs(ctx: Context, operation: string, keys: readonly string[]): void {
  const header = ctx.get(PRICED_OPERATION_HEADER);
  if (!header) return;
  const match = HEADER.exec(header);
  const signed = match && {
    operation: match[1]!,
    method: ctx.method,
    path: ctx.path,
    bodyDigest: (ctx.state.bodyDigest as string | undefined) ?? bodyDigest(Buffer.alloc(0)),
  };
  const given = match ? Buffer.from(match[2]!, 'hex') : undefined;
  if (!signed || !given || !keys.some((key) => timingSafeEqual(mac(key, signed), given))) {
    throw new Problem(
      409,
      `${PRICED_OPERATION_HEADER} does not match this request (its method, path and body as received): the call was priced as something else, so it is not run`,
    );
  }
  if (signed.operation !== operation) throw new Problem(409, `the call was priced as ${signed.operation} but asks for ${operation}: it is not run`);
}
