/**
 * The drift gate of the recorded fixtures (clients/fixtures/): each fixture's answer is one its operation
 * documents in clients/openapi/*.json (the status, the media type and a body its schema accepts), and a
 * fresh recording against a freshly started platform equals the committed fixtures. So fixtures,
 * documents and platform agree; when they do not, `npm run record-fixtures -w @tempora/client` and a
 * look at what changed.
 */
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { committedFixtures, type Fixture } from '../../fixtures/fixture.ts';
import { recordFixtures } from '../../fixtures/session.ts';
import { publicSurface } from '../scripts/surface.ts';

const RECORD = '`npm run record-fixtures -w @tempora/client`';
const fixtures = committedFixtures();

/** A JSON Pointer's escaping of one reference token. */
const token = (text: string) => text.replaceAll('~', '~0').replaceAll('/', '~1');

/** Where two JSON values first differ, as a JSON Pointer and both values; undefined when equal. */
function difference(recorded: unknown, committed: unknown, at = ''): string | undefined {
  if (Object.is(recorded, committed)) return undefined;
  const bothObjects = recorded !== null && committed !== null && typeof recorded === 'object' && typeof committed === 'object';
  if (!bothObjects || Array.isArray(recorded) !== Array.isArray(committed))
    return `${at || '/'}: the platform answers ${JSON.stringify(recorded)?.slice(0, 200)}, the fixture says ${JSON.stringify(committed)?.slice(0, 200)}`;
  const keys = new Set([...Object.keys(recorded), ...Object.keys(committed)]);
  for (const key of keys) {
    const found = difference((recorded as Record<string, unknown>)[key], (committed as Record<string, unknown>)[key], `${at}/${token(key)}`);
    if (found) return found;
  }
  return undefined;
}

describe('the recorded fixtures agree with the OpenAPI documents', () => {
  const surface = publicSurface();
  // The whole surface is one schema resource, so an answer's schema is compiled by its pointer and its $refs resolve.
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false });
  ajv.addSchema(surface, 'surface');

  for (const fixture of fixtures)
    it(`${fixture.name}: ${fixture.method} ${fixture.template} ${fixture.response.status} is an answer ${fixture.operationId} documents`, () => {
      const method = fixture.method.toLowerCase();
      const operation = surface.paths[fixture.template]?.[method] as (typeof surface.paths)[string][string] & { operationId?: string };
      assert.ok(operation, `${fixture.method} ${fixture.template} is not an operation of the public surface`);
      assert.equal(operation.operationId, fixture.operationId);
      const status = String(fixture.response.status);
      const answer = operation.responses[status];
      assert.ok(answer, `${fixture.operationId} does not document ${status}`);
      if (fixture.response.body === undefined) return assert.equal(answer.content, undefined, `${fixture.operationId} documents a body for ${status}`);
      const media = (fixture.response.headers['content-type'] ?? '').split(';')[0]!.trim();
      assert.ok(answer.content?.[media], `${fixture.operationId} does not document ${media} for ${status}`);
      assert.ok(answer.content[media].schema, `${fixture.operationId} documents no answer schema for ${status} ${media}`);
      const validate = ajv.getSchema(`surface#/paths/${token(fixture.template)}/${method}/responses/${status}/content/${token(media)}/schema`)!;
      assert.ok(validate(fixture.response.body), `the body does not match the schema: ${ajv.errorsText(validate.errors)}`);
    });
});

describe('the recorded fixtures are what the platform answers now (drift gate)', function () {
  let recorded: Fixture[];

  before(async function () {
    this.timeout(300_000);
    recorded = await recordFixtures();
  });

  it(`records the same session, fixture for fixture: else ${RECORD}`, function () {
    assert.deepEqual(
      recorded.map((fixture) => fixture.name),
      fixtures.map((fixture) => fixture.name),
    );
    const drifted = recorded.flatMap((fixture, index) => {
      const found = difference(fixture, fixtures[index]);
      return found ? [`${fixture.name}${found}`] : [];
    });
    assert.ok(drifted.length === 0, `the platform no longer answers as clients/fixtures/recorded/ says (run ${RECORD}):\n${drifted.join('\n')}`);
  });
});
