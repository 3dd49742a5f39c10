/** What code run in this process prints: console.log / console.error captured as lines. */

export interface Captured<T> {
  value: T;
  /** console.log lines (arguments joined by a space) */
  out: string[];
  /** console.error lines */
  err: string[];
}

function capture(): { out: string[]; err: string[]; restore: () => void } {
  const [log, error] = [console.log, console.error];
  const out: string[] = [];
  const err: string[] = [];
  console.log = (...a: unknown[]) => out.push(a.join(" "));
  console.error = (...a: unknown[]) => err.push(a.join(" "));
  return { out, err, restore: () => ([console.log, console.error] = [log, error]) };
}

/**
 * Run `f` with console.log and console.error captured (restored afterwards, also when it throws).
 * `f` gets the arrays as they fill, for assertions made while it runs.
 */
export async function captureConsole<T>(f: (out: string[], err: string[]) => T | Promise<T>): Promise<Captured<T>> {
  const { out, err, restore } = capture();
  try {
    return { value: await f(out, err), out, err };
  } finally {
    restore();
  }
}

/** captureConsole for synchronous code. */
export function captureConsoleSync<T>(f: () => T): Captured<T> {
  const { out, err, restore } = capture();
  try {
    return { value: f(), out, err };
  } finally {
    restore();
  }
}
