import { ofComponents } from '../components.ts';
import type { AlertRule, Runbook } from './types.ts';

const OPERATOR = ofComponents('operator');

export const operatorReconcileErrors: AlertRule = {
  alert: 'TemporaOperatorReconcileErrors',
  expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{${OPERATOR}}[5m])) > 0`,
  for: '15m',
  severity: 'warning',
  summary: 'The operator keeps failing to reconcile.',
  description: 'The {{ $labels.controller }} controller has failed reconciles for 15 minutes.',
  runbook: {
    meaning: 'Reconciles of a kind of custom resource fail and are retried with back-off.',
    impact: 'Changes to those resources are not applied; what runs keeps running.',
    diagnosis: ['`kubectl describe` the custom resources of that kind: their conditions and Events say why.', "The operator's logs for the failing key."],
    mitigation: ["Fix the resource (an invalid value, a missing Secret) or the operator's RBAC if it is refused."],
  },
  tests: [
    {
      name: 'errors for twenty minutes',
      input: [{ series: 'controller_runtime_reconcile_errors_total{tempora_component="operator", controller="temporagateway"}', values: '0+1x30' }],
      at: '25m',
      fires: [{ controller: 'temporagateway' }],
    },
    {
      name: 'no errors',
      input: [{ series: 'controller_runtime_reconcile_errors_total{tempora_component="operator", controller="temporagateway"}', values: '0x30' }],
      at: '25m',
      fires: [],
    },
  ],
};

export const operatorWorkQueueStuck: AlertRule = {
  alert: 'TemporaOperatorWorkQueueStuck',
  expr: `max by (name) (workqueue_depth{${OPERATOR}}) > 0 and sum by (name) (rate(workqueue_work_duration_seconds_count{${OPERATOR}}[10m])) == 0`,
  for: '15m',
  severity: 'critical',
  summary: 'An operator work queue holds keys that nobody works on.',
  description: 'The {{ $labels.name }} work queue has had keys waiting and no work done for 15 minutes.',
  runbook: {
    meaning: "Keys wait in the operator's work queue but no reconcile finishes: the workers are stuck, or no replica holds the leader lease.",
    impact: 'No change to any custom resource of that kind is applied.',
    diagnosis: [
      'Tempora / Operator: Leader (is any replica 1?), Work-queue depth, Reconcile duration.',
      "The operator's logs around the last finished reconcile.",
    ],
    mitigation: ['Restart the operator pods (`kubectl rollout restart deployment/tempora-operator`); the lease moves to a fresh replica.'],
  },
  tests: [
    {
      name: 'keys waiting, no work done',
      input: [
        { series: 'workqueue_depth{tempora_component="operator", name="gateway"}', values: '3x40' },
        { series: 'workqueue_work_duration_seconds_count{tempora_component="operator", name="gateway"}', values: '10x40' },
      ],
      at: '30m',
      fires: [{ name: 'gateway' }],
    },
    {
      name: 'keys waiting and being worked on',
      input: [
        { series: 'workqueue_depth{tempora_component="operator", name="gateway"}', values: '3x40' },
        { series: 'workqueue_work_duration_seconds_count{tempora_component="operator", name="gateway"}', values: '10+5x40' },
      ],
      at: '30m',
      fires: [],
    },
  ],
};

/**
 * TemporaCertificateExpiringSoon at two severities, as kube-prometheus's certificate alerts are: warning with
 * 3 to 14 days left, critical under 3 days or expired. The windows do not overlap, so one certificate fires
 * one of them at a time (and promtool, which compares every alert of a name, sees only the one a case expects).
 */
export function certificateAlerts(): AlertRule[] {
  const left = `max by (namespace, gateway, secret) (tempora_operator_certificate_expiry_timestamp_seconds{${OPERATOR}}) - time()`;
  const day = 86_400;
  const expiry = (seconds: number) => [
    {
      series: 'tempora_operator_certificate_expiry_timestamp_seconds{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
      values: `${seconds}x120`,
    },
  ];
  const labels = { namespace: 'prod', gateway: 'tempora', secret: 'tempora-tls' };
  const runbook: Runbook = {
    meaning:
      "The certificate in the Ingress TLS Secret of a TemporaGateway (`spec.ingress.tlsSecretName`, its `tls.crt`) expires in under 14 days (warning) or under 3 days, or has expired (critical). cert-manager renews a certificate a third of its lifetime before it expires (30 days for Let's Encrypt's 90), so a warning means its renewal is failing. A TLS Secret that is missing or holds no certificate has no expiry: TemporaSecretMissing fires for it instead.",
    impact: "Nothing until it expires; then browsers and API clients refuse the gateway's HTTPS, and every request through the Ingress fails.",
    diagnosis: [
      'Tempora / Operator, Certificate expiry: which TemporaGateway and Secret, how long is left.',
      "`kubectl get secret <secret> -n <namespace> -o jsonpath='{.data.tls\\.crt}' | base64 -d | openssl x509 -noout -subject -enddate`: the certificate the Ingress serves.",
      'With cert-manager: `kubectl describe certificate -n <namespace>` (Ready, Renewal Time), then its CertificateRequest, Order and Challenges (an ACME challenge the Ingress or DNS does not answer is the usual cause).',
    ],
    mitigation: [
      'Fix what stops the renewal, then renew: `cmctl renew <certificate> -n <namespace>`.',
      'Without cert-manager: replace the Secret with a new certificate and key (`kubectl create secret tls <secret> --cert=… --key=… --dry-run=client -o yaml | kubectl apply -f -`); the Ingress controller serves it without a restart.',
      'The operator reads the new expiry at its next resync (`RESYNC_SECONDS`, 10 minutes by default), and the alert resolves.',
    ],
  };
  const common = { alert: 'TemporaCertificateExpiringSoon', runbook };
  return [
    {
      ...common,
      expr: `${left} < 14 * ${day} and ${left} >= 3 * ${day}`,
      for: '1h',
      severity: 'warning',
      summary: "A TemporaGateway's TLS certificate expires within 14 days.",
      description:
        "The certificate in Secret {{ $labels.secret }} ({{ $labels.namespace }}), served by TemporaGateway {{ $labels.gateway }}'s Ingress, expires within 14 days: its renewal is not happening.",
      tests: [
        { name: 'ten days left', input: expiry(10 * day), at: '90m', fires: [labels] },
        { name: 'thirty days left', input: expiry(30 * day), at: '90m', fires: [] },
      ],
    },
    {
      ...common,
      expr: `${left} < 3 * ${day}`,
      for: '5m',
      severity: 'critical',
      summary: "A TemporaGateway's TLS certificate expires within 3 days, or has expired.",
      description:
        "The certificate in Secret {{ $labels.secret }} ({{ $labels.namespace }}), served by TemporaGateway {{ $labels.gateway }}'s Ingress, expires within 3 days or has expired: HTTPS clients will refuse the gateway.",
      tests: [
        { name: 'one day left', input: expiry(day), at: '30m', fires: [labels] },
        { name: 'expired', input: expiry(0), at: '30m', fires: [labels] },
        { name: 'expired, then renewed for thirty days', input: [{ ...expiry(0)[0]!, values: `0x10 ${30 * day}x110` }], at: '30m', fires: [] },
      ],
    },
  ];
}

export const secretMissing: AlertRule = {
  alert: 'TemporaSecretMissing',
  expr: `max by (namespace, gateway, secret) (tempora_operator_secret_missing{${OPERATOR}}) == 1`,
  for: '10m',
  severity: 'critical',
  summary: 'A Secret the platform needs is missing or incomplete.',
  description:
    'Secret {{ $labels.secret }} in {{ $labels.namespace }}, named by TemporaGateway {{ $labels.gateway }}, does not exist, lacks a key the platform reads from it, or (a TLS Secret) holds no certificate.',
  runbook: {
    meaning:
      "The operator reads every Secret a TemporaGateway names: the Ingress's TLS Secret (`tls.crt` holding a certificate, `tls.key`), the keys, providers and billing Secrets (passed whole to the pods), and the database, Redis and callback keys (`spec.database`, `spec.redis`, `spec.generation.callbackSecret`: the key they name). One of them has been missing, or without what is read from it, for 10 minutes.",
    impact:
      'A TLS Secret: the Ingress controller serves its own default certificate, which browsers and API clients refuse. Any other: pods that start now (a rollout, a rescheduled or restarted pod) wait in `CreateContainerConfigError`, and the pods still running lose their service when they go.',
    diagnosis: [
      '`kubectl describe gateway <gateway> -n <namespace>`: the Degraded condition (reason SecretMissing) names each Secret, the spec field that names it, and the key it lacks; the Events show when it started.',
      "`kubectl get secret <secret> -n <namespace> -o jsonpath='{.data}'`: which keys it has (a typo in a key, or a Secret in another namespace, is the usual cause).",
      'A TLS Secret made by cert-manager: `kubectl describe certificate -n <namespace>` and its CertificateRequest, Order and Challenges say why it is not issued.',
      'Tempora / Operator, Secrets missing (row Certificates and Secrets): which TemporaGateways and Secrets, since when.',
    ],
    mitigation: [
      "Create the Secret or add the key (`kubectl create secret generic|tls …`), or correct the TemporaGateway's field. The operator looks again within a minute; pods waiting for it start by themselves.",
      'A TLS Secret: fix its issuer (cert-manager), or create it from a certificate and key with `kubectl create secret tls <secret> --cert=… --key=…`.',
    ],
  },
  tests: [
    {
      name: 'a TLS Secret missing for a quarter hour',
      input: [
        {
          series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
          values: '1x20',
        },
      ],
      at: '15m',
      fires: [{ namespace: 'prod', gateway: 'tempora', secret: 'tempora-tls' }],
    },
    {
      name: 'created five minutes after its TemporaGateway (cert-manager issuing it)',
      input: [
        {
          series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-tls"}',
          values: '1x5 0x15',
        },
      ],
      at: '15m',
      fires: [],
    },
    {
      name: 'every Secret there',
      input: [
        {
          series: 'tempora_operator_secret_missing{tempora_component="operator", namespace="prod", gateway="tempora", secret="tempora-keys"}',
          values: '0x20',
        },
      ],
      at: '15m',
      fires: [],
    },
  ],
};
