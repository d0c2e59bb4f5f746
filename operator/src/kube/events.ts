// Records core/v1 Events against the custom resources, for condition transitions only, so `kubectl
// describe` shows the history without a converged cluster producing writes.
import type { Logger } from 'pino';
import type { KubeClient } from './client.ts';
import type { KubeObject } from './object.ts';
import { Event } from './resources.ts';

export class EventRecorder {
  readonly #client: KubeClient;
  readonly #log: Logger;
  readonly #instance: string;

  constructor(client: KubeClient, log: Logger, instance: string) {
    this.#client = client;
    this.#log = log;
    this.#instance = instance;
  }

  async record(obj: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const namespace = obj.metadata.namespace ?? 'default';
    try {
      await this.#client.create(Event, namespace, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${obj.metadata.name}.`, namespace },
        involvedObject: {
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          name: obj.metadata.name,
          namespace,
          uid: obj.metadata.uid,
          resourceVersion: obj.metadata.resourceVersion,
        },
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: 'tempora-operator' },
        reportingComponent: 'tempora.dev/operator',
        reportingInstance: this.#instance,
      });
    } catch (err) {
      // An event is a courtesy; failing to record one must not fail the reconcile.
      this.#log.warn({ err: String(err), reason }, 'could not record event');
    }
  }
}
