import type { PriceBook } from './prices.ts';
import type { CallRecord, Caps, Pause, RunOutcome } from './run-types.ts';
import type { ConductorSettings, Verbosity } from './settings.ts';
import type { ConductorTool } from './tools.ts';

const credits = (amount: number) => `${amount} credit${amount === 1 ? '' : 's'}`;

const VERBOSITY_RULES: Record<Verbosity, string> = {
  brief: 'Answer in one or two sentences, with no lists.',
  normal: 'Answer in a short paragraph per result, naming the moments, paths and scenes you found.',
  detailed:
    'Answer in full: every moment of a path or traversal with its year, the scenes with their characters, each simulation with its mode and status, and what each paid call cost.',
};

/** The model's instructions: what the tools are, what they cost, and the account's options. */
export function systemPrompt(settings: ConductorSettings, tools: ConductorTool[], prices: PriceBook | undefined): string {
  const paid = tools.filter((tool) => !tool.readOnly).map((tool) => tool.name);
  const priceLines: string[] = [];
  if (prices) {
    for (const [label, price] of [
      ['render_scene, preset balanced', () => prices.scene('balanced', false).amount],
      ['render_scene with an image', () => prices.cost('generation.image')],
      ['start_simulation at fidelity 3', () => prices.simulation(3).amount],
    ] as const) {
      try {
        priceLines.push(`${label}: ${credits(price())}${label.includes('image') ? ' more' : ''}`);
      } catch {
        // An operation the gateway does not price is refused when called; it is left out here.
      }
    }
  }
  return [
    "You are Tempora's conductor. Tempora holds history as a temporal causal graph of moments; you serve one user's request by calling tools, then answer in prose.",
    'Moments are addressed by canonical paths (/year/month/day/HHMM/country/region/city/slug): find them with graph_search before calling a tool that takes a path.',
    `Free tools: ${tools
      .filter((tool) => tool.readOnly)
      .map((tool) => tool.name)
      .join(', ')}. Paid tools: ${paid.join(', ')}${priceLines.length ? ` (${priceLines.join('; ')})` : ''}.`,
    'Calls you make in one turn run in parallel: make independent calls together, and call a tool again only when its answer changes what you do.',
    `The user's spend ceiling is ${credits(settings.spend_ceiling)} per request; the conductor itself pauses for the user's confirmation when a call needs it, so do not ask for permission in words.`,
    `Scenes are rendered ${settings.default_render === 'rich' ? 'with an image' : 'as text, without an image'} unless the user asks otherwise.`,
    VERBOSITY_RULES[settings.verbosity],
  ].join('\n');
}

/** The calls of a run in one line each, for a reply that stops or pauses before the model's answer. */
function doneSoFar(calls: CallRecord[], verbosity: Verbosity): string {
  if (calls.length === 0) return '';
  if (verbosity === 'brief') return `${calls.length} tool call${calls.length === 1 ? '' : 's'} made so far.`;
  return `So far: ${calls.map((call) => `${call.tool} (${call.note}${call.credits ? `; ${credits(call.credits)}` : ''})`).join('; ')}.`;
}

function pauseText(pause: Pause): string {
  const cost = `${pause.action}: it costs ${credits(pause.credits)}`;
  switch (pause.reason) {
    case 'autonomy':
      return `Paused before I ${cost}, which would bring this request to ${credits(pause.running_total + pause.credits)}. Your autonomy setting asks me to check before paid calls. Confirm to go ahead, or decline to skip it.`;
    case 'ceiling':
      return `Paused before I ${cost}, which would bring this request to ${credits(pause.running_total + pause.credits)}, past your spend ceiling of ${credits(pause.ceiling)}. Confirm to go ahead anyway, or decline to skip it.`;
    case 'balance':
      return `Paused before I ${cost}, but your balance is ${credits(pause.available ?? 0)}. Add credits and confirm to go ahead, or decline to skip it.`;
  }
}

function stopText(outcome: RunOutcome, caps: Caps): string {
  switch (outcome.stopped_by) {
    case 'step_cap':
      return `Stopped: the step cap (${caps.steps} model turns per request) ended this request before an answer was reached.`;
    case 'token_cap':
      return `Stopped: the token cap (${caps.tokens} model tokens per request) ended this request before an answer was reached.`;
    default:
      return `Stopped: the model could not be reached (${outcome.text}).`;
  }
}

/** The reply the user reads: the model's answer, or what the conductor says about a pause or a cap, and the spend. */
export function composeReply(outcome: RunOutcome, settings: ConductorSettings, caps: Caps): string {
  const parts: string[] = [];
  if (outcome.declined) parts.push(`As you declined, I did not ${outcome.declined.action}.`);
  if (outcome.status === 'completed') parts.push(outcome.text.trim() || 'Done.');
  else {
    parts.push(outcome.status === 'paused' ? pauseText(outcome.pause!) : stopText(outcome, caps));
    const done = doneSoFar(outcome.calls, settings.verbosity);
    if (done) parts.push(done);
  }
  if (settings.verbosity !== 'brief') {
    const spent = outcome.state.running_total - outcome.started_total;
    parts.push(
      `Credits: ${credits(spent)} spent in this reply, ${credits(outcome.state.running_total)} on this request so far (ceiling ${credits(settings.spend_ceiling)}).`,
    );
  }
  return parts.join('\n');
}
