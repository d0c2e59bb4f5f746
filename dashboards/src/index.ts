import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { billing } from './billing.ts';
import { conductor } from './conductor.ts';
import { gateway } from './gateway.ts';
import { generation } from './generation.ts';
import { graph } from './graph.ts';
import { operator } from './operator.ts';
import { overview } from './overview.ts';
import { simulation } from './simulation.ts';

/** Every dashboard the platform ships, each written to grafana/<uid>.json. */
export const DASHBOARDS: Dashboard[] = [overview, gateway, generation, graph, simulation, conductor, billing, operator];
