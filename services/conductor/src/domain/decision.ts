/** The answer to a paused request: `confirm` runs the call it waits on, `decline` skips it. */
export type Decision = 'confirm' | 'decline';

const CONFIRM = /^\s*(yes|y|confirm(ed)?|go ahead|ok(ay)?|proceed|do it|sure)[\s.!]*$/i;
const DECLINE = /^\s*(no|n|decline|cancel|skip( it)?|don'?t|do not|stop)[\s.!]*$/i;

/** A follow-up that is only a yes or a no, read as the decision on a paused request. */
export function decisionIn(content: string): Decision | undefined {
  if (CONFIRM.test(content)) return 'confirm';
  if (DECLINE.test(content)) return 'decline';
  return undefined;
}
