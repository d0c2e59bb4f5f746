import type { IncomingHttpHeaders } from 'node:http';
import { Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { type Dispatcher, errors as undiciErrors } from 'undici';
import type { UserPrincipal } from '../credentials.ts';
import type { CallCharge } from '../domain/credits.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { EventStreamWatch } from './event-stream-watch.ts';
import { type ClientRequest, type CreditFields, headerValue, writeAnswerHead } from './header-contract.ts';
import type { UpstreamName } from './routing.ts';

/** What an upstream call needs of its proxy. */
export interface CallDeps {
  metrics: GatewayMetrics;
  logger: Logger;
  /** CHARGED_CALL_MAX_MS: a charged call is cut off after this, before its charge's settle-by time (domain/credits.ts). */
  chargedCallMaxMs: number;
  /** Books the job a charged call started (a 202 answer's Location) to be followed, and refunded if it fails. */
  followJob(charge: CallCharge, upstream: UpstreamName, path: string, location: string): Promise<void>;
}

/** One call: what was asked, for whom, what it was charged, and whom to tell how it ended. */
export interface CallSpec {
  request: ClientRequest;
  upstream: UpstreamName;
  user: UserPrincipal | undefined;
  charge: CallCharge | undefined;
  /** How long the upstream may take to answer with headers (the 504's words). */
  headersTimeout: number;
  /** Runs when the upstream's answer is about to be passed on: from then on the response is the proxy's own. */
  onAnswer: (() => void) | undefined;
  done: (error?: unknown) => void;
}

/**
 * A charged call's answer held until what it books is booked (the refund of a refusal, the job an
 * accepted call started), so that its credit fields tell the outcome. Only its first HELD_BYTES wait in
 * memory: past them the upstream is paused.
 */
interface HeldAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  chunks: Buffer[];
  size: number;
  /** The whole answer arrived. */
  complete: boolean;
  /** The credit fields to answer with, once the booking is done. */
  credits?: CreditFields;
}

/** A refusal or an accepted job is a short document; a longer one is passed on as a stream once booked. */
const HELD_BYTES = 64 * 1024;

const isEventStream = (headers: IncomingHttpHeaders) => /^text\/event-stream\b/i.test(headerValue(headers['content-type']));

/**
 * One proxied call in flight, as undici's dispatch handler: the upstream's answer is written straight into
 * the client's response, with backpressure both ways. One object per call holds what undici's higher-level
 * `stream()` spread over an async resource, stream listeners, an abort signal and a closure per step
 * (88 → 65 µs of the gateway's CPU per proxied request in an A/B, bench/gateway/README.md, 2026-11-24).
 */
export class UpstreamCall implements Dispatcher.DispatchHandler {
  private readonly started = performance.now();
  private controller: Dispatcher.DispatchController | undefined;
  /** The upstream's head arrived: from then on the response is the proxy's own. */
  private answered = false;
  /** The client went away: the upstream call is cancelled (and a charge refunded if the answer had not started). */
  private abandoned = false;
  /** A charged answer not yet passed on. */
  private held: HeldAnswer | undefined;
  /** A charged call's event stream, watched for the event that ends it: it delivered only if that is `done`. */
  private events: EventStreamWatch | undefined;
  /** A charged call's limit: it was cut off at CHARGED_CALL_MAX_MS. */
  private cutOff = false;
  private readonly onClientGone = () => {
    if (this.call.request.res.writableFinished) return;
    this.abandoned = true;
    this.controller?.abort(new Error('the client closed the request'));
  };

  private readonly deps: CallDeps;
  private readonly call: CallSpec;

  constructor(deps: CallDeps, spec: CallSpec) {
    this.deps = deps;
    let call = spec;
    call.request.res.on('close', this.onClientGone);
    if (call.charge?.owned) {
      const limit = setTimeout(() => {
        this.cutOff = true;
        this.controller?.abort(new Error('the charged call outlived CHARGED_CALL_MAX_MS'));
      }, deps.chargedCallMaxMs).unref();
      call = {
        ...call,
        done: (error) => {
          clearTimeout(limit);
          spec.done(error);
        },
      };
    }
    this.call = call;
  }

  /** The balance the response reports when nothing is refunded. */
  private get balance(): number | undefined {
    const { charge, user } = this.call;
    return charge?.balance ?? (user ? Number(user.user.balance) : undefined);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abandoned) controller.abort(new Error('the client closed the request'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // Interim answers (100 Continue, 103 Early Hints) are not relayed: the final one follows.
    if (statusCode < 200) return;
    const { charge, user } = this.call;
    this.answered = true;
    this.deps.metrics.upstreamDuration.series(this.call.upstream, String(statusCode)).observe((performance.now() - this.started) / 1000);
    if (charge) {
      // A charged call the upstream refused is refunded before the client sees the head, so that
      // X-Balance-After is the balance after the refund: its body waits meanwhile.
      if (statusCode >= 300) {
        const refunded = charge.refund(`upstream answered ${statusCode}`);
        this.hold(
          controller,
          statusCode,
          headers,
          refunded.then((balance) => (balance === undefined ? undefined : { charged: 0, balance })),
        );
        return;
      }
      // Accepted for later: delivered only when the job completes, so the job is followed (booked before
      // the client learns of it, so that no accepted job goes unfollowed).
      const location = headerValue(headers.location);
      if (statusCode === 202 && location) {
        this.hold(
          controller,
          statusCode,
          headers,
          this.deps.followJob(charge, this.call.upstream, this.call.request.path, location).then(() => undefined),
        );
        return;
      }
      if (isEventStream(headers)) this.events = new EventStreamWatch();
    }
    this.call.onAnswer?.();
    writeAnswerHead(this.call.request, statusCode, headers, user ? { charged: charge?.charged ?? 0, balance: this.balance } : undefined);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { held } = this;
    if (held) {
      held.chunks.push(chunk);
      held.size += chunk.length;
      if (held.size >= HELD_BYTES) controller.pause();
      this.release(controller);
      return;
    }
    this.events?.feed(chunk);
    this.pass(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    this.call.request.res.off('close', this.onClientGone);
    if (this.held) {
      this.held.complete = true;
      this.release(controller);
      return;
    }
    const { charge, request, done } = this.call;
    const outcome = this.events?.outcome;
    if (charge && this.events && outcome !== 'done') {
      // The stream ended without its scene: refunded before the client sees the end, so that the ledger
      // it may read next holds the refund.
      void charge.refund(outcome === 'error' ? 'the stream ended in an error event' : 'the stream ended without its done event').then(() => {
        request.res.end();
        done();
      });
      return;
    }
    charge?.deliver();
    request.res.end();
    done();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.call.request.res.off('close', this.onClientGone);
    this.failed(error).then(() => this.call.done(), this.call.done);
  }

  /** Writes a chunk of the answer, pausing the upstream while the client's socket is full. */
  private pass(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { res } = this.call.request;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  /**
   * Holds a charged answer until `booking` is done; it resolves to the credit fields to answer with
   * (undefined: the charge stands).
   */
  private hold(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, booking: Promise<CreditFields | undefined>): void {
    const held: HeldAnswer = { statusCode, headers, chunks: [], size: 0, complete: false };
    this.held = held;
    const charge = this.call.charge!;
    void booking.then((credits) => {
      held.credits = credits ?? { charged: charge.charged, balance: charge.balance };
      this.release(controller);
    });
  }

  /**
   * Passes a held answer on once its booking is done and either all of it arrived or it outgrew
   * HELD_BYTES (then the rest streams, the upstream resumed). Until then the client has seen nothing.
   */
  private release(controller: Dispatcher.DispatchController): void {
    const held = this.held;
    if (!held?.credits || (!held.complete && held.size < HELD_BYTES)) return;
    this.held = undefined;
    this.call.onAnswer?.();
    writeAnswerHead(this.call.request, held.statusCode, held.headers, held.credits);
    const { res } = this.call.request;
    if (held.complete) {
      res.end(Buffer.concat(held.chunks));
      this.call.done();
      return;
    }
    for (const chunk of held.chunks) res.write(chunk);
    if (res.writableNeedDrain) res.once('drain', () => controller.resume());
    else controller.resume();
  }

  /** After a failed upstream call: what is left to tell the client (a 502, 504 or 499 problem), refunded when charged. */
  private async failed(error: Error): Promise<void> {
    const { abandoned, deps } = this;
    const { request, upstream, user, charge } = this.call;
    const { res } = request;
    if (this.answered && !this.held) {
      // The head is out: all that is left is to cut the response short, and to refund what was not
      // delivered. An event stream delivered only if its `done` passed; another answer unless the
      // upstream broke it off (a client that leaves it midway was being given work already done).
      const undelivered = this.events ? this.events.outcome !== 'done' : !abandoned;
      if (charge && undelivered)
        await charge.refund(
          this.cutOff ? 'the call outlived CHARGED_CALL_MAX_MS' : abandoned ? 'the client went away before the stream was done' : 'upstream stream failed',
        );
      else charge?.deliver();
      deps.logger.debug({ err: error, upstream }, 'proxied stream ended early');
      res.destroy();
      return;
    }
    // The client has seen nothing (no answer yet, or one held back): it gets a problem, refunded.
    if (!this.answered) deps.metrics.upstreamDuration.series(upstream, 'error').observe((performance.now() - this.started) / 1000);
    this.held = undefined;
    const refunded = charge ? await charge.refund(abandoned ? 'client went away' : 'upstream unavailable') : undefined;
    const creditHeaders: Record<string, string> = user ? { 'X-Credits-Charged': '0', 'X-Balance-After': String(refunded ?? this.balance) } : {};
    if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
      throw new Problem(504, `the ${upstream} service did not answer within ${Math.round(this.call.headersTimeout / 1000)} s`, { headers: creditHeaders });
    }
    if (this.cutOff)
      throw new Problem(504, `the ${upstream} service did not finish within ${Math.round(deps.chargedCallMaxMs / 1000)} s`, { headers: creditHeaders });
    // Also a client gone while the request waited in the gateway (e.g. during a shutdown's drain).
    if (abandoned || res.destroyed) {
      deps.logger.debug({ upstream }, 'client went away before the upstream answered');
      throw new Problem(499 as number, 'the client closed the request');
    }
    deps.logger.warn({ err: error, upstream }, 'upstream unreachable');
    throw new Problem(502, `the ${upstream} service could not be reached`, { headers: creditHeaders });
  }
}
