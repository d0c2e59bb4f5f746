import type { SimulateRequest } from '@tempora/client';
import { ServiceClient } from '@tempora/kit/http';
import { z } from 'zod';
import type { SimulationRequest, SimulationResult, SimulationRun, Simulations } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { readAnswer } from './answers.ts';
import { PlatformPeer } from './platform-client.ts';

const PEER = 'the simulation service';

/**
 * `GET /simulations/{id}/result`: the run and its result, of which a digest reads a few parts (the rest is
 * the simulation's own). Read with the kit's service client rather than @tempora/client: the published
 * document (clients/openapi/simulation.json) gives this answer no body schema, so the client, failing
 * closed, refuses every answer of it.
 */
const Ended = z.object({
  run: z.object({
    id: z.string().min(1),
    status: z.string(),
    progress: z.object({ percent: z.number() }),
    mode: z.string().optional(),
    fidelity: z.number().int().optional(),
  }),
  result: z
    .object({
      title: z.string().nullable().optional(),
      summary: z.string().nullable().optional(),
      confidence: z.union([z.number(), z.object({ run: z.number() })]).optional(),
      partial: z.unknown(),
    })
    .catchall(z.unknown()),
});

/** A run as both answers carry it (the client's, checked whole; the result's, checked in the parts read here). */
const runOf = (run: {
  id: string;
  status: string;
  progress: { percent: number };
  mode?: string | undefined;
  fidelity?: number | undefined;
}): SimulationRun => ({
  id: run.id,
  status: run.status,
  progress: run.progress.percent,
  mode: run.mode ?? null,
  fidelity: run.fidelity ?? null,
  status_url: `/api/v1/simulations/${encodeURIComponent(run.id)}`,
});

/**
 * Simulations through the simulation service: `POST /api/v1/simulate` (202, the run),
 * `GET /api/v1/simulations/{id}` (status and `progress.percent`) and `GET /api/v1/simulations/{id}/result`
 * (`{run, result}`, 409 until the run ends), with the conductor's X-Service-Key and the user's X-User-ID, so
 * the run is the user's. A start carries an Idempotency-Key (the client's), so a retry starts one run.
 * When the service is absent every call fails as a ToolFailure (a paid one is then refunded).
 */
export class SimulationClient implements Simulations {
  private readonly peer: PlatformPeer;
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.peer = new PlatformPeer(baseUrl, serviceKey, timeoutMs, PEER);
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs, PEER);
  }

  async start(userId: string, request: SimulationRequest, requestId: string, signal: AbortSignal): Promise<SimulationRun> {
    // The tool's arguments name mechanisms by the same pattern (M1 to M19) the document enumerates.
    const body = request as SimulateRequest;
    return runOf(await this.peer.call({ userId, requestId, signal }, (init) => this.peer.api.POST('/api/v1/simulate', { body, ...init })));
  }

  async get(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<SimulationRun> {
    return runOf(
      await this.peer.call({ userId, requestId, signal }, (init) => this.peer.api.GET('/api/v1/simulations/{id}', { params: { path: { id } }, ...init })),
    );
  }

  /** `{run, result}`; a run that has not ended is a ToolFailure saying how far it is (the service answers 409). */
  async result(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<{ run: SimulationRun; result: SimulationResult }> {
    let reply;
    try {
      reply = await this.service.call('GET', `/api/v1/simulations/${encodeURIComponent(id)}/result`, { requestId, headers: { 'x-user-id': userId }, signal });
    } catch (error) {
      throw new ToolFailure(`${PEER} could not be reached: ${(error as Error).message}`);
    }
    if (reply.status === 409) throw new ToolFailure(reply.detail());
    if (reply.status !== 200) throw new ToolFailure(`${PEER} answered ${reply.status}: ${reply.detail()}`);
    const ended = readAnswer(reply, Ended, ToolFailure);
    return { run: runOf(ended.run), result: ended.result };
  }
}
