import { Problem, toProblem, unexpectedProblem } from '@tempora/kit/http';
import { JudgeRejected, StepFailed } from './pipeline/run.ts';

/** Why a generation failed, as the problem the client receives. */
export function problemOf(error: unknown): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof JudgeRejected) {
    return new Problem(422, `the Judge rejected the query: ${error.message}`, {
      title: 'Query rejected',
      type: 'https://tempora.dev/problems/query-rejected',
      errors: [{ path: 'body.query', message: error.message }],
    });
  }
  if (error instanceof StepFailed) {
    if (error.code === 'timeout') return new Problem(504, error.message, { extensions: { agent: error.agent, code: error.code } });
    if (error.code === 'cancelled') return new Problem(503, error.message, { title: 'Cancelled' });
    return new Problem(502, error.message, { extensions: { agent: error.agent, code: error.code } });
  }
  // A database outage is a 503 with Retry-After, as the kit answers it.
  return toProblem(error) ?? unexpectedProblem();
}
