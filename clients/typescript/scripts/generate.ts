/**
 * `npm run generate -w @tempora/client`: regenerates src/generated/ from the services' committed OpenAPI
 * documents (clients/openapi/*.json). The public surface is one document of the operations a user reaches
 * through the gateway: openapi-typescript turns it into the request and answer types, and Ajv's standalone
 * code generation turns each answer's JSON Schema into a validator committed as plain code, so the client
 * validates every answer without carrying a schema compiler at run time. test/generated.test.ts fails when
 * the committed files differ from what this writes.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { publicSurface, renderGenerated } from './surface.ts';

const generated = new URL('../src/generated/', import.meta.url);
for (const [name, text] of Object.entries(await renderGenerated(publicSurface()))) writeFileSync(fileURLToPath(new URL(name, generated)), text);
console.log(`wrote ${fileURLToPath(generated)}`);
