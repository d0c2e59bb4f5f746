/**
 * Recorded agent replies (as a real model returned them for "Apollo 11 lands on the Moon, July 20 1969"),
 * served by the fake provider servers whatever the vendor protocol.
 */
export const RECORDED: Record<string, unknown> = {
  Judge: { valid: true, reason: 'A well-documented historical event.', query_type: 'historical', normalized_query: 'Apollo 11 lunar landing, 20 July 1969' },
  Timeline: {
    event_name: 'Apollo 11 lands on the Moon',
    year: 1969,
    month: 7,
    day: 20,
    time: '2017',
    era: 'contemporary',
    date_precision: 'exact',
    location: { name: 'Mission Control, Houston', city: 'houston', region: 'texas', country: 'united-states', latitude: 29.5593, longitude: -95.09 },
  },
  Grounding: {
    facts: ['The lunar module Eagle landed at 20:17 UTC on 20 July 1969.', 'Charlie Duke was CAPCOM during the landing.'],
    sources: [{ title: 'NASA: Apollo 11 Mission Overview', url: 'https://www.nasa.gov/mission/apollo-11/' }],
    verified: true,
    corrections: [],
  },
  Scene: {
    title: 'The Eagle Has Landed',
    setting: 'Mission Operations Control Room, Houston',
    atmosphere: 'Rows of controllers hold their breath as fuel runs low.',
    weather: 'humid Texas evening outside, cold air-conditioned room',
    lighting: 'fluorescent strips and the glow of consoles',
    sounds: ['crackling air-to-ground loop', 'the hum of consoles'],
    smells: ['cigarette smoke', 'stale coffee'],
    mood: 'tense then euphoric',
    description: 'Controllers watch telemetry as Eagle descends to the Sea of Tranquility.',
  },
  Characters: {
    characters: [
      { name: 'Charlie Duke', role: 'CAPCOM', is_historical: true, description: 'The voice of Mission Control to the crew.' },
      { name: 'Gene Kranz', role: 'Flight Director', is_historical: true, description: 'White team flight director, calm and decisive.' },
    ],
  },
  CharacterBio: {
    name: 'Charlie Duke',
    bio: 'Astronaut, CAPCOM for the landing.',
    appearance: 'Crew cut, headset',
    motivation: 'Get Eagle down safely',
    speaking_style: 'fast Southern drawl',
  },
  Graph: {
    relationships: [{ from: 'Gene Kranz', to: 'Charlie Duke', type: 'supervises', description: 'Kranz directs the flight; Duke relays to the crew.' }],
    factions: [{ name: 'White team', members: ['Gene Kranz', 'Charlie Duke'] }],
    tensions: ['Program alarms 1201 and 1202 threaten an abort.'],
  },
  Moment: {
    summary: 'Eagle touches down with seconds of fuel left.',
    stakes: 'An abort or a crash.',
    tension_level: 0.95,
    plot_beats: ['60 seconds call', '30 seconds call', 'Contact light'],
    significance: 'First crewed landing on another world.',
  },
  Camera: {
    shot: 'wide shot',
    angle: 'eye level from the back row',
    lens: '35mm',
    composition: 'rows of consoles leading to the big screen',
    focus: 'Charlie Duke',
    movement: 'slow push-in',
  },
  Dialog: {
    lines: [
      { speaker: 'Charlie Duke', text: 'Roger, Twan— Tranquility, we copy you on the ground.', tone: 'elated' },
      { speaker: 'Gene Kranz', text: 'Everybody settle down. Stay, no-stay in two minutes.', tone: 'firm' },
      { speaker: 'Charlie Duke', text: "You got a bunch of guys about to turn blue. We're breathing again.", tone: 'relieved' },
    ],
  },
  Critique: { score: 0.9, historical_accuracy: 0.95, dialog_quality: 0.85, revise: false, feedback: 'Accurate.', issues: [], anachronisms: [] },
  ImagePrompt: {
    prompt: 'Mission Control Houston 1969, controllers at consoles cheering, fluorescent light, 35mm film still',
    negative_prompt: 'modern screens',
    style: 'photorealistic',
  },
  Optimizer: { prompt: 'Mission Control Houston 1969, cheering controllers, consoles, 35mm film', negative_prompt: 'modern screens', aspect_ratio: '16:9' },
};

/** Which agent a request is for, from its system prompt ("You are the Scene agent"). */
export function agentOf(system: string): string {
  return /You are the (\w+)/.exec(system)?.[1] ?? 'unknown';
}

/** A 1×1 PNG. */
export const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
