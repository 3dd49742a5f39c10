/**
 * GRPO reward math: the rewards/graders and the reward registry (group-relative advantages are in
 * advantage.ts).
 * Source of truth; the port is py_trainer/py_trainer/core/task_rewards.py (same names in snake_case; the
 * trainer hands those ports to TRL, so what we train is what this file grades).
 *
 * Conventions
 * - Rewards are fractions in [0, 1] (format partial credit in fifths), weights are plain
 *   multipliers, and `null` (or NaN) means "unscorable", as a TRL reward function's None.
 * - The answer text every reward reads (normalizeAnswer with its character classes, extractAnswer,
 *   the tag-name and whitespace rules) is in answer-text.ts, the answer forms in answer-forms.ts.
 * - Bad input throws answer-text.ts's RewardInputError with a stable `kind` (RewardErrorKind), the
 *   same kinds in the same order of checks as the Python port.
 *
 * Registry (names, params and defaults; params use snake_case keys, as on the wire)
 * - "exact_match": 1 if a gold answer matches the completion's final <tag>...</tag>, else 0;
 *   null when the row has no usable gold answer. Params: tag ("answer"), require_tag (true),
 *   match ("exact" | "prefix" | "contains", "exact"), case_sensitive (false),
 *   ignore_punctuation (false).
 * - "exact_match_lenient": the same reward with defaults require_tag=false, match="contains",
 *   ignore_punctuation=true (the answer anywhere, punctuation-insensitive): the lenient grader
 *   the harness compares with the strict one by Cohen's kappa.
 * - "format": formatReward; never null. Params: think ("optional" | "required" | "forbidden",
 *   "optional"), partial_credit (false), answer_tag ("answer"), think_tag ("think").
 * - "final_number_match": 1 if finalNumber (the last <tag>, else the number after the last "=",
 *   else a bare number: the answer, never the echoed question) equals a trimmed gold answer;
 *   null when the row has no usable gold answer. Params: tag ("answer").
 * - "stops_after_answer": 1 if the completion is just an answer (a number, a <tag>number</tag>,
 *   or one equation ending in its result) with nothing after it, right or wrong; never null.
 *   Params: tag ("answer").
 */
import { finalNumberOf, isJustAnAnswer, trimmedGolds } from "./answer-forms.js";
import { extractAnswer, fail, isBlank, normalizeAnswer, TAG_NAME, validTag } from "./answer-text.js";

// ---------------------------------------------------------------------------------------------
// Exact match (the answer text it compares: answer-text.ts)

/** How a normalised candidate must relate to a normalised gold answer (compared word by word). */
export type MatchMode = "exact" | "prefix" | "contains";

/** Options of exactMatchReward (the registry's params, camelCased). */
export interface ExactMatchOptions {
  /** tag holding the answer; default "answer" */
  tag?: string;
  /** when false and no tag is found, the whole completion is the candidate; default true */
  requireTag?: boolean;
  /** "exact" (default): equal; "prefix": gold words start the candidate; "contains": gold words appear contiguously */
  match?: MatchMode;
  caseSensitive?: boolean;
  ignorePunctuation?: boolean;
}

function words(s: string): string[] {
  return s === "" ? [] : s.split(" ");
}

function wordsMatch(cand: string[], gold: string[], mode: MatchMode): boolean {
  if (mode === "exact") return cand.length === gold.length && cand.every((w, i) => w === gold[i]);
  const last = mode === "prefix" ? 0 : cand.length - gold.length;
  for (let start = 0; start <= last; start++) {
    let ok = start + gold.length <= cand.length;
    for (let j = 0; ok && j < gold.length; j++) ok = cand[start + j] === gold[j];
    if (ok) return true;
  }
  return false;
}

/**
 * 1 if the completion's answer matches any gold answer after normalizeAnswer, else 0. The
 * candidate is the last <tag>...</tag> (extractAnswer); without one it scores 0, or with
 * requireTag = false the whole completion is the candidate. Gold answers that normalise to ""
 * are ignored; if none is left, throws kind "empty".
 */
export function exactMatchReward(completion: string, answers: string | ReadonlyArray<string>, options: ExactMatchOptions = {}): number {
  checkExactMatchOptions(options);
  const golds = goldWords(typeof answers === "string" ? [answers] : answers, options);
  if (golds.length === 0) fail("empty", "no non-empty gold answer");
  return matchGolds(completion, golds, options);
}

function checkExactMatchOptions(options: ExactMatchOptions): void {
  const tag = options.tag ?? "answer";
  if (!validTag(tag)) fail("param_value", `tag must match ${TAG_NAME.source}, got ${JSON.stringify(tag)}`);
  const mode = options.match ?? "exact";
  if (mode !== "exact" && mode !== "prefix" && mode !== "contains") {
    fail("param_value", `match must be "exact", "prefix" or "contains", got ${String(mode)}`);
  }
}

function goldWords(answers: ReadonlyArray<string>, options: ExactMatchOptions): string[][] {
  const out: string[][] = [];
  for (const a of answers) {
    const w = words(normalizeAnswer(a, options));
    if (w.length > 0) out.push(w);
  }
  return out;
}

function matchGolds(completion: string, golds: string[][], options: ExactMatchOptions): number {
  let candidate = extractAnswer(completion, options.tag ?? "answer");
  if (candidate === null) {
    if (options.requireTag ?? true) return 0;
    candidate = completion;
  }
  const mode = options.match ?? "exact";
  const cand = words(normalizeAnswer(candidate, options));
  for (const gold of golds) if (wordsMatch(cand, gold, mode)) return 1;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Format

/** What formatReward requires (the registry's params, camelCased). */
export interface FormatSpec {
  /** "optional" (default): at most one think block; "required": exactly one; "forbidden": none */
  think?: "optional" | "required" | "forbidden";
  /** score the fraction of the five checks passed instead of all-or-nothing; default false */
  partialCredit?: boolean;
  answerTag?: string;
  thinkTag?: string;
}

function countOf(s: string, sub: string): number {
  let n = 0;
  for (let i = s.indexOf(sub); i !== -1; i = s.indexOf(sub, i + sub.length)) n++;
  return n;
}

/**
 * Whether the completion is [<think>...</think>] <answer>...</answer> with only whitespace
 * around and between the blocks. Five checks: (1) exactly one <answer>; (2) exactly one
 * </answer>, after the <answer> if there is exactly one; (3) the answer block (1 and 2) is not
 * blank; (4) the answer block is well formed and the think rule holds (a think block, when
 * present or required, closes before the answer opens); (5) 4 holds and there is nothing but
 * whitespace outside the blocks. Score: 1 if all pass, else 0; with partialCredit, passed / 5.
 */
export function formatReward(completion: string, spec: FormatSpec = {}): number {
  const think = spec.think ?? "optional";
  if (think !== "optional" && think !== "required" && think !== "forbidden") {
    fail("param_value", `think must be "optional", "required" or "forbidden", got ${String(think)}`);
  }
  const answerTag = spec.answerTag ?? "answer";
  const thinkTag = spec.thinkTag ?? "think";
  for (const [name, tag] of [
    ["answer_tag", answerTag],
    ["think_tag", thinkTag],
  ] as const) {
    if (!validTag(tag)) fail("param_value", `${name} must match ${TAG_NAME.source}, got ${JSON.stringify(tag)}`);
  }
  if (answerTag === thinkTag) fail("param_value", "answer_tag and think_tag must differ");
  const aOpen = `<${answerTag}>`;
  const aClose = `</${answerTag}>`;
  const tOpen = `<${thinkTag}>`;
  const tClose = `</${thinkTag}>`;
  const iAO = completion.indexOf(aOpen);
  const iAC = completion.indexOf(aClose);
  const iTO = completion.indexOf(tOpen);
  const iTC = completion.indexOf(tClose);
  const nAO = countOf(completion, aOpen);
  const nAC = countOf(completion, aClose);
  const nTO = countOf(completion, tOpen);
  const nTC = countOf(completion, tClose);

  const oneOpen = nAO === 1;
  const oneClose = nAC === 1 && (nAO !== 1 || iAO < iAC);
  const answerBlock = oneOpen && oneClose;
  const nonBlank = answerBlock && !isBlank(completion.slice(iAO + aOpen.length, iAC));
  const noThink = nTO === 0 && nTC === 0;
  const thinkBlock = nTO === 1 && nTC === 1 && iTO < iTC;
  const thinkBeforeAnswer = thinkBlock && iTC < iAO;
  const thinkRule = think === "forbidden" ? noThink : think === "required" ? thinkBeforeAnswer : noThink || thinkBeforeAnswer;
  const thinkOk = answerBlock && thinkRule;
  let clean = false;
  if (thinkOk) {
    const before = thinkBeforeAnswer ? completion.slice(0, iTO) + completion.slice(iTC + tClose.length, iAO) : completion.slice(0, iAO);
    clean = isBlank(before) && isBlank(completion.slice(iAC + aClose.length));
  }
  const checks = [oneOpen, oneClose, nonBlank, thinkOk, clean];
  let passed = 0;
  for (const c of checks) if (c) passed++;
  if (spec.partialCredit ?? false) return passed / 5;
  return passed === 5 ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Answers as a chat model writes them (answer-forms.ts)

function checkTag(tag: string): void {
  if (!validTag(tag)) fail("param_value", `tag must match ${TAG_NAME.source}, got ${JSON.stringify(tag)}`);
}

/** The completion's answer, never the echoed question (answer-forms.ts finalNumberOf), or null. */
export function finalNumber(completion: string, tag = "answer"): string | null {
  checkTag(tag);
  return finalNumberOf(completion, extractAnswer(completion, tag));
}

/** 1 if finalNumber equals a gold answer (both trimmed), else 0; throws kind "empty" if none is non-blank. */
export function finalNumberMatchReward(completion: string, answers: string | ReadonlyArray<string>, options: { tag?: string } = {}): number {
  const tag = options.tag ?? "answer";
  checkTag(tag);
  const golds = trimmedGolds(typeof answers === "string" ? [answers] : answers);
  if (golds.length === 0) fail("empty", "no non-empty gold answer");
  const got = finalNumber(completion, tag);
  return got !== null && golds.includes(got) ? 1 : 0;
}

/** 1 if the completion is just an answer and ends there (answer-forms.ts isJustAnAnswer), else 0. */
export function stopsAfterAnswerReward(completion: string, options: { tag?: string } = {}): number {
  const tag = options.tag ?? "answer";
  checkTag(tag);
  return isJustAnAnswer(completion, tag) ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Composition and the registry

/** Scores one completion against the row's gold answers; null = unscorable. */
export type Scorer = (completion: string, answers: ReadonlyArray<string>) => number | null;

/** A scorer with its weight in a composed reward. */
export interface WeightedScorer {
  score: Scorer;
  weight: number;
}

function checkWeight(name: string, w: unknown): number {
  if (typeof w !== "number") fail("param_type", `${name} must be a number, got ${typeof w}`);
  if (Number.isNaN(w)) fail("nan", `${name} must not be NaN`);
  if (!Number.isFinite(w)) fail("param_value", `${name} must be finite, got ${w}`);
  return w;
}

/**
 * Weighted sum of the scorers per completion, as TRL's nansum over reward functions: a null (or
 * NaN) score is skipped; if every scorer returns null the completion is unscorable (null).
 */
export function composeRewards(fns: ReadonlyArray<WeightedScorer>): Scorer {
  if (fns.length === 0) fail("empty", "composeRewards needs at least one reward");
  const weights = fns.map((f, i) => checkWeight(`weights[${i}]`, f.weight));
  return (completion, answers) => {
    let total = 0;
    let any = false;
    for (let i = 0; i < fns.length; i++) {
      const v = fns[i].score(completion, answers);
      if (v === null || Number.isNaN(v)) continue;
      total += weights[i] * v;
      any = true;
    }
    return any ? total : null;
  };
}

/** A registry param value (the JSON types a google.protobuf.Struct can carry that we use). */
export type ParamValue = boolean | string | number;

/** A reward or grader by registry name, as in the proto's RewardSpec. */
export interface RewardSpec {
  name: string;
  /** default 1 */
  weight?: number;
  /** snake_case keys; see the registry in the module docs */
  params?: Record<string, unknown>;
}

/** A validated RewardSpec: effective params (defaults filled) and the unweighted scorer. */
export interface BuiltReward {
  name: string;
  weight: number;
  params: Record<string, ParamValue>;
  score: Scorer;
}

interface ParamDef {
  type: "boolean" | "string";
  default: ParamValue;
  /** allowed values for a string param (an enum), or "tag" for a tag name */
  allowed?: readonly string[] | "tag";
}

const EXACT_MATCH_PARAMS: Record<string, ParamDef> = {
  tag: { type: "string", default: "answer", allowed: "tag" },
  require_tag: { type: "boolean", default: true },
  match: { type: "string", default: "exact", allowed: ["exact", "prefix", "contains"] },
  case_sensitive: { type: "boolean", default: false },
  ignore_punctuation: { type: "boolean", default: false },
};

const REGISTRY: Record<string, { params: Record<string, ParamDef>; make: (p: Record<string, ParamValue>) => Scorer }> = {
  exact_match: { params: EXACT_MATCH_PARAMS, make: exactMatchScorer },
  exact_match_lenient: {
    params: {
      ...EXACT_MATCH_PARAMS,
      require_tag: { type: "boolean", default: false },
      match: { ...EXACT_MATCH_PARAMS.match, default: "contains" },
      ignore_punctuation: { type: "boolean", default: true },
    },
    make: exactMatchScorer,
  },
  final_number_match: {
    params: { tag: { type: "string", default: "answer", allowed: "tag" } },
    make: (p) => (completion, answers) => {
      const golds = trimmedGolds(answers);
      return golds.length === 0 ? null : finalNumberMatchReward(completion, golds, { tag: p.tag as string });
    },
  },
  stops_after_answer: {
    params: { tag: { type: "string", default: "answer", allowed: "tag" } },
    make: (p) => (completion) => stopsAfterAnswerReward(completion, { tag: p.tag as string }),
  },
  format: {
    params: {
      think: { type: "string", default: "optional", allowed: ["optional", "required", "forbidden"] },
      partial_credit: { type: "boolean", default: false },
      answer_tag: { type: "string", default: "answer", allowed: "tag" },
      think_tag: { type: "string", default: "think", allowed: "tag" },
    },
    make: (p) => {
      const spec: FormatSpec = {
        think: p.think as FormatSpec["think"],
        partialCredit: p.partial_credit as boolean,
        answerTag: p.answer_tag as string,
        thinkTag: p.think_tag as string,
      };
      if (spec.answerTag === spec.thinkTag) fail("param_value", "params.answer_tag and params.think_tag must differ");
      return (completion) => formatReward(completion, spec);
    },
  },
};

function exactMatchScorer(p: Record<string, ParamValue>): Scorer {
  const options: ExactMatchOptions = {
    tag: p.tag as string,
    requireTag: p.require_tag as boolean,
    match: p.match as MatchMode,
    caseSensitive: p.case_sensitive as boolean,
    ignorePunctuation: p.ignore_punctuation as boolean,
  };
  return (completion, answers) => {
    const golds = goldWords(answers, options);
    return golds.length === 0 ? null : matchGolds(completion, golds, options);
  };
}

/** Registry names, sorted. */
export function rewardNames(): string[] {
  return Object.keys(REGISTRY).sort();
}

/**
 * Validates a RewardSpec against the registry and builds its scorer (unweighted; the weight is
 * applied by composeRewardSpecs). Errors name the field: unknown_reward (name), unknown_param,
 * param_type or param_value (params.<key> or weight), nan (weight).
 */
export function buildReward(spec: RewardSpec): BuiltReward {
  const entry = Object.prototype.hasOwnProperty.call(REGISTRY, spec.name) ? REGISTRY[spec.name] : undefined;
  if (entry === undefined) {
    fail("unknown_reward", `name: unknown reward ${JSON.stringify(spec.name)}; known: ${rewardNames().join(", ")}`);
  }
  for (const key of Object.keys(spec)) {
    if (key !== "name" && key !== "weight" && key !== "params") fail("unknown_param", `${key}: a reward spec has name, weight and params`);
  }
  const weight = spec.weight === undefined || spec.weight === null ? 1 : checkWeight("weight", spec.weight);
  const given = spec.params === undefined || spec.params === null ? {} : spec.params;
  if (typeof given !== "object" || given === null || Array.isArray(given)) fail("param_type", "params must be an object");
  for (const key of Object.keys(given)) {
    if (!Object.prototype.hasOwnProperty.call(entry.params, key)) {
      fail("unknown_param", `params.${key}: ${spec.name} takes ${Object.keys(entry.params).sort().join(", ")}`);
    }
  }
  const params: Record<string, ParamValue> = {};
  for (const key of Object.keys(entry.params).sort()) {
    const def = entry.params[key];
    const value = Object.prototype.hasOwnProperty.call(given, key) ? given[key] : def.default;
    if (typeof value !== def.type) fail("param_type", `params.${key} must be a ${def.type}, got ${value === null ? "null" : typeof value}`);
    if (def.allowed === "tag" && !validTag(value as string)) {
      fail("param_value", `params.${key} must match ${TAG_NAME.source}, got ${JSON.stringify(value)}`);
    }
    if (Array.isArray(def.allowed) && !def.allowed.includes(value as string)) {
      fail("param_value", `params.${key} must be one of ${def.allowed.join(", ")}, got ${JSON.stringify(value)}`);
    }
    params[key] = value as ParamValue;
  }
  return { name: spec.name, weight, params, score: entry.make(params) };
}

/** buildReward for each spec, then composeRewards with the specs' weights. */
export function composeRewardSpecs(specs: ReadonlyArray<RewardSpec>): Scorer {
  if (specs.length === 0) fail("empty", "no reward specs");
  return composeRewards(specs.map((s) => buildReward(s)));
}
