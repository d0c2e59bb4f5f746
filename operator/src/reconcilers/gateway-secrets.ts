// The Secrets a TemporaGateway names but the operator does not make (its Ingress's TLS certificate, the keys,
// providers and billing settings, the database, Redis and callback keys): whether each exists with the keys
// the platform reads from it, and when the certificate expires. Both are exported as gauges for the alerts
// TemporaSecretMissing and TemporaCertificateExpiringSoon, and what is missing also becomes the TemporaGateway's
// Degraded condition.
//
// Each Secret is read with a `get` when its TemporaGateway is reconciled, not watched: a watch would keep every
// Secret of the cluster (and their values) in the operator's memory. A TemporaGateway with a problem is
// reconciled again every SECRET_RECHECK_MS, so a Secret created or fixed shows within a minute; a renewed
// certificate shows at the next resync (RESYNC_SECONDS), which is ample against alerts counted in days.
import { X509Certificate } from 'node:crypto';
import type { Logger } from 'pino';
import type { TemporaGateway } from '../api/v1alpha1/index.ts';
import { isNotFound, type KubeClient } from '../kube/client.ts';
import { objectKey, type Secret } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import type { OperatorMetrics } from '../metrics.ts';
import { GENERATE_ANNOTATION, GENERATED_SECRET_SELECTOR, isGenerated, planGeneration } from './generated-secrets.ts';

/** How soon a TemporaGateway whose Secrets have a problem is looked at again. */
export const SECRET_RECHECK_MS = 60_000;

export interface Reference {
  /** The spec field naming the Secret, for the condition's message. */
  field: string;
  secret: string;
  /** Keys the pods (or the Ingress controller) read one by one: without them nothing starts or serves. */
  keys: string[];
  /** `tls.crt` must hold a certificate (an Ingress's TLS Secret). */
  certificate?: boolean;
}

/**
 * Every Secret the TemporaGateway names, with the keys read from it. A Secret passed whole (`envFrom`) needs no
 * particular key, but a missing one keeps the pods from starting all the same.
 */
export function referencedSecrets(gw: TemporaGateway): Reference[] {
  const { spec } = gw;
  const refs: Reference[] = [];
  if (spec.ingress?.tlsSecretName)
    refs.push({ field: 'spec.ingress.tlsSecretName', secret: spec.ingress.tlsSecretName, keys: ['tls.crt', 'tls.key'], certificate: true });
  for (const name of ['keys', 'providers', 'billing'] as const) {
    const secret = spec.secrets?.[name];
    if (secret) refs.push({ field: `spec.secrets.${name}`, secret, keys: [] });
  }
  if (spec.database) refs.push({ field: 'spec.database', secret: spec.database.secretName, keys: [spec.database.key] });
  if (spec.redis) refs.push({ field: 'spec.redis', secret: spec.redis.secretName, keys: [spec.redis.key] });
  const callback = spec.generation?.callbackSecret;
  if (callback) refs.push({ field: 'spec.generation.callbackSecret', secret: callback.secretName, keys: [callback.key] });
  return refs;
}

/**
 * What is wrong with one Secret: one phrase per problem, empty when it serves every reference to it. Keys
 * the operator is to generate (generated-secrets.ts) are reported as awaited, not as missing: the operator
 * fills them within moments, and their Secret's change reconciles the TemporaGateway again. Keys it cannot make
 * are reported with the reason.
 */
export function problemsOf(name: string, refs: Reference[], secret: Secret | undefined): string[] {
  const fields = refs.map((r) => r.field).join(', ');
  if (!secret) return [`Secret ${name} (${fields}) does not exist`];
  const data = secret.data ?? {};
  const problems: string[] = [];
  const plan = planGeneration(secret);
  const generated = new Set(plan.fill);
  if (plan.fill.length > 0 && isGenerated(secret)) problems.push(`Secret ${name} (${fields}) awaits the operator's generation of ${plan.fill.join(', ')}`);
  else if (plan.fill.length > 0)
    problems.push(
      `Secret ${name} (${fields}) asks for ${plan.fill.join(', ')} in ${GENERATE_ANNOTATION} but lacks the label ${GENERATED_SECRET_SELECTOR}, so nothing generates them`,
    );
  if (plan.problems.length > 0 && isGenerated(secret)) problems.push(`Secret ${name} (${fields}): cannot generate ${plan.problems.join('; ')}`);
  const missing = [...new Set(refs.flatMap((r) => r.keys))].filter((key) => !data[key] && !generated.has(key));
  if (missing.length > 0) problems.push(`Secret ${name} (${fields}) has no ${missing.join(', ')}`);
  if (refs.some((r) => r.certificate) && data['tls.crt'] && !certificateExpiry(data['tls.crt'])) {
    problems.push(`Secret ${name} (${fields}): tls.crt holds no PEM certificate`);
  }
  return problems;
}

/** When the first (the server's own) certificate of a base64-encoded PEM chain expires, or undefined when there is none. */
function certificateExpiry(encoded: string): Date | undefined {
  try {
    return new X509Certificate(Buffer.from(encoded, 'base64')).validToDate;
  } catch {
    return undefined;
  }
}

type Labels = { namespace: string; gateway: string; secret: string };

/** Checks a TemporaGateway's Secrets and keeps the two gauges to what was last seen, for Gateways that exist. */
export class GatewaySecrets {
  readonly #client: KubeClient;
  readonly #metrics: OperatorMetrics;
  readonly #log: Logger;
  readonly #exists: (namespace: string, gateway: string) => boolean;
  /** The label sets each TemporaGateway has series under, by `namespace/name`, so that a dropped reference drops its series. */
  readonly #series = new Map<string, { secrets: Labels[]; certificates: Labels[] }>();

  /** `exists`: whether the TemporaGateway is still in the informer's cache. */
  constructor(client: KubeClient, metrics: OperatorMetrics, log: Logger, exists: (namespace: string, gateway: string) => boolean) {
    this.#client = client;
    this.#metrics = metrics;
    this.#log = log;
    this.#exists = exists;
  }

  /**
   * Reads the Secrets the TemporaGateway names, updates the gauges, and says what is missing (for the Degraded
   * condition). A Secret that cannot be read for another reason than its absence (the API server busy,
   * RBAC) keeps the series it had and is not reported: the next reconcile reads it again.
   */
  async check(gw: TemporaGateway): Promise<string[]> {
    const namespace = gw.metadata.namespace ?? 'default';
    const gateway = gw.metadata.name;
    const bySecret = new Map<string, Reference[]>();
    for (const ref of referencedSecrets(gw)) bySecret.set(ref.secret, [...(bySecret.get(ref.secret) ?? []), ref]);
    const before = this.#series.get(objectKey(namespace, gateway)) ?? { secrets: [], certificates: [] };
    const after: { secrets: Labels[]; certificates: Labels[] } = { secrets: [], certificates: [] };
    // One list per Secret, in the order the spec names them, whatever order the reads end in: the
    // condition's message stays the same from one reconcile to the next.
    const problems = await Promise.all(
      [...bySecret].map(async ([secret, refs]) => {
        const labels = { namespace, gateway, secret };
        let found: Secret | undefined;
        try {
          found = await this.#client.get(R.Secret, namespace, secret);
        } catch (err) {
          if (!isNotFound(err)) {
            this.#log.warn(
              { gateway: objectKey(namespace, gateway), secret, err: String(err) },
              'cannot read a Secret the TemporaGateway names; keeping what was last seen',
            );
            after.secrets.push(...before.secrets.filter((l) => l.secret === secret));
            after.certificates.push(...before.certificates.filter((l) => l.secret === secret));
            return [];
          }
        }
        const problems = problemsOf(secret, refs, found);
        this.#metrics.secretMissing.set(labels, problems.length > 0 ? 1 : 0);
        after.secrets.push(labels);
        const certificate = found?.data?.['tls.crt'];
        const expiry = refs.some((r) => r.certificate) && certificate ? certificateExpiry(certificate) : undefined;
        if (expiry) {
          this.#metrics.certificateExpiry.set(labels, expiry.getTime() / 1000);
          after.certificates.push(labels);
        }
        return problems;
      }),
    );
    // Deleted while its Secrets were read: forget() has run already and would not run again for these series.
    if (!this.#exists(namespace, gateway)) {
      this.#drop(after, { secrets: [], certificates: [] });
      this.#drop(before, { secrets: [], certificates: [] });
      this.#series.delete(objectKey(namespace, gateway));
      return [];
    }
    this.#drop(before, after);
    this.#series.set(objectKey(namespace, gateway), after);
    return problems.flat();
  }

  /** A TemporaGateway deleted: its series go with it. */
  forget(namespace: string | undefined, gateway: string): void {
    const key = objectKey(namespace, gateway);
    const before = this.#series.get(key);
    if (before) this.#drop(before, { secrets: [], certificates: [] });
    this.#series.delete(key);
  }

  /** Leadership lost: only the leader reads Secrets, so a stand-by's series would only grow stale. */
  forgetAll(): void {
    this.#metrics.secretMissing.reset();
    this.#metrics.certificateExpiry.reset();
    this.#series.clear();
  }

  #drop(before: { secrets: Labels[]; certificates: Labels[] }, after: { secrets: Labels[]; certificates: Labels[] }): void {
    const kept = (list: Labels[], l: Labels) => list.some((k) => k.secret === l.secret);
    for (const l of before.secrets) if (!kept(after.secrets, l)) this.#metrics.secretMissing.remove(l);
    for (const l of before.certificates) if (!kept(after.certificates, l)) this.#metrics.certificateExpiry.remove(l);
  }
}
