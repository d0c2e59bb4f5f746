// How the offline planner reads a request: clauses joined by "then", "and" or commas, each an intent (a path,
// a traversal, a moment, a render, a simulation, the balance, a follow-up or a summary) with its subject.
import type { SIMULATION_MODES } from './platform-tools.ts';

type Mode = (typeof SIMULATION_MODES)[number];

export interface Subject {
  text: string;
  /** Words to search the graph for; empty when the subject refers back ("it", "that"). */
  query: string;
  year?: number;
}

export type Intent =
  | { kind: 'path'; from: Subject; to: Subject }
  | { kind: 'traverse'; subject: Subject; direction: 'past' | 'future' }
  | { kind: 'moment'; subject: Subject }
  | { kind: 'render'; subject: Subject; image?: boolean }
  | { kind: 'simulate'; prompt: string; mode: Mode; fidelity?: number }
  | { kind: 'balance' }
  | { kind: 'follow' }
  | { kind: 'summarize' };

const VERBS =
  'render|depict|paint|draw|illustrate|visuali[sz]e|picture|simulate|show|find|tell|trace|explain|search|look|what|how|check|follow|summari[sz]e|give|list';
const CLAUSE_BREAK = new RegExp(`\\s*(?:[.;!?]+(?:\\s+|$)|,?\\s*\\bthen\\b\\s*|,?\\s+and\\s+(?=(?:${VERBS})\\b)|,\\s*(?=(?:${VERBS})\\b))`, 'i');
const STOPWORDS = new Set(
  'a an the of in on at to from into me us show tell find trace explain search look give list what which who how when where why was were is are did do does led lead leads caused cause about please then and or with without image picture scene render depict paint draw illustrate visualize visualise moment moments event events happened happen its their his her for by as that this'.split(
    ' ',
  ),
);
const BACK_REFERENCE = /^(it|this|that|them|there|the same|this moment|that moment|this scene|that scene|it again)$/i;

/** A clause's subject: its words less the filler, and a year when it names one (BCE as negative). */
function subjectOf(text: string): Subject {
  const trimmed = text.trim().replace(/^[,:\s]+|[,:?.!\s]+$/g, '');
  let year: number | undefined;
  let rest = trimmed;
  const bce = /\b(\d{1,5})\s*(?:BCE|BC|B\.C\.(?:E\.)?)(?=\W|$)/i.exec(rest);
  if (bce) {
    year = -Number(bce[1]);
    rest = rest.replace(bce[0], ' ');
  } else {
    const ce = /\b(\d{3,4})\b(?:\s*(?:CE|AD))?/.exec(rest);
    if (ce) {
      year = Number(ce[1]);
      rest = rest.replace(ce[0], ' ');
    }
  }
  if (BACK_REFERENCE.test(trimmed)) return { text: trimmed, query: '' };
  const words = rest
    .replace(/[^\p{L}\p{N}'\s-]/gu, ' ')
    .split(/\s+/)
    .filter((word) => word && !STOPWORDS.has(word.toLowerCase()));
  return { text: trimmed, query: words.join(' '), ...(year === undefined ? {} : { year }) };
}

function simulationMode(clause: string): Mode {
  if (/\b(backward|work back|from the outcome|how could .+ (reach|come about))\b/i.test(clause)) return 'PORTAL';
  if (/\b(cycl\w*|loop|recurr\w*|feedback)\b/i.test(clause)) return 'CYCLICAL';
  if (/\b(drama\w*|narrative|story arc|tension|acts?)\b/i.test(clause)) return 'DIRECTORIAL';
  if (/\b(what[- ]if|would (have )?\w+|had\b|counterfactual|instead|alternate|alternative|branch\w*)\b/i.test(clause)) return 'BRANCHING';
  return 'FORWARD';
}

function fidelityOf(clause: string): number | undefined {
  const named = /\bfidelity\s*(?:of\s*)?([1-5])\b/i.exec(clause);
  if (named) return Number(named[1]);
  if (/\b(quick|rough|cheap)\b/i.test(clause)) return 1;
  return undefined;
}

function intentOf(clause: string): Intent {
  if (/\b(balance|credits?\s+(left|remaining|do i have)|how many credits)\b/i.test(clause)) return { kind: 'balance' };
  if (/\b(summar\w+|results?|outcome)\b.*\bsimulation\b/i.test(clause) && !/\bsimulate\b/i.test(clause)) return { kind: 'summarize' };
  if (/\b(status|progress)\b.*\bsimulation\b|\bsimulation\b.*\b(status|progress|done|finished|ready)\b/i.test(clause)) return { kind: 'follow' };
  if (/\b(simulat\w*|what would (have )?happen\w*|what[- ]if|counterfactual|alternate history)\b/i.test(clause)) {
    const prompt = clause.replace(/^\s*(please\s+)?(simulate|run a simulation of|simulation of)\s*/i, '').trim();
    const fidelity = fidelityOf(clause);
    return { kind: 'simulate', prompt: prompt.length >= 3 ? prompt : clause.trim(), mode: simulationMode(clause), ...(fidelity ? { fidelity } : {}) };
  }
  const render =
    /\b(render|depict|paint|draw|illustrate|visuali[sz]e|picture)\b\s*(.*)$/i.exec(clause) ?? /\b(?:show me|give me)\s+the\s+scene\s+of\s+(.*)$/i.exec(clause);
  if (render) {
    let text = render[render.length - 1] ?? '';
    let image: boolean | undefined;
    if (/\b(without (an )?image|text only|no image)\b/i.test(text)) image = false;
    else if (/\b(with (an )?image|with a picture|illustrated|paint|draw|picture)\b/i.test(clause)) image = true;
    text = text.replace(/\b(with(out)? (an )?(image|picture)|text only|no image)\b/gi, ' ');
    return { kind: 'render', subject: subjectOf(text), ...(image === undefined ? {} : { image }) };
  }
  const between =
    /\bfrom\s+(.+?)\s+to\s+(.+)$/i.exec(clause) ?? /\bbetween\s+(.+?)\s+and\s+(.+)$/i.exec(clause) ?? /\bhow did\s+(.+?)\s+lead to\s+(.+)$/i.exec(clause);
  if (between) return { kind: 'path', from: subjectOf(between[1]!), to: subjectOf(between[2]!) };
  const past =
    /\b(?:what|which events?)\s+(?:led to|caused|preceded|brought about)\s+(.+)$/i.exec(clause) ??
    /\b(?:causes|origins|roots|background) of\s+(.+)$/i.exec(clause);
  if (past) return { kind: 'traverse', subject: subjectOf(past[1]!), direction: 'past' };
  const future =
    /\b(?:consequences|effects|aftermath|legacy|results) of\s+(.+)$/i.exec(clause) ??
    /\bwhat (?:followed|came after)\s+(.+)$/i.exec(clause) ??
    /\bwhat (?:did\s+)?(.+?)\s+(?:lead to|cause)\b/i.exec(clause);
  if (future) return { kind: 'traverse', subject: subjectOf(future[1]!), direction: 'future' };
  return { kind: 'moment', subject: subjectOf(clause) };
}

/** The request's intents, clause by clause, in the order written. */
export function parseRequest(request: string): Intent[] {
  return request
    .split(CLAUSE_BREAK)
    .map((clause) => clause?.trim() ?? '')
    .filter((clause) => clause.length > 1)
    .map(intentOf)
    .filter((intent) => intent.kind !== 'moment' || intent.subject.query || intent.subject.year !== undefined || BACK_REFERENCE.test(intent.subject.text));
}
