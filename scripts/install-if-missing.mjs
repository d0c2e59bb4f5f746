// Run by npm before `npm test` and `npm start`, on whatever Node the machine has (hence plain JavaScript):
// on a fresh clone it installs first, so that the scripts run on the Node 22 the project pins rather than
// failing on an older Node that cannot load TypeScript.
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
if (!existsSync(`${root}node_modules/node/package.json`)) execSync('npm install --no-audit --no-fund', { cwd: root, stdio: 'inherit' });
