import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { documentedRun } from '../../../test/support/stand-ins/simulation-run.ts';

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
  /** When set, what a start answers with 202 in place of the run: an answer outside the service's schema. */
  startBody: unknown;
  /** Every connection is dropped unanswered, as when the service is not there. */
  down: boolean;
  /** Ends a run as the service would: `failed`, `completed`, or `stopped`/`cancelled` after `stepsDone` steps. */
  end(id: string, status: 'completed' | 'failed' | 'stopped' | 'cancelled', stepsDone?: number): void;
  close(): Promise<void>;
}

/**
 * A stand-in of the simulation service speaking its documented API (docs/simulation.md): `POST
 * /api/v1/simulate` answers 202 with the run and its status URL, `GET /api/v1/simulations/{id}` the run's
 * status and progress (running, two of five steps done, until `end` or a cancel ends it), `/result` the
 * result, `POST …/cancel` cancels a run (with the steps it has done: none until `end` says otherwise). It
 * records what it was sent.
 */
export async function startSimulationStandIn(): Promise<SimulationStandIn> {
  const calls: RecordedSimulationCall[] = [];
  const runs = new Map<string, Record<string, unknown>>();
  const ended = new Map<string, { status: string; steps_done: number }>();
  const standIn: SimulationStandIn = {
    url: '',
    calls,
    startStatus: 202,
    startBody: undefined,
    down: false,
    end: (id, status, stepsDone = status === 'completed' ? 5 : 0) => void ended.set(id, { status, steps_done: stepsDone }),
    close: async () => undefined,
  };
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
      if (standIn.startStatus !== 202)
        return answer(standIn.startStatus, { type: 'about:blank', title: 'Error', status: standIn.startStatus, detail: 'the stand-in refuses this run' });
      if (standIn.startBody !== undefined) return answer(202, standIn.startBody);
      const id = randomUUID();
      const run = documentedRun(id, JSON.parse(text) as Record<string, unknown>);
      runs.set(id, run);
      return answer(202, { ...run, status_url: `/api/v1/simulations/${id}` });
    }
    const match = /^\/api\/v1\/simulations\/([^/]+)(\/result|\/cancel)?$/.exec(path);
    const run = match ? runs.get(match[1]!) : undefined;
    if (req.method === 'POST' && run && match![2] === '/cancel') {
      const end = ended.get(run.id as string);
      if (end) return answer(409, { type: 'about:blank', title: 'Conflict', status: 409, detail: `the run is ${end.status}` });
      ended.set(run.id as string, { status: 'cancelled', steps_done: 0 });
      return answer(200, { ...run, status: 'cancelled' });
    }
    if (req.method === 'GET' && run && match![2] !== '/cancel') {
      if (match![2])
        return answer(200, {
          run: { ...run, status: 'completed' },
          result: { title: 'The Continental System fails', entities: [1, 2, 3], timepoints: [1, 2], confidence: { run: 0.7 } },
        });
      const end = ended.get(run.id as string);
      if (end) return answer(200, { ...run, status: end.status, progress: { steps_done: end.steps_done, steps_total: 5, percent: end.steps_done * 20 } });
      return answer(200, { ...run, status: 'running', progress: { steps_done: 2, steps_total: 5, percent: 40 } });
    }
    answer(404, { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no such run' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  standIn.close = () => new Promise((resolve) => server.close(() => resolve()));
  return standIn;
}
