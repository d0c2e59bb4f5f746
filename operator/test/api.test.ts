// The API types (operator/src/api/v1alpha1) are generated from crds/; this keeps the file on disk equal to
// what the CRDs generate, so a CRD field and its type cannot disagree.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CRD_DIR, GENERATED_FILE, generateTypes } from '../src/api/generate.ts';

describe('api/v1alpha1', function () {
  it('is what crds/ generates (run `node operator/src/api/generate.ts` after changing a CRD)', function () {
    assert.equal(readFileSync(GENERATED_FILE, 'utf8'), generateTypes());
  });

  describe('generated from a changed CRD', function () {
    let dir: string;
    beforeEach(function () {
      dir = mkdtempSync(join(tmpdir(), 'tempora-crds-'));
      cpSync(CRD_DIR, dir, { recursive: true });
    });
    afterEach(function () {
      rmSync(dir, { recursive: true, force: true });
    });
    const edit = (file: string, from: string, to: string) => {
      const path = join(dir, file);
      const text = readFileSync(path, 'utf8');
      assert.ok(text.includes(from), `${file} has ${from}`);
      writeFileSync(path, text.replace(from, to));
    };

    it('differs when a field is added, and types a defaulted field as always present', function () {
      edit(
        'agentpool.yaml',
        '                cpuTargetPercent:',
        '                drainSeconds: {type: integer, default: 30}\n                cpuTargetPercent:',
      );
      const generated = generateTypes(dir);
      assert.notEqual(generated, generateTypes());
      assert.match(generated, /\n {2}drainSeconds: number;\n/);
    });

    it('refuses a shared type whose uses have come apart', function () {
      edit(
        'graphworker.yaml',
        'pullPolicy: {type: string, enum: [Always, IfNotPresent, Never], default: IfNotPresent}',
        'pullPolicy: {type: string, enum: [Always, IfNotPresent], default: IfNotPresent}',
      );
      assert.throws(() => generateTypes(dir), /spec.image: schema differs from the other uses of ImageSpec/);
    });
  });
});
