import type { ServerResponse } from 'node:http';
import { PROBLEM_CONTENT_TYPE, type Problem } from './errors.ts';

/** Answers on a raw response, outside Koa (worker endpoints, the gateway's express lane). */
export function send(response: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}): void {
  if (response.headersSent) return void response.end();
  response.writeHead(status, { ...headers, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  response.end(response.req.method === 'HEAD' ? undefined : body);
}

export function sendProblem(response: ServerResponse, problem: Problem, instance: string): void {
  send(response, problem.status, PROBLEM_CONTENT_TYPE, JSON.stringify(problem.toJSON(instance)), problem.headers);
}
