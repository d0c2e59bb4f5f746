import assert from 'node:assert/strict';
import { BASTILLE, CORONATION, README_REQUEST, WATERLOO, conductorEntries, startPlatform, type Platform } from './harness.ts';
import { startSimulationStandIn, type SimulationStandIn } from './simulation-stand-in.ts';

describe('conductor, offline planner', function () {
  this.timeout(120_000);
  let platform: Platform;
  let simulation: SimulationStandIn;

  before(async () => {
    simulation = await startSimulationStandIn();
    platform = await startPlatform({ simulationUrl: simulation.url });
  });
  after(async () => {
    await platform?.stop();
    await simulation?.close();
  });

  it("answers the README's request: a path through the graph, a rendered scene and a simulation, each charged once", async () => {
    const user = await platform.user(50);
    const reply = await platform.send(user, { content: README_REQUEST });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const body = reply.body;
    if (process.env.SHOW) console.log(JSON.stringify(body, null, 1));
    assert.equal(body.status, 'completed', body.reply);
    assert.equal(body.model.offline, true);
    assert.match(body.reply, /^Offline planner/);
    const tools = body.tools_called.map((call: { tool: string }) => call.tool);
    assert.deepEqual(tools.slice(0, 3).sort(), ['graph_search', 'graph_search', 'graph_search']);
    assert.ok(tools.includes('find_path') && tools.includes('render_scene') && tools.includes('start_simulation') && tools.includes('follow_simulation'), tools.join());
    const path = body.tools_called.find((call: { tool: string }) => call.tool === 'find_path');
    assert.deepEqual(path.arguments, { from_path: BASTILLE, to_path: WATERLOO });
    assert.equal(path.output.found, true);
    assert.ok(path.output.nodes.some((node: { id: string }) => node.id === CORONATION));
    const render = body.tools_called.find((call: { tool: string }) => call.tool === 'render_scene');
    assert.equal(render.arguments.query, 'Coronation of Napoleon, 1804');
    assert.equal(render.credits, 2);
    assert.match(render.output.url, /^\/api\/v1\/timepoints\//);
    const started = body.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
    assert.equal(started.arguments.mode, 'BRANCHING');
    assert.equal(started.credits, 8);
    assert.equal(simulation.calls[0]?.headers['x-user-id'], user.id);
    assert.equal(body.spend.credits_total, 10);
    assert.equal(body.spend.running_total, 10);
    assert.equal(body.tools_called.at(-1).running_total, 10);
    assert.match(body.reply, /Storming of the Bastille/);
    assert.match(body.reply, /Coronation of Napoleon/);

    const entries = conductorEntries(await platform.history(user), body.message_id);
    assert.equal(entries.reduce((sum, entry) => sum + entry.amount, 0), -body.spend.credits_total);
    for (const call of body.tools_called.filter((entry: { credits: number }) => entry.credits > 0)) {
      assert.ok(entries.some((entry) => entry.idempotency_key === `service:conductor:${body.message_id}:${call.index}` && entry.amount === -call.credits));
    }
    assert.equal(await platform.balance(user), 40);
  });
});
