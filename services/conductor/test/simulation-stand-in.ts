import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';

export interface RecordedSimulationCall {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export interface SimulationStandIn {
  url: string;
  calls: RecordedSimulationCall[];
  /** The status the next start answers with (202 unless set). */
  startStatus: number;
  /** Every connection is dropped unanswered, as when the service is not there. */
  down: boolean;
  close(): Promise<void>;
}

/**
 * A stand-in of the simulation service speaking its documented API (docs/simulation.md): `POST
 * /api/v1/simulate` answers 202 with the run and its status URL, `GET /api/v1/simulations/{id}` the run's
 * status and progress, `/result` the result. It records what it was sent.
 */
export async function startSimulationStandIn(): Promise<SimulationStandIn> {
  const calls: RecordedSimulationCall[] = [];
  const runs = new Map<string, Record<string, unknown>>();
  const standIn: SimulationStandIn = { url: '', calls, startStatus: 202, down: false, close: async () => undefined };
  const server = createServer(async (req, res) => {
    if (standIn.down) return void req.socket.destroy();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const path = new URL(req.url ?? '/', 'http://stand-in').pathname;
    calls.push({ method: req.method ?? '', path, headers: req.headers, body: text ? JSON.parse(text) : undefined });
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'POST' && path === '/api/v1/simulate') {
      if (standIn.startStatus !== 202) return answer(standIn.startStatus, { type: 'about:blank', title: 'Error', status: standIn.startStatus, detail: 'the stand-in refuses this run' });
      const body = JSON.parse(text) as Record<string, unknown>;
      const id = randomUUID();
      const run = { id, status: 'queued', progress: { steps_done: 0, steps_total: 5, percent: 0 }, mode: body.mode ?? 'FORWARD', fidelity: body.fidelity ?? 3, prompt: body.prompt };
      runs.set(id, run);
      return answer(202, { ...run, status_url: `/api/v1/simulations/${id}` });
    }
    const match = /^\/api\/v1\/simulations\/([^/]+)(\/result)?$/.exec(path);
    const run = match ? runs.get(match[1]!) : undefined;
    if (req.method === 'GET' && run) {
      if (match![2]) return answer(200, { run: { ...run, status: 'completed' }, result: { title: 'The Continental System fails', entities: [1, 2, 3], timepoints: [1, 2], confidence: { run: 0.7 } } });
      return answer(200, { ...run, status: 'running', progress: { steps_done: 2, steps_total: 5, percent: 40 } });
    }
    answer(404, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no such run' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  standIn.close = () => new Promise((resolve) => server.close(() => resolve()));
  return standIn;
}
