import { ServiceClient, type ServiceReply } from '@tempora/kit/http';
import type { SimulationRequest, SimulationRun, Simulations } from '../domain/platform-tools.ts';
import { ToolFailure } from '../domain/tools.ts';
import { problemDetail } from './problem-detail.ts';

const parse = (reply: ServiceReply, what: string): Record<string, any> => {
  try {
    return JSON.parse(reply.text) as Record<string, any>;
  } catch {
    throw new ToolFailure(`the simulation service answered ${what} with a body that is not JSON`);
  }
};

/** A run as the simulation service describes it (the run itself, or the run inside `{run}`). */
function runOf(body: Record<string, any>): SimulationRun {
  const run = (body.run && typeof body.run === 'object' ? body.run : body) as Record<string, any>;
  const id = run.id ?? run.simulation_id ?? body.id;
  if (typeof id !== 'string' && typeof id !== 'number') throw new ToolFailure('the simulation service answered without a run id');
  return {
    id: String(id),
    status: String(run.status ?? 'unknown'),
    progress: typeof run.progress?.percent === 'number' ? run.progress.percent : null,
    mode: typeof run.mode === 'string' ? run.mode : null,
    fidelity: typeof run.fidelity === 'number' ? run.fidelity : null,
    status_url: typeof body.status_url === 'string' ? body.status_url : `/api/v1/simulations/${String(id)}`,
  };
}

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
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs);
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
      throw new ToolFailure(`the simulation service answered ${reply.status}: ${problemDetail(reply.text)}`);
    return runOf(parse(reply, 'the start'));
  }

  async get(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<SimulationRun> {
    const reply = await this.send('GET', `/api/v1/simulations/${encodeURIComponent(id)}`, userId, requestId, signal);
    if (reply.status !== 200) throw new ToolFailure(`the simulation service answered ${reply.status}: ${problemDetail(reply.text)}`);
    return runOf(parse(reply, 'the status'));
  }

  /** `{run, result}`; a run that has not ended is a ToolFailure saying how far it is (the service answers 409). */
  async result(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<{ run: SimulationRun; result: Record<string, unknown> }> {
    const reply = await this.send('GET', `/api/v1/simulations/${encodeURIComponent(id)}/result`, userId, requestId, signal);
    if (reply.status === 409) throw new ToolFailure(problemDetail(reply.text));
    if (reply.status !== 200) throw new ToolFailure(`the simulation service answered ${reply.status}: ${problemDetail(reply.text)}`);
    const body = parse(reply, 'the result');
    return { run: runOf(body), result: (body.result && typeof body.result === 'object' ? body.result : {}) as Record<string, unknown> };
  }
}
