/**
 * The statistics, errors and input checks: StatsInputError and its kinds, the checks every function runs first.
 * Ported to py_trainer/py_trainer/core/stats/errors.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

/** Stable error kinds, identical in the Python port. */
export type StatsErrorKind =
  | "empty" // no observations
  | "length_mismatch" // paired inputs of different lengths, or ragged tables
  | "too_few" // fewer observations than the method needs (e.g. an sd needs 2)
  | "zero_delta" // a power calculation for an effect of 0
  | "out_of_range" // a value outside its domain (probability not in (0, 1), Infinity, count > n)
  | "nan" // NaN (or null) where a number is required
  | "not_integer" // a count, size or seed that must be an integer
  | "bad_option" // an option that is not one of its allowed values
  | "label_type"; // kappa labels that mix numbers and strings, or are neither

/** Thrown for invalid input; `kind` is stable and matches the Python port's StatsInputError. */
export class StatsInputError extends Error {
  readonly kind: StatsErrorKind;
  constructor(kind: StatsErrorKind, message: string) {
    super(message);
    this.name = "StatsInputError";
    this.kind = kind;
  }
}

export function fail(kind: StatsErrorKind, message: string): never {
  throw new StatsInputError(kind, message);
}

export function checkNumber(name: string, x: unknown): number {
  if (typeof x !== "number" || Number.isNaN(x)) fail("nan", `${name} must be a number, got ${String(x)}`);
  if (!Number.isFinite(x)) fail("out_of_range", `${name} must be finite, got ${x}`);
  return x;
}

export function checkSample(name: string, xs: ReadonlyArray<number>, minN: number): void {
  if (xs.length === 0) fail("empty", `${name} is empty`);
  for (let i = 0; i < xs.length; i++) checkNumber(`${name}[${i}]`, xs[i]);
  if (xs.length < minN) fail("too_few", `${name} needs at least ${minN} values, got ${xs.length}`);
}

export function checkPair(a: ReadonlyArray<number>, b: ReadonlyArray<number>, minN: number): void {
  if (a.length === 0 || b.length === 0) fail("empty", "a and b must be non-empty");
  if (a.length !== b.length) fail("length_mismatch", `a has ${a.length} values, b has ${b.length}`);
  for (let i = 0; i < a.length; i++) checkNumber(`a[${i}]`, a[i]);
  for (let i = 0; i < b.length; i++) checkNumber(`b[${i}]`, b[i]);
  if (a.length < minN) fail("too_few", `needs at least ${minN} pairs, got ${a.length}`);
}

/** An open-interval probability such as confidence, alpha or power. */
export function checkProbability(name: string, p: unknown): number {
  if (typeof p !== "number" || Number.isNaN(p)) fail("nan", `${name} must be a number, got ${String(p)}`);
  if (!(p > 0 && p < 1)) fail("out_of_range", `${name} must be in (0, 1), got ${p}`);
  return p;
}

export function checkInteger(name: string, x: unknown, min: number): number {
  if (typeof x !== "number" || Number.isNaN(x)) fail("nan", `${name} must be a number, got ${String(x)}`);
  if (!Number.isInteger(x)) fail("not_integer", `${name} must be an integer, got ${x}`);
  if (x < min) fail("out_of_range", `${name} must be >= ${min}, got ${x}`);
  return x;
}
