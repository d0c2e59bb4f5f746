import { ServiceClient, type ServiceReply } from '@tempora/kit/http';
import { z } from 'zod';
import type { SimulationRequest, SimulationResult, SimulationRun, Simulations } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { readAnswer } from './answers.ts';

/** The fields of the simulation service's run (its OpenAPI `SimulationRun`) the conductor reads. */
const Run = z.object({
  id: z.string().min(1),
  status: z.string(),
  progress: z.object({ percent: z.number() }),
  // Read for display only: a run without them is shown without them.
  mode: z.string().optional(),
  fidelity: z.number().int().optional(),
});
/** `POST /simulate` answers the run and where to follow it. */
const Started = Run.extend({ status_url: z.string() });
/** `GET /simulations/{id}/result`: the run and its result, of which a digest reads a few parts (the rest is the simulation's own). */
const Ended = z.object({
  run: Run,
  result: z
    .object({
      title: z.string().nullable().optional(),
      summary: z.string().nullable().optional(),
      confidence: z.union([z.number(), z.object({ run: z.number() })]).optional(),
      partial: z.unknown(),
    })
    .catchall(z.unknown()),
});

const runOf = (run: z.output<typeof Run>, statusUrl = `/api/v1/simulations/${encodeURIComponent(run.id)}`): SimulationRun => ({
  id: run.id,
  status: run.status,
  progress: run.progress.percent,
  mode: run.mode ?? null,
  fidelity: run.fidelity ?? null,
  status_url: statusUrl,
});

/**
 * Simulations through the simulation service: `POST /api/v1/simulate` (202, the run and its status URL),
 * `GET /api/v1/simulations/{id}` (status and `progress.percent`) and `GET /api/v1/simulations/{id}/result`
 * (`{run, result}`, 409 until the run ends), with the conductor's X-Service-Key and the user's X-User-ID, so
 * the run is the user's.
 * When the service is absent every call fails as a ToolFailure (a paid one is then refunded).
 */
export class SimulationClient implements Simulations {
  private readonly service: ServiceClient;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs, 'the simulation service');
  }

  private async send(method: 'GET' | 'POST', path: string, userId: string, requestId: string, signal: AbortSignal, json?: unknown): Promise<ServiceReply> {
    try {
      return await this.service.call(method, path, { requestId, headers: { 'x-user-id': userId }, signal, ...(json === undefined ? {} : { json }) });
    } catch (error) {
      throw new ToolFailure(`the simulation service could not be reached: ${(error as Error).message}`);
    }
  }

  async start(userId: string, request: SimulationRequest, requestId: string, signal: AbortSignal): Promise<SimulationRun> {
    const reply = await this.send('POST', '/api/v1/simulate', userId, requestId, signal, request);
    if (reply.status !== 200 && reply.status !== 201 && reply.status !== 202)
      throw new ToolFailure(`the simulation service answered ${reply.status}: ${reply.detail()}`);
    const started = readAnswer(reply, Started, ToolFailure);
    return runOf(started, started.status_url);
  }

  async get(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<SimulationRun> {
    const reply = await this.send('GET', `/api/v1/simulations/${encodeURIComponent(id)}`, userId, requestId, signal);
    if (reply.status !== 200) throw new ToolFailure(`the simulation service answered ${reply.status}: ${reply.detail()}`);
    return runOf(readAnswer(reply, Run, ToolFailure));
  }

  /** `{run, result}`; a run that has not ended is a ToolFailure saying how far it is (the service answers 409). */
  async result(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<{ run: SimulationRun; result: SimulationResult }> {
    const reply = await this.send('GET', `/api/v1/simulations/${encodeURIComponent(id)}/result`, userId, requestId, signal);
    if (reply.status === 409) throw new ToolFailure(reply.detail());
    if (reply.status !== 200) throw new ToolFailure(`the simulation service answered ${reply.status}: ${reply.detail()}`);
    const ended = readAnswer(reply, Ended, ToolFailure);
    return { run: runOf(ended.run), result: ended.result };
  }
}
