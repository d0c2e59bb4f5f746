/**
 * The README tour's TypeScript step: a signed-in session through @tempora/client against a running
 * platform's gateway (the first argument, default npm start's). Every answer printed here was validated
 * against the OpenAPI documents before the client handed it over.
 */
import { data, Tempora } from '../src/index.ts';

const tempora = new Tempora({ baseUrl: process.argv[2] ?? 'http://127.0.0.1:8080' });
const { user } = await tempora.signInDemo();
console.log(`signed in as ${user.id}`);
const stats = await data(tempora.api.GET('/api/v1/graph/stats'));
console.log(`the graph holds ${stats.total_nodes} moments and ${stats.total_edges} edges`);
const found = await data(tempora.api.GET('/api/v1/graph/moments', { params: { query: { q: 'moon landing', limit: 1 } } }));
const first = found.items[0];
if (first && 'event_name' in first) console.log(`first match: ${first.event_name} (${first.year})`);
for await (const event of tempora.streamScene({ query: 'Gutenberg prints the first Bible in Mainz, 1455' })) {
  if (event.event === 'agent') console.log(`  ${event.data.agent}: ${event.data.status}`);
  if (event.event === 'done') console.log('scene rendered');
}
await tempora.signOut();
