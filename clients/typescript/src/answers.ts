import * as generated from './generated/validators.ts';
import { InvalidAnswer, retryAfterSeconds, TemporaProblem } from './problems.ts';

type Validator = ((data: unknown) => boolean) & { errors?: { instancePath: string; message?: string }[] | null };
type AnswerTable = Record<string, Record<string, Record<string, string>>>;

const table = generated.answers as AnswerTable;
const validators = generated as unknown as Record<string, Validator>;
const problem = validators.problem!;

function explain(validator: Validator): string {
  const first = validator.errors?.[0];
  return first ? `${first.instancePath || '(the body)'} ${first.message ?? 'is invalid'}` : 'the body does not match its schema';
}

function mediaType(response: Response): string {
  return (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * A path parameter the answer names under the same field must be the one asked (a graph path with or without
 * its leading slash; a TDF record's id is the one asked under its kind, `timepoint:<id>`, `simulation:<id>`).
 */
function checkResource(operation: string, status: number, params: Record<string, unknown>, body: unknown) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return;
  const tdf = 'tdf_hash' in body;
  for (const [name, asked] of Object.entries(params)) {
    const answered = (body as Record<string, unknown>)[name];
    if (typeof answered !== 'string' || typeof asked !== 'string') continue;
    const same =
      name === 'path'
        ? answered.replace(/^\//, '') === asked.replace(/^\//, '')
        : answered === asked || (tdf && name === 'id' && answered.endsWith(`:${asked}`));
    if (!same) throw new InvalidAnswer(operation, status, `it answers for ${name} ${JSON.stringify(answered)}, not ${JSON.stringify(asked)}`);
  }
}

/**
 * Fails closed: a problem becomes a TemporaProblem, a success is read and validated against the schema its
 * operation documents for that status and media type, and anything undocumented is an InvalidAnswer. An
 * event stream is passed on unread (its events are checked as they arrive), and so are bytes of a documented
 * non-JSON media type (an image): their type is all there is to check.
 */
export async function checkAnswer(method: string, schemaPath: string, params: Record<string, unknown>, response: Response): Promise<void> {
  const operation = `${method.toUpperCase()} ${schemaPath}`;
  const documented = table[`${method.toLowerCase()} ${schemaPath}`];
  if (!documented) throw new InvalidAnswer(operation, response.status, 'the operation is not part of the documented surface');
  const media = mediaType(response);
  const byMedia = documented[String(response.status)];
  if (media === 'application/problem+json') {
    const body = await response
      .clone()
      .json()
      .catch(() => undefined);
    if (!problem(body)) throw new InvalidAnswer(operation, response.status, `a problem that is not one: ${explain(problem)}`);
    // A problem the operation does not list (the gateway's 401, 402, 429, 502…) is still a problem, typed as one.
    throw new TemporaProblem(body as ConstructorParameters<typeof TemporaProblem>[0], retryAfterSeconds(response.headers.get('retry-after')));
  }
  if (!byMedia) throw new InvalidAnswer(operation, response.status, 'the status is not documented for this operation');
  if (response.status === 204 || (byMedia.none && !media)) {
    if (!byMedia.none) throw new InvalidAnswer(operation, response.status, 'no body where one is documented');
    return;
  }
  // A documented range (`image/*`) admits each type in it.
  const name = byMedia[media] ?? byMedia[`${media.split('/')[0]}/*`];
  if (!name)
    throw new InvalidAnswer(
      operation,
      response.status,
      `media type ${JSON.stringify(media)} is not documented (${Object.keys(byMedia).join(', ') || 'no body documented'})`,
    );
  if (name === 'stream' || name === 'binary') return;
  const body = await response
    .clone()
    .json()
    .catch(() => {
      throw new InvalidAnswer(operation, response.status, 'the body is not JSON');
    });
  const validator = validators[name]!;
  if (!validator(body)) throw new InvalidAnswer(operation, response.status, explain(validator));
  checkResource(operation, response.status, params, body);
}
