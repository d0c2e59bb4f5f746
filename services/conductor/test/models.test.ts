import assert from 'node:assert/strict';
import { BASTILLE, conductorEntries, type Platform, type StartedConductor, startPlatform, type User, WATERLOO } from './harness.ts';
import { type ModelServer, type ScriptedTurn, startGemini, startOpenAiCompatible } from './model-servers.ts';
import { type SimulationStandIn, startSimulationStandIn } from './simulation-stand-in.ts';

/** Model turns taken since the request (OpenAI form: assistant messages after the last user message). */
const openAiTurn = (body: any): number => {
  const messages = body.messages as Array<{ role: string }>;
  return messages.slice(messages.map((message) => message.role).lastIndexOf('user') + 1).filter((message) => message.role === 'assistant').length;
};
/** The same in Gemini's form: model turns after the last user turn that holds text. */
const geminiTurn = (body: any): number => {
  const contents = body.contents as Array<{ role: string; parts: Array<{ text?: string }> }>;
  const last = contents.map((content) => content.role === 'user' && content.parts.some((part) => part.text !== undefined)).lastIndexOf(true);
  return contents.slice(last + 1).filter((content) => content.role === 'model').length;
};
const toolMessages = (body: any) =>
  (body.messages as Array<{ role: string; tool_call_id?: string; content: string }>).filter((message) => message.role === 'tool');

describe('conductor, models through their tool-calling protocols', function () {
  this.timeout(120_000);
  let platform: Platform;
  let simulation: SimulationStandIn;
  let aggregator: ModelServer;
  let native: ModelServer;
  let viaAggregator: StartedConductor;
  let viaNative: StartedConductor;

  const settings = (user: User, conductor: StartedConductor, body: Record<string, unknown>) =>
    fetch(`${conductor.url}/api/v1/conductor/settings`, {
      method: 'PATCH',
      headers: { ...user.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  async function assertLedgerMatches(
    user: User,
    messageId: string,
    responses: Array<{ tools_called: Array<{ index: number; credits: number }>; spend: { credits_total: number } }>,
  ) {
    const entries = conductorEntries(await platform.history(user), messageId);
    assert.equal(
      0 - entries.reduce((sum, entry) => sum + entry.amount, 0),
      responses.reduce((sum, response) => sum + response.spend.credits_total, 0),
    );
    for (const call of responses.flatMap((response) => response.tools_called)) {
      assert.equal(
        0 - entries.filter((entry) => entry.idempotency_key.endsWith(`:${messageId}:${call.index}`)).reduce((sum, entry) => sum + entry.amount, 0),
        call.credits,
      );
    }
  }

  before(async () => {
    simulation = await startSimulationStandIn();
    [aggregator, native] = await Promise.all([startOpenAiCompatible(), startGemini()]);
    platform = await startPlatform({ simulationUrl: simulation.url });
    viaAggregator = await platform.conductorWith({
      OPENROUTER_BASE_URL: aggregator.baseUrl,
      OPENROUTER_API_KEY: 'test-aggregator-key',
      CONDUCTOR_STEP_CAP: '4',
      CONDUCTOR_TOKEN_CAP: '3000',
    });
    viaNative = await platform.conductorWith({ GEMINI_API_KEY: 'test-gemini-key', GEMINI_BASE_URL: native.baseUrl });
  });
  after(async () => {
    await platform?.stop();
    await Promise.all([simulation?.close(), aggregator?.close(), native?.close()]);
  });
  beforeEach(() => {
    aggregator.requests.length = 0;
    native.requests.length = 0;
  });

  describe('the aggregator (OpenAI-compatible tools and tool_calls)', () => {
    it('carries out several tools in one turn, answers each call by id, and charges what it spends', async () => {
      const user = await platform.user(50);
      aggregator.script = (body): ScriptedTurn => {
        switch (openAiTurn(body)) {
          case 0:
            return {
              calls: [
                { name: 'graph_search', arguments: { query: 'Bastille' } },
                { name: 'graph_search', arguments: { query: 'Waterloo' } },
              ],
            };
          case 1: {
            const found = toolMessages(body).map((message) => JSON.parse(message.content).items[0].path);
            return {
              calls: [
                { name: 'find_path', arguments: { from_path: found[0], to_path: found[1] } },
                { name: 'render_scene', arguments: { query: 'The coronation of Napoleon, Paris, 1804', preset: 'hyper' } },
                { name: 'start_simulation', arguments: { prompt: 'What if the Continental System had failed in 1807?', mode: 'BRANCHING', fidelity: 2 } },
              ],
            };
          }
          default:
            return { text: 'The Bastille led to Waterloo through the coronation; the scene is rendered and the simulation is running.' };
        }
      };
      const reply = await viaAggregator.send(user, {
        content: 'From the Bastille to Waterloo, render the coronation and simulate a failed Continental System',
      });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const body = reply.body;
      assert.equal(body.status, 'completed');
      assert.deepEqual(body.model, { provider: 'aggregator', model: 'google/gemini-2.5-flash', offline: false });
      assert.match(body.reply, /^The Bastille led to Waterloo/);
      assert.deepEqual(
        body.tools_called.map((call: { tool: string }) => call.tool),
        ['graph_search', 'graph_search', 'find_path', 'render_scene', 'start_simulation'],
      );
      assert.deepEqual(
        body.tools_called.map((call: { credits: number }) => call.credits),
        [0, 0, 0, 1, 5],
      );
      assert.deepEqual(
        body.tools_called.map((call: { running_total: number }) => call.running_total),
        [0, 0, 0, 1, 6],
      );
      assert.equal(body.tools_called[2].output.found, true);
      assert.equal(body.usage.steps, 3);
      await assertLedgerMatches(user, body.message_id, [body]);

      const [first, second, third] = aggregator.requests;
      assert.equal(aggregator.headers[0]!.authorization, 'Bearer test-aggregator-key');
      assert.equal(first.tool_choice, 'auto');
      const offered = first.tools.map((tool: { type: string; function: { name: string } }) => `${tool.type}:${tool.function.name}`);
      for (const name of ['graph_search', 'find_path', 'traverse_moments', 'render_scene', 'start_simulation', 'follow_simulation', 'get_balance'])
        assert.ok(offered.includes(`function:${name}`), name);
      assert.equal(offered.includes('function:gen_render'), false);
      const render = first.tools.find((tool: { function: { name: string } }) => tool.function.name === 'render_scene').function.parameters;
      assert.equal(render.type, 'object');
      assert.deepEqual(render.required, ['query']);
      assert.equal(first.messages[0].role, 'system');
      // Each call answered by its id, in order, after the assistant turn that made them.
      const assistant = second.messages.find((message: { role: string; tool_calls?: unknown[] }) => message.role === 'assistant' && message.tool_calls);
      assert.equal(assistant.tool_calls.length, 2);
      assert.deepEqual(
        toolMessages(second).map((message) => message.tool_call_id),
        assistant.tool_calls.map((call: { id: string }) => call.id),
      );
      assert.equal(toolMessages(third).length, 5);
      const started = JSON.parse(toolMessages(third)[4]!.content);
      assert.equal(started.status, 'queued');
    });

    it('refunds a tool that fails and tells the model so', async () => {
      const user = await platform.user(50);
      simulation.startStatus = 500;
      aggregator.script = (body) =>
        openAiTurn(body) === 0
          ? { calls: [{ name: 'start_simulation', arguments: { prompt: 'A what-if of 1807' } }] }
          : { text: 'The simulation service failed; you were not charged.' };
      try {
        const body = (await viaAggregator.send(user, { content: 'simulate 1807' })).body;
        assert.equal(body.tools_called[0].status, 'failed');
        assert.equal(body.tools_called[0].credits, 0);
        const told = JSON.parse(toolMessages(aggregator.requests[1])[0]!.content);
        assert.equal(told.refunded, true);
        assert.match(told.error, /answered 500/);
        const entries = conductorEntries(await platform.history(user), body.message_id);
        assert.deepEqual(entries.map((entry) => entry.amount).sort(), [-8, 8]);
        assert.equal(await platform.balance(user), 50);
      } finally {
        simulation.startStatus = 202;
      }
    });

    it('pauses at the ceiling without asking the model again, and resumes with the call on confirmation', async () => {
      const user = await platform.user(50);
      await settings(user, viaAggregator, { spend_ceiling: 1 });
      aggregator.script = (body) =>
        openAiTurn(body) === 0 ? { calls: [{ name: 'render_scene', arguments: { query: 'The coronation of Napoleon, 1804' } }] } : { text: 'Rendered.' };
      const paused = (await viaAggregator.send(user, { content: 'render the coronation' })).body;
      assert.equal(paused.status, 'paused');
      assert.equal(paused.pending.reason, 'ceiling');
      assert.equal(paused.pending.credits, 2);
      assert.equal(aggregator.requests.length, 1);
      const done = (await viaAggregator.send(user, { content: 'yes', conversation_id: paused.conversation_id, pending_id: paused.pending.id })).body;
      assert.equal(done.status, 'completed');
      assert.equal(done.reply.split('\n')[0], 'Rendered.');
      assert.equal(done.spend.running_total, 2);
      assert.equal(aggregator.requests.length, 2);
      assert.match(JSON.parse(toolMessages(aggregator.requests[1])[0]!.content).url, /^\/api\/v1\/timepoints\//);
      await assertLedgerMatches(user, paused.message_id, [paused, done]);
    });

    it('stops at the step cap and says so', async () => {
      const user = await platform.user(10);
      aggregator.script = () => ({ calls: [{ name: 'graph_search', arguments: { query: 'Waterloo' } }] });
      const body = (await viaAggregator.send(user, { content: 'keep searching' })).body;
      assert.equal(body.status, 'stopped');
      assert.equal(body.stopped_by, 'step_cap');
      assert.equal(aggregator.requests.length, 4);
      assert.equal(body.tools_called.length, 3);
      assert.match(body.reply, /step cap \(4 model turns per request\)/);
    });

    it('stops at the token cap and says so', async () => {
      const user = await platform.user(10);
      aggregator.script = () => ({ calls: [{ name: 'render_scene', arguments: { query: 'The coronation of Napoleon, 1804' } }], tokens: 5000 });
      const body = (await viaAggregator.send(user, { content: 'render' })).body;
      assert.equal(body.stopped_by, 'token_cap');
      assert.equal(body.tools_called.length, 0);
      assert.equal(body.spend.running_total, 0);
      assert.match(body.reply, /token cap \(3000 model tokens per request\)/);
    });

    it('answers calls it cannot carry out with an error the model can act on', async () => {
      const user = await platform.user(10);
      aggregator.script = (body) =>
        openAiTurn(body) === 0
          ? {
              calls: [
                { name: 'render_scene', arguments: '{"query": ' },
                { name: 'launch_rocket', arguments: {} },
                { name: 'render_scene', arguments: { query: 'x' } },
              ],
            }
          : { text: 'I could not do that.' };
      const body = (await viaAggregator.send(user, { content: 'do odd things' })).body;
      assert.deepEqual(
        body.tools_called.map((call: { status: string }) => call.status),
        ['invalid', 'invalid', 'invalid'],
      );
      const told = toolMessages(aggregator.requests[1]).map((message) => JSON.parse(message.content));
      assert.match(told[0].error, /not valid JSON/);
      assert.match(told[1].error, /no tool named launch_rocket/);
      assert.match(told[2].error, /query/);
      assert.ok(told[2].suggestion);
      assert.equal(body.spend.running_total, 0);
    });

    it('answers 502 when the model fails before anything was done, and charges nothing', async () => {
      const user = await platform.user(10);
      aggregator.script = () => ({ status: 500 });
      const reply = await viaAggregator.send(user, { content: 'anything' });
      assert.equal(reply.status, 502);
      assert.match(reply.body.detail, /model could not be reached/);
      assert.equal(await platform.balance(user), 10);
    });
  });

  describe('the native provider (Gemini function calling)', () => {
    it('tells the model how long to answer, by verbosity', async () => {
      const user = await platform.user(10);
      native.script = () => ({ text: 'ok' });
      await settings(user, viaNative, { verbosity: 'brief' });
      await viaNative.send(user, { content: 'hello' });
      await settings(user, viaNative, { verbosity: 'detailed' });
      await viaNative.send(user, { content: 'hello' });
      const [brief, detailed] = native.requests;
      assert.equal(brief.generationConfig.maxOutputTokens, 400);
      assert.equal(detailed.generationConfig.maxOutputTokens, 4000);
      assert.match(brief.systemInstruction.parts[0].text, /one or two sentences/);
      assert.match(detailed.systemInstruction.parts[0].text, /Answer in full/);
    });

    it('declares the tools, reads several function calls, and answers each with a functionResponse', async () => {
      const user = await platform.user(50);
      native.script = (body): ScriptedTurn => {
        switch (geminiTurn(body)) {
          case 0:
            return {
              calls: [
                { name: 'graph_search', arguments: { query: 'Bastille' }, signature: 'sig-1' },
                { name: 'graph_search', arguments: { query: 'Waterloo' } },
              ],
            };
          case 1:
            return {
              calls: [
                { name: 'find_path', arguments: { from_path: BASTILLE, to_path: WATERLOO }, id: 'fc-7' },
                { name: 'get_balance', arguments: {}, id: 'fc-8' },
              ],
            };
          default:
            return { text: 'Two hops, and you have 50 credits.' };
        }
      };
      const reply = await viaNative.send(user, { content: 'From the Bastille to Waterloo, and my balance' });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const body = reply.body;
      assert.equal(body.status, 'completed');
      assert.deepEqual(body.model, { provider: 'native', model: 'gemini-2.5-flash', offline: false });
      assert.equal(body.reply.split('\n')[0], 'Two hops, and you have 50 credits.');
      assert.deepEqual(
        body.tools_called.map((call: { tool: string }) => call.tool),
        ['graph_search', 'graph_search', 'find_path', 'get_balance'],
      );

      const [first, second, third] = native.requests;
      assert.equal(native.headers[0]!['x-goog-api-key'], 'test-gemini-key');
      assert.deepEqual(first.toolConfig, { functionCallingConfig: { mode: 'AUTO' } });
      const declared = first.tools[0].functionDeclarations.map((declaration: { name: string }) => declaration.name);
      assert.ok(declared.includes('graph_search') && declared.includes('render_scene'));
      assert.match(first.systemInstruction.parts[0].text, /Tempora's conductor/);
      // The model's turn goes back as it came (signature included, no made-up ids), then the answers in one user turn.
      const modelTurn = second.contents[1];
      assert.equal(modelTurn.role, 'model');
      assert.deepEqual(modelTurn.parts[0], { functionCall: { name: 'graph_search', args: { query: 'Bastille' } }, thoughtSignature: 'sig-1' });
      const answers = second.contents[2];
      assert.equal(answers.role, 'user');
      assert.deepEqual(
        answers.parts.map((part: { functionResponse: { name: string; id?: string } }) => [part.functionResponse.name, part.functionResponse.id]),
        [
          ['graph_search', undefined],
          ['graph_search', undefined],
        ],
      );
      assert.equal(answers.parts[0].functionResponse.response.items[0].path, BASTILLE);
      const idAnswers = third.contents[4].parts.map(
        (part: { functionResponse: { name: string; id?: string; response: Record<string, unknown> } }) => part.functionResponse,
      );
      assert.deepEqual(
        idAnswers.map((answer: { id?: string }) => answer.id),
        ['fc-7', 'fc-8'],
      );
      assert.equal(idAnswers[0].response.found, true);
      assert.equal(idAnswers[1].response.balance, 50);
    });
  });
});
