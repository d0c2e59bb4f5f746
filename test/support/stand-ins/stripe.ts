/**
 * A local stand-in for Stripe: the REST calls billing makes (Checkout Sessions, subscriptions read,
 * updated and cancelled, customer-portal sessions, invoice payments), form-encoded in and JSON out as
 * Stripe's API is, with Stripe's error shape and idempotency keys; and the webhook side, events signed
 * as Stripe signs them (`t=…,v1=…`, one v1 per secret) and POSTed to a webhook URL, one at a time in
 * the order they happened (an API call's after its answer, as Stripe sends them). What a buyer or Stripe's dashboard would do (pay a session, renew, fail a
 * renewal, cancel, refund, dispute) is under /_stand_in/. Tests start it in-process; `npm start` can run
 * it standalone for development:
 *
 *   STRIPE_STAND_IN_PORT=12111 STRIPE_WEBHOOK_URL=http://127.0.0.1:8085/api/v1/billing/webhooks/stripe \
 *   STRIPE_WEBHOOK_SECRET=whsec_dev node test/support/stand-ins/stripe.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import qs from 'qs';
import Stripe from 'stripe';

type StripeObject = Record<string, any>;

export interface StripeEvent {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  livemode: false;
  pending_webhooks: number;
  type: string;
  data: { object: StripeObject; previous_attributes?: StripeObject };
}

export interface Delivery {
  event: string;
  type: string;
  status: number | 'error';
  attempt: number;
}

export interface StandInOptions {
  port?: number;
  host?: string;
  /** Where events go; unset: recorded only (a test delivers them itself). */
  webhookUrl?: string;
  /** Signing secrets: every one signs (as Stripe does while a secret is rolled). */
  webhookSecrets: string[];
  /** The API key callers must present; unset: any `sk_test_` key. */
  secretKey?: string;
  /** Delivery attempts per event before giving up (Stripe retries for days; a stand-in, briefly). */
  attempts?: number;
  retryDelayMs?: number;
}

export interface StripeStandIn {
  url: string;
  events: StripeEvent[];
  deliveries: Delivery[];
  /** Pays a Checkout Session as a buyer would; resolves once its events were delivered. */
  pay(sessionId: string): Promise<StripeEvent[]>;
  /** Runs one of the /_stand_in/ actions in-process. */
  act(action: string, id: string, body?: StripeObject): Promise<StripeEvent[]>;
  /** Where events go from now on (undefined: nowhere, as when an endpoint is disabled). */
  setWebhookUrl(url: string | undefined): void;
  /** Resolves once every event so far was delivered (or given up on). */
  idle(): Promise<void>;
  /** While on, the API cannot be reached: every connection to /v1/ is cut before an answer. */
  setOutage(on: boolean): void;
  close(): Promise<void>;
}

const now = () => Math.floor(Date.now() / 1000);
const newId = (prefix: string) => `${prefix}_test_${randomBytes(12).toString('hex')}`;
const MONTH = 30 * 86_400;

/** The Stripe-Signature for `payload` at `timestamp`, one v1 per secret (the stripe package's own signer). */
export function signatureFor(payload: string, secrets: string[], timestamp = now()): string {
  const signatures = secrets.map(
    (secret) =>
      Stripe.webhooks
        .generateTestHeaderString({ payload, secret, timestamp })
        .split(',')
        .find((part) => part.startsWith('v1='))!,
  );
  return [`t=${timestamp}`, ...signatures].join(',');
}

/** An event as Stripe builds them. */
export function stripeEvent(type: string, object: StripeObject, created = now(), previous?: StripeObject): StripeEvent {
  return {
    id: newId('evt'),
    object: 'event',
    api_version: Stripe.API_VERSION,
    created,
    livemode: false,
    pending_webhooks: 1,
    type,
    data: { object, ...(previous ? { previous_attributes: previous } : {}) },
  };
}

/** A paid Checkout Session for a pack (the starter by default), as `checkout.session.completed` carries it. */
export function paidPackSession(userId: string, fields: Record<string, unknown> = {}): StripeObject {
  return {
    id: newId('cs'),
    object: 'checkout.session',
    mode: 'payment',
    status: 'complete',
    payment_status: 'paid',
    payment_intent: newId('pi'),
    subscription: null,
    customer: null,
    client_reference_id: userId,
    metadata: { user_id: userId, pack_id: 'starter' },
    amount_total: 499,
    currency: 'usd',
    ...fields,
  };
}

class StripeError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | undefined;
  constructor(status: number, type: string, message: string, code?: string) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
  }
}

const missing = (what: string, id: string) => new StripeError(404, 'invalid_request_error', `No such ${what}: '${id}'`, 'resource_missing');

export async function startStripeStandIn(options: StandInOptions): Promise<StripeStandIn> {
  const sessions = new Map<string, StripeObject>();
  const subscriptions = new Map<string, StripeObject>();
  const invoices = new Map<string, StripeObject>();
  const charges = new Map<string, StripeObject>();
  const disputes = new Map<string, StripeObject>();
  const portalSessions = new Map<string, StripeObject>();
  const invoicePayments: StripeObject[] = [];
  const idempotent = new Map<string, { status: number; body: string }>();
  const events: StripeEvent[] = [];
  const deliveries: Delivery[] = [];
  const attempts = options.attempts ?? 3;
  const retryDelayMs = options.retryDelayMs ?? 500;
  let base = '';
  let outage = false;
  /** Deliveries in the order their events happened, one at a time. */
  let queue: Promise<unknown> = Promise.resolve();

  async function deliver(event: StripeEvent): Promise<void> {
    events.push(event);
    if (!options.webhookUrl) return;
    const payload = JSON.stringify(event, null, 2);
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      let status: number | 'error';
      try {
        const response = await fetch(options.webhookUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'stripe-signature': signatureFor(payload, options.webhookSecrets),
            'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
          },
          body: payload,
        });
        await response.arrayBuffer();
        status = response.status;
      } catch {
        status = 'error';
      }
      deliveries.push({ event: event.id, type: event.type, status, attempt });
      if (typeof status === 'number' && status >= 200 && status < 300) return;
      if (attempt < attempts) await new Promise((resolve) => setTimeout(resolve, retryDelayMs * 2 ** (attempt - 1)));
    }
  }

  /** Queues the events' deliveries; resolves once they are done. An API call does not wait for it: Stripe answers first. */
  function emit(...list: StripeEvent[]): Promise<StripeEvent[]> {
    const done = queue.then(async () => {
      for (const event of list) await deliver(event);
      return list;
    });
    queue = done;
    return done;
  }

  function paidCharge(amount: number, currency: string, metadata: StripeObject): { paymentIntent: string; charge: StripeObject } {
    const paymentIntent = newId('pi');
    const charge = {
      id: newId('ch'),
      object: 'charge',
      amount,
      amount_captured: amount,
      amount_refunded: 0,
      currency,
      paid: true,
      refunded: false,
      disputed: false,
      status: 'succeeded',
      payment_intent: paymentIntent,
      metadata,
      created: now(),
      livemode: false,
    };
    charges.set(paymentIntent, charge);
    return { paymentIntent, charge };
  }

  function subscriptionInvoice(subscription: StripeObject, reason: string): StripeObject {
    const item = subscription.items.data[0];
    const amount = item.price.unit_amount as number;
    const invoice = {
      id: newId('in'),
      object: 'invoice',
      billing_reason: reason,
      status: 'paid',
      amount_due: amount,
      amount_paid: amount,
      currency: item.price.currency,
      customer: subscription.customer,
      created: now(),
      livemode: false,
      parent: { type: 'subscription_details', quote_details: null, subscription_details: { subscription: subscription.id, metadata: subscription.metadata } },
      lines: {
        object: 'list',
        data: [{ id: newId('il'), amount, currency: item.price.currency, period: { start: item.current_period_start, end: item.current_period_end } }],
        has_more: false,
      },
    };
    invoices.set(invoice.id, invoice);
    return invoice;
  }

  function payInvoice(invoice: StripeObject): void {
    const { paymentIntent } = paidCharge(invoice.amount_paid, invoice.currency, {});
    invoicePayments.push({
      id: newId('inpay'),
      object: 'invoice_payment',
      amount_paid: invoice.amount_paid,
      amount_requested: invoice.amount_due,
      currency: invoice.currency,
      invoice: invoice.id,
      is_default: true,
      livemode: false,
      status: 'paid',
      payment: { type: 'payment_intent', payment_intent: paymentIntent },
      created: now(),
    });
  }

  /** A copy, so later changes to the stored object do not reach events already built. */
  const snapshot = (object: StripeObject) => structuredClone(object);

  const actions: Record<string, (id: string, body: StripeObject) => Promise<StripeEvent[]>> = {
    async pay(id) {
      const session = sessions.get(id);
      if (!session) throw missing('checkout.session', id);
      if (session.status !== 'open') throw new StripeError(400, 'invalid_request_error', `checkout session ${id} is ${session.status}`);
      session.status = 'complete';
      session.payment_status = 'paid';
      const line = session.line_items[0];
      if (session.mode === 'payment') {
        const { paymentIntent } = paidCharge(session.amount_total, session.currency, session.payment_intent_data?.metadata ?? {});
        session.payment_intent = paymentIntent;
        return emit(stripeEvent('checkout.session.completed', snapshot(session)));
      }
      const start = now();
      const subscription = {
        id: newId('sub'),
        object: 'subscription',
        status: 'active',
        customer: session.customer ?? newId('cus'),
        metadata: session.subscription_data?.metadata ?? {},
        cancel_at_period_end: false,
        created: start,
        livemode: false,
        items: {
          object: 'list',
          data: [
            { id: newId('si'), object: 'subscription_item', price: line.price, quantity: 1, current_period_start: start, current_period_end: start + MONTH },
          ],
          has_more: false,
        },
      } as StripeObject;
      subscriptions.set(subscription.id, subscription);
      session.subscription = subscription.id;
      session.customer = subscription.customer;
      const invoice = subscriptionInvoice(subscription, 'subscription_create');
      payInvoice(invoice);
      subscription.latest_invoice = invoice.id;
      return emit(
        stripeEvent('customer.subscription.created', snapshot(subscription)),
        stripeEvent('checkout.session.completed', snapshot(session)),
        stripeEvent('invoice.paid', snapshot(invoice)),
      );
    },
    async renew(id) {
      const subscription = subscriptions.get(id);
      if (!subscription) throw missing('subscription', id);
      const item = subscription.items.data[0];
      item.current_period_start = item.current_period_end;
      item.current_period_end += MONTH;
      subscription.status = 'active';
      const invoice = subscriptionInvoice(subscription, 'subscription_cycle');
      payInvoice(invoice);
      return emit(stripeEvent('customer.subscription.updated', snapshot(subscription)), stripeEvent('invoice.paid', snapshot(invoice)));
    },
    async fail_payment(id) {
      const subscription = subscriptions.get(id);
      if (!subscription) throw missing('subscription', id);
      subscription.status = 'past_due';
      const invoice: StripeObject = { ...subscriptionInvoice(subscription, 'subscription_cycle'), status: 'open', amount_paid: 0 };
      invoices.set(invoice.id, invoice);
      return emit(stripeEvent('invoice.payment_failed', snapshot(invoice)), stripeEvent('customer.subscription.updated', snapshot(subscription)));
    },
    async cancel(id) {
      return emit(cancelSubscription(id));
    },
    async change_price(id, body) {
      const subscription = subscriptions.get(id);
      if (!subscription) throw missing('subscription', id);
      subscription.items.data[0].price = {
        ...subscription.items.data[0].price,
        id: String(body.price),
        unit_amount: Number(body.unit_amount ?? subscription.items.data[0].price.unit_amount),
      };
      return emit(stripeEvent('customer.subscription.updated', snapshot(subscription)));
    },
    async refund(paymentIntent, body) {
      const charge = charges.get(paymentIntent);
      if (!charge) throw missing('payment_intent', paymentIntent);
      const amount = body.amount === undefined ? charge.amount - charge.amount_refunded : Number(body.amount);
      charge.amount_refunded = Math.min(charge.amount, charge.amount_refunded + amount);
      charge.refunded = charge.amount_refunded === charge.amount;
      return emit(stripeEvent('charge.refunded', snapshot(charge)));
    },
    async dispute(paymentIntent) {
      const charge = charges.get(paymentIntent);
      if (!charge) throw missing('payment_intent', paymentIntent);
      charge.disputed = true;
      const dispute = {
        id: newId('dp'),
        object: 'dispute',
        amount: charge.amount,
        currency: charge.currency,
        charge: charge.id,
        payment_intent: paymentIntent,
        status: 'needs_response',
        reason: 'fraudulent',
        created: now(),
        livemode: false,
      };
      disputes.set(dispute.id, dispute);
      return emit(stripeEvent('charge.dispute.created', snapshot(dispute)));
    },
    async close_dispute(id, body) {
      const dispute = disputes.get(id);
      if (!dispute) throw missing('dispute', id);
      dispute.status = String(body.status ?? 'won');
      return emit(stripeEvent('charge.dispute.closed', snapshot(dispute)));
    },
  };

  /** Ends a subscription now (the dashboard's cancel, the API's DELETE): its customer.subscription.deleted event. */
  function cancelSubscription(id: string): StripeEvent {
    const subscription = subscriptions.get(id);
    if (!subscription) throw missing('subscription', id);
    if (subscription.status === 'canceled') throw new StripeError(400, 'invalid_request_error', `This subscription is already canceled: ${id}`);
    subscription.status = 'canceled';
    subscription.canceled_at = subscription.ended_at = now();
    return stripeEvent('customer.subscription.deleted', snapshot(subscription));
  }

  /** A subscription update; what billing sends is `cancel_at_period_end` (a cancel, or its undoing). */
  function updateSubscription(id: string, params: StripeObject): { subscription: StripeObject; event: StripeEvent | undefined } {
    const subscription = subscriptions.get(id);
    if (!subscription) throw missing('subscription', id);
    if (subscription.status === 'canceled')
      throw new StripeError(400, 'invalid_request_error', 'A canceled subscription can only update its cancellation_details and metadata.');
    const previous: StripeObject = {};
    if (params.cancel_at_period_end !== undefined) {
      if (params.cancel_at_period_end !== 'true' && params.cancel_at_period_end !== 'false')
        throw new StripeError(400, 'invalid_request_error', 'Invalid boolean: cancel_at_period_end', 'parameter_invalid_boolean');
      const cancel = params.cancel_at_period_end === 'true';
      if (cancel !== subscription.cancel_at_period_end) {
        Object.assign(previous, { cancel_at_period_end: subscription.cancel_at_period_end, cancel_at: subscription.cancel_at ?? null });
        subscription.cancel_at_period_end = cancel;
        subscription.cancel_at = cancel ? subscription.items.data[0].current_period_end : null;
      }
    }
    // Stripe sends an event only when something changed.
    const event = Object.keys(previous).length > 0 ? stripeEvent('customer.subscription.updated', snapshot(subscription), now(), previous) : undefined;
    return { subscription, event };
  }

  /** A customer-portal session, for a customer of one of the stand-in's subscriptions. */
  function createPortalSession(params: StripeObject): StripeObject {
    if (!params.customer) throw new StripeError(400, 'invalid_request_error', 'Missing required param: customer.', 'parameter_missing');
    if (![...subscriptions.values()].some((subscription) => subscription.customer === params.customer)) throw missing('customer', String(params.customer));
    const id = newId('bps');
    const session = {
      id,
      object: 'billing_portal.session',
      customer: params.customer,
      return_url: params.return_url ?? null,
      url: `${base}/billing_portal/${id}`,
      created: now(),
      livemode: false,
    };
    portalSessions.set(id, session);
    return session;
  }

  /** Checkout Session creation: line items with a price id or inline price data, as billing sends them. */
  function createSession(params: StripeObject): StripeObject {
    const mode = params.mode;
    if (mode !== 'payment' && mode !== 'subscription')
      throw new StripeError(400, 'invalid_request_error', 'mode must be payment or subscription', 'parameter_invalid_empty');
    if (!params.success_url) throw new StripeError(400, 'invalid_request_error', 'Missing required param: success_url.', 'parameter_missing');
    const items = params.line_items as StripeObject[] | undefined;
    if (!Array.isArray(items) || items.length === 0)
      throw new StripeError(400, 'invalid_request_error', 'Missing required param: line_items.', 'parameter_missing');
    const line_items = items.map((item) => {
      const data = item.price_data;
      if (!data) throw new StripeError(400, 'invalid_request_error', `No such price: '${item.price}'`, 'resource_missing');
      const recurring = data.recurring ? { interval: data.recurring.interval, interval_count: 1 } : null;
      if ((mode === 'subscription') !== Boolean(recurring))
        throw new StripeError(400, 'invalid_request_error', `${mode} mode needs ${mode === 'subscription' ? 'recurring' : 'one-time'} prices`);
      const price = {
        id: newId('price'),
        object: 'price',
        currency: data.currency,
        unit_amount: Number(data.unit_amount),
        recurring,
        product: newId('prod'),
        metadata: {},
      };
      return { price, quantity: Number(item.quantity ?? 1) };
    });
    const id = newId('cs');
    const session = {
      id,
      object: 'checkout.session',
      mode,
      status: 'open',
      payment_status: 'unpaid',
      url: `${base}/checkout/${id}`,
      success_url: params.success_url,
      cancel_url: params.cancel_url ?? null,
      client_reference_id: params.client_reference_id ?? null,
      customer: params.customer ?? null,
      metadata: params.metadata ?? {},
      amount_total: line_items.reduce((sum, item) => sum + item.price.unit_amount * item.quantity, 0),
      currency: line_items[0]!.price.currency,
      payment_intent: null,
      subscription: null,
      expires_at: now() + 86_400,
      created: now(),
      livemode: false,
      payment_intent_data: params.payment_intent_data ?? null,
      subscription_data: params.subscription_data ?? null,
      line_items,
    };
    sessions.set(id, session);
    return session;
  }

  /** What a session looks like through the API (Stripe does not echo the creation-only parameters). */
  const sessionView = (session: StripeObject) => {
    const { payment_intent_data: _pi, subscription_data: _sub, line_items: _items, ...view } = session;
    return view;
  };

  async function api(method: string, path: string, params: StripeObject): Promise<StripeObject> {
    let match: RegExpMatchArray | null;
    if (method === 'POST' && path === '/v1/checkout/sessions') return sessionView(createSession(params));
    if (method === 'GET' && (match = path.match(/^\/v1\/checkout\/sessions\/([^/]+)$/))) {
      const session = sessions.get(match[1]!);
      if (!session) throw missing('checkout.session', match[1]!);
      return sessionView(session);
    }
    if (method === 'GET' && (match = path.match(/^\/v1\/subscriptions\/([^/]+)$/))) {
      const subscription = subscriptions.get(match[1]!);
      if (!subscription) throw missing('subscription', match[1]!);
      return subscription;
    }
    if (method === 'POST' && (match = path.match(/^\/v1\/subscriptions\/([^/]+)$/))) {
      const { subscription, event } = updateSubscription(match[1]!, params);
      if (event) void emit(event);
      return snapshot(subscription);
    }
    if (method === 'DELETE' && (match = path.match(/^\/v1\/subscriptions\/([^/]+)$/))) {
      const event = cancelSubscription(match[1]!);
      void emit(event);
      return event.data.object;
    }
    if (method === 'POST' && path === '/v1/billing_portal/sessions') return createPortalSession(params);
    if (method === 'GET' && path === '/v1/invoice_payments') {
      const data = invoicePayments.filter(
        (payment) =>
          (!params.invoice || payment.invoice === params.invoice) &&
          (!params.payment?.payment_intent || payment.payment.payment_intent === params.payment.payment_intent),
      );
      return { object: 'list', url: '/v1/invoice_payments', has_more: false, data: data.slice(0, Number(params.limit ?? 10)) };
    }
    throw new StripeError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}).`);
  }

  const readBody = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };

  const send = (res: ServerResponse, status: number, body: unknown, type = 'application/json') => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': type, 'request-id': newId('req'), 'stripe-version': Stripe.API_VERSION });
    res.end(text);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const method = req.method ?? 'GET';
    const text = await readBody(req);
    try {
      if (url.pathname.startsWith('/v1/')) {
        if (outage) return void req.socket.destroy();
        const key = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
        if (!key || (options.secretKey ? key !== options.secretKey : !key.startsWith('sk_test_'))) {
          throw new StripeError(401, 'invalid_request_error', `Invalid API Key provided: ${key ? `${key.slice(0, 8)}…` : '(none)'}`);
        }
        const idempotencyKey = req.headers['idempotency-key'];
        const cacheKey = typeof idempotencyKey === 'string' && method === 'POST' ? `${key}:${idempotencyKey}` : undefined;
        const cached = cacheKey ? idempotent.get(cacheKey) : undefined;
        if (cached) return send(res, cached.status, cached.body);
        const params = qs.parse(method === 'GET' || method === 'DELETE' ? url.search.slice(1) || text : text, { depth: 10, arrayLimit: 100 }) as StripeObject;
        const body = JSON.stringify(await api(method, url.pathname, params));
        if (cacheKey) idempotent.set(cacheKey, { status: 200, body });
        return send(res, 200, body);
      }
      let match: RegExpMatchArray | null;
      if (method === 'GET' && (match = url.pathname.match(/^\/checkout\/([^/]+)$/))) {
        const session = sessions.get(match[1]!);
        if (!session) throw missing('checkout.session', match[1]!);
        const price = `${(session.amount_total / 100).toFixed(2)} ${String(session.currency).toUpperCase()}`;
        return send(
          res,
          200,
          `<!doctype html><title>Stripe stand-in checkout</title><h1>Pay ${price}</h1><p>${session.mode} for ${session.metadata.pack_id ?? session.metadata.plan_id ?? ''}</p><form method="post" action="/checkout/${session.id}/pay"><button>Pay</button></form>`,
          'text/html',
        );
      }
      if (method === 'POST' && (match = url.pathname.match(/^\/checkout\/([^/]+)\/pay$/))) {
        await actions.pay!(match[1]!, {});
        res.writeHead(303, { location: String(sessions.get(match[1]!)!.success_url).replace('{CHECKOUT_SESSION_ID}', match[1]!) });
        return void res.end();
      }
      if (method === 'GET' && (match = url.pathname.match(/^\/billing_portal\/([^/]+)$/))) {
        const session = portalSessions.get(match[1]!);
        if (!session) throw missing('billing_portal.session', match[1]!);
        return send(
          res,
          200,
          `<!doctype html><title>Stripe stand-in customer portal</title><h1>Customer portal</h1><p>${session.customer}</p><a href="${session.return_url ?? '/'}">Return</a>`,
          'text/html',
        );
      }
      if (method === 'GET' && url.pathname === '/_stand_in/events') return send(res, 200, { events, deliveries });
      if (method === 'POST' && (match = url.pathname.match(/^\/_stand_in\/(\w+)\/([^/]+)$/)) && actions[match[1]!]) {
        const body = text ? (JSON.parse(text) as StripeObject) : {};
        return send(res, 200, { events: await actions[match[1]!]!(match[2]!, body) });
      }
      throw new StripeError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${url.pathname}).`);
    } catch (error) {
      if (error instanceof StripeError)
        return send(res, error.status, { error: { type: error.type, message: error.message, ...(error.code ? { code: error.code } : {}) } });
      return send(res, 500, { error: { type: 'api_error', message: (error as Error).message } });
    }
  }

  const server: Server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  base = `http://${options.host ?? '127.0.0.1'}:${address.port}`;
  return {
    url: base,
    events,
    deliveries,
    pay: (sessionId) => actions.pay!(sessionId, {}),
    act: (action, id, body = {}) => actions[action]!(id, body),
    setWebhookUrl: (url) => {
      options.webhookUrl = url;
    },
    idle: () => queue.then(() => undefined),
    setOutage: (on) => {
      outage = on;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.STRIPE_STAND_IN_PORT ?? 12111);
  const secrets = (process.env.STRIPE_WEBHOOK_SECRET ?? 'whsec_dev_stand_in')
    .split(',')
    .map((secret) => secret.trim())
    .filter(Boolean);
  const standIn = await startStripeStandIn({
    port,
    webhookUrl: process.env.STRIPE_WEBHOOK_URL,
    webhookSecrets: secrets,
    ...(process.env.STRIPE_SECRET_KEY ? { secretKey: process.env.STRIPE_SECRET_KEY } : {}),
  });
  console.log(`Stripe stand-in at ${standIn.url}: events to ${process.env.STRIPE_WEBHOOK_URL ?? '(nowhere: set STRIPE_WEBHOOK_URL)'}`);
  const stop = () => void standIn.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
