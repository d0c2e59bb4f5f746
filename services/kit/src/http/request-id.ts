import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';

const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's X-Request-ID when it is sane, so one id follows a request across services; else a new one. */
export const requestIdFor = (incoming: string | undefined): string => (incoming !== undefined && ACCEPTABLE.test(incoming) ? incoming : randomUUID());

export async function requestId(ctx: Context, next: Next): Promise<void> {
  const id = requestIdFor(ctx.get('X-Request-ID'));
  ctx.state.requestId = id;
  ctx.set('X-Request-ID', id);
  await next();
}
