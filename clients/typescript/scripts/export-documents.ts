/**
 * `npm run export-documents -w @tempora/client`: starts the platform as the tests do (test/support/platform.ts,
 * on the PostgreSQL and Redis of DATABASE_URL and REDIS_URL) and writes each service's served OpenAPI document
 * to clients/openapi/. Then `npm run generate -w @tempora/client` regenerates the client from them.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { startPlatform } from '../../../test/support/platform.ts';
import { documentsDirectory, servedDocuments } from './documents.ts';

if (!process.env.REDIS_URL) throw new Error('REDIS_URL is not set (and DATABASE_URL): the platform runs on them, as in the tests');
const databaseUrl = await createDatabase('openapi');
const platform = await startPlatform({ shared: { databaseUrl, redisUrl: process.env.REDIS_URL } });
try {
  for (const [service, text] of Object.entries(await servedDocuments(platform.urls))) writeFileSync(new URL(`${service}.json`, documentsDirectory), text);
  console.log(`wrote ${fileURLToPath(documentsDirectory)}`);
} finally {
  await platform.stop();
  await dropDatabase(databaseUrl);
}
