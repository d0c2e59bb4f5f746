import { existsSync } from 'node:fs';
import { aptInstall } from '../../scripts/infra.ts';

/** Debian's Prometheus and promtool, installed on first use (as root) like PostgreSQL and Redis. */
export function prometheusBinaries(): { prometheus: string; promtool: string } {
  const binaries = { prometheus: '/usr/bin/prometheus', promtool: '/usr/bin/promtool' };
  if (!existsSync(binaries.promtool) || !existsSync(binaries.prometheus)) aptInstall('prometheus');
  return binaries;
}
