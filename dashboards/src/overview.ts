import { COMPONENTS } from './components.ts';
import { dashboard, processPanels, red, SEL } from './panels.ts';

/** The first page on call: is every service up, how much traffic, how many failures, how slow. */
export const overview = dashboard({
  uid: 'tempora-overview',
  title: 'Tempora / Overview',
  description: 'Requests, errors and latency (RED) of every service, and their processes.',
  components: [...COMPONENTS],
  jobMetric: 'http_server_request_duration_seconds_count',
  rows: [
    {
      title: 'Services',
      panels: [
        {
          title: 'Targets up',
          description: 'Scrape targets answering, per job: a 0 is a process Prometheus cannot reach.',
          unit: 'short',
          kind: 'stat',
          queries: [{ expr: `sum by (job) (up{${SEL}})`, legend: '{{job}}' }],
        },
        ...red('job', 'service'),
      ],
    },
    { title: 'Processes', panels: processPanels() },
  ],
});
