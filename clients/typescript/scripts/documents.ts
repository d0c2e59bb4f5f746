import { readFileSync } from 'node:fs';

/** The services whose OpenAPI documents are committed in clients/openapi/, one `<service>.json` each. */
export const DOCUMENTED = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'] as const;

export const documentsDirectory = new URL('../../openapi/', import.meta.url);

/** Each service's document as its running instance serves it (/openapi.json), in the committed layout. */
export async function servedDocuments(urls: Record<(typeof DOCUMENTED)[number], string>): Promise<Record<string, string>> {
  const documents: Record<string, string> = {};
  for (const service of DOCUMENTED) {
    const response = await fetch(`${urls[service]}/openapi.json`);
    if (!response.ok) throw new Error(`${service} answered ${response.status} for /openapi.json`);
    documents[service] = `${JSON.stringify(await response.json(), null, 2)}\n`;
  }
  return documents;
}

export function committedDocument(service: string): string {
  return readFileSync(new URL(`${service}.json`, documentsDirectory), 'utf8');
}
