import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';

const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps a caller's X-Request-ID when it is sane, so one id follows a request across services. */
export async function requestId(ctx: Context, next: Next): Promise<void> {
  const incoming = ctx.get('X-Request-ID');
  const id = ACCEPTABLE.test(incoming) ? incoming : randomUUID();
  ctx.state.requestId = id;
  ctx.set('X-Request-ID', id);
  await next();
}
