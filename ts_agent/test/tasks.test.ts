import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import { MAX_WORDS, MIN_WORDS } from "../src/task-sets/narratives.js";
import { DEFAULT_HELDOUT_PER_TYPOLOGY, DEFAULT_PER_TYPOLOGY, amlMeta, generateAmlTasks, main, toJsonl, type AmlRow } from "../src/task-sets/aml-tasks.js";
import { defaultTasksPath, loadTaskFile, loadTasks, metaPathFor, splitTasks } from "../src/agent/eval/tasks.js";
import { LABELS, PROMPT_INSTRUCTION, TYPOLOGIES, formatPrompt } from "../src/task-sets/typologies.js";
import { captureConsoleSync } from "./helpers/console.js";

const all = generateAmlTasks();
/** train + test: the rows the 5 shared templates per typology produce */
const rows = all.filter((r) => r.split !== "test_heldout_template");
const tmp = mkdtempSync(join(tmpdir(), "aml-tasks-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function countBy<T>(items: readonly T[], key: (x: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of items) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
  return m;
}

describe("generateAmlTasks", () => {
  test("same seed gives the same bytes; another seed differs", () => {
    assert.equal(toJsonl(generateAmlTasks({ seed: 7 })), toJsonl(generateAmlTasks({ seed: 7 })));
    assert.equal(toJsonl(generateAmlTasks()), toJsonl(all));
    assert.notEqual(toJsonl(generateAmlTasks({ seed: 8 })), toJsonl(generateAmlTasks({ seed: 7 })));
  });

  test("at least 8 typologies, canonical labels are lowercase words with underscores", () => {
    assert.ok(TYPOLOGIES.length >= 8);
    for (const t of TYPOLOGIES) {
      assert.match(t.label, /^[a-z]+(_[a-z]+)*$/);
      assert.equal(t.answers[0], t.label);
      for (const a of t.answers) assert.equal(a, a.toLowerCase());
    }
    assert.equal(new Set(LABELS).size, LABELS.length);
  });

  test("balanced: >= 800 rows, the same count per typology, every template used", () => {
    assert.ok(rows.length >= 800);
    const perTypology = countBy(rows, (r) => r.typology);
    assert.deepEqual([...perTypology.keys()].sort(), [...LABELS].sort());
    for (const n of perTypology.values()) assert.equal(n, DEFAULT_PER_TYPOLOGY);
    const perTemplate = countBy(rows, (r) => r.template);
    for (const t of LABELS) {
      const templates = [...perTemplate.keys()].filter((k) => k.startsWith(`${t}/`));
      assert.ok(templates.length >= 4, `${t} has ${templates.length} templates`);
      const counts = templates.map((k) => perTemplate.get(k)!);
      assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `${t} templates unbalanced: ${counts}`);
    }
  });

  test("held-out-template split: its templates appear in no train or test row, balanced by typology, ids after the rest", () => {
    const held = splitTasks(all, "test_heldout_template");
    assert.equal(held.length, DEFAULT_HELDOUT_PER_TYPOLOGY * LABELS.length);
    const perTypology = countBy(held, (r) => r.typology);
    for (const l of LABELS) assert.equal(perTypology.get(l), DEFAULT_HELDOUT_PER_TYPOLOGY);
    const seen = new Set(rows.map((r) => r.template));
    for (const r of held) assert.ok(!seen.has(r.template), `${r.id} uses a training template ${r.template}`);
    assert.deepEqual(all.slice(0, rows.length), rows); // appended: train/test rows and ids unchanged
    for (const r of held) {
      const n = r.narrative.trim().split(/\s+/).length;
      assert.ok(n >= MIN_WORDS && n <= MAX_WORDS, `${r.id} has ${n} words`);
      const text = r.narrative.toLowerCase();
      assert.ok(!text.includes(r.typology) && !text.includes(r.typology.replace(/_/g, " ")), `${r.id} names its label`);
    }
  });

  test("split is about 70/30, stratified by typology, test >= 240", () => {
    const test_ = splitTasks(all, "test");
    const train = splitTasks(rows, "train");
    assert.equal(test_.length + train.length, rows.length);
    assert.ok(test_.length >= 240, `test has ${test_.length}`);
    const frac = test_.length / rows.length;
    assert.ok(frac > 0.27 && frac < 0.33, `test fraction ${frac}`);
    const perTypology = countBy(test_, (r) => r.typology);
    const counts = LABELS.map((l) => perTypology.get(l) ?? 0);
    assert.ok(Math.max(...counts) - Math.min(...counts) === 0, `test per typology: ${counts}`);
    // a held-out case is not a copy of a training case
    const trainNarratives = new Set(train.map((r) => r.narrative));
    for (const r of test_) assert.ok(!trainNarratives.has(r.narrative));
  });

  test("ids are unique and sequential; narratives unique", () => {
    rows.forEach((r, i) => assert.equal(r.id, `aml-${String(i + 1).padStart(5, "0")}`));
    assert.equal(new Set(all.map((r) => r.narrative)).size, all.length);
  });

  test("every prompt lists the labels, holds its narrative, asks for <answer>, ends with a newline", () => {
    for (const r of rows) {
      assert.ok(r.prompt.startsWith(PROMPT_INSTRUCTION));
      for (const l of LABELS) assert.ok(r.prompt.includes(l), `${r.id} prompt lacks ${l}`);
      assert.ok(r.prompt.includes("<answer>label</answer>"));
      assert.equal(r.prompt, formatPrompt(r.narrative));
      assert.ok(r.prompt.endsWith("\n") && !r.prompt.endsWith("\n\n"));
    }
  });

  test("answers[0] is the one correct canonical label; no other label is accepted", () => {
    for (const r of rows) {
      assert.equal(r.answers[0], r.typology);
      const labelsInAnswers = r.answers.filter((a) => LABELS.includes(a));
      assert.deepEqual(labelsInAnswers, [r.typology], `${r.id}: ${r.answers}`);
      assert.ok(r.template.startsWith(`${r.typology}/`));
    }
    // no alias is shared between typologies
    const all = TYPOLOGIES.flatMap((t) => t.answers);
    assert.equal(new Set(all).size, all.length);
  });

  test("narratives are 40-90 words and never name their own label", () => {
    for (const r of rows) {
      const n = r.narrative.trim().split(/\s+/).length;
      assert.ok(n >= MIN_WORDS && n <= MAX_WORDS, `${r.id} has ${n} words`);
      const text = r.narrative.toLowerCase();
      assert.ok(!text.includes(r.typology) && !text.includes(r.typology.replace(/_/g, " ")), `${r.id} names its label`);
    }
  });
});

describe("loadTasks", () => {
  /** A generated file and its metadata in tmp. */
  function writeAml(name: string, text: string): string {
    const path = join(tmp, name);
    writeFileSync(path, text);
    writeFileSync(metaPathFor(path), JSON.stringify(amlMeta()));
    return path;
  }
  const generic = (r: AmlRow) => ({
    id: r.id,
    split: r.split,
    prompt: r.prompt,
    answers: r.answers,
    label: r.typology,
    slice: r.typology,
    template: r.template,
  });

  test("round-trips a generated file: its metadata makes typology the label and the slice", () => {
    const path = writeAml("ok.jsonl", toJsonl(rows));
    const file = loadTaskFile(path);
    assert.deepEqual(file.rows, rows.map(generic));
    assert.deepEqual(file.format, {
      labelField: "typology",
      labels: [...LABELS],
      sliceField: "typology",
      hasSlices: true,
      hasTemplates: true,
      splits: ["train", "test", "test_heldout_template"],
      graders: null,
    });
  });

  test("names the file, the 1-based line and the bad field", () => {
    const lines = toJsonl(rows.slice(0, 5)).trimEnd().split("\n");
    const cases: [string, (o: Record<string, unknown>) => unknown, RegExp][] = [
      ["split", (o) => ({ ...o, split: "dev" }), /field "split"/],
      ["typology", (o) => ({ ...o, typology: "fraud", answers: ["fraud"] }), /field "typology"/],
      ["answers", (o) => ({ ...o, answers: [] }), /field "answers"/],
      ["answers0", (o) => ({ ...o, answers: ["nope", o.typology] }), /field "answers"/],
      ["prompt", (o) => ({ ...o, prompt: 3 }), /field "prompt"/],
      ["id", (o) => ({ ...o, id: "aml-00001" }), /field "id"/],
    ];
    for (const [name, mutate, fieldRe] of cases) {
      const bad = lines.slice();
      bad[3] = JSON.stringify(mutate(JSON.parse(bad[3])));
      const path = writeAml(`bad-${name}.jsonl`, bad.join("\n") + "\n");
      assert.throws(
        () => loadTasks(path),
        (e: Error) => {
          assert.ok(e.message.startsWith(`${path}:4:`), e.message);
          assert.match(e.message, fieldRe);
          return true;
        },
      );
    }
    const path = writeAml("bad-json.jsonl", lines.slice(0, 2).join("\n") + "\n{not json\n");
    assert.throws(() => loadTasks(path), new RegExp(`^UserError: ${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:3: invalid JSON`));
  });
});

describe("checked-in file", () => {
  test("equals a fresh generation with the default seed", () => {
    const expected = toJsonl(generateAmlTasks());
    const actual = readFileSync(defaultTasksPath(), "utf8");
    assert.ok(actual === expected, "agent-evals/tasks/aml_typology.jsonl is stale: run `tsx src/task-sets/aml-tasks.ts --write`");
    assert.deepEqual(JSON.parse(readFileSync(metaPathFor(defaultTasksPath()), "utf8")), amlMeta());
  });

  test("main --write writes the file atomically and --check accepts it", () => {
    const out = join(tmp, "written.jsonl");
    captureConsoleSync(() => {
      assert.equal(main(["--write", "--out", out]), 0);
      assert.equal(main(["--check", "--out", out]), 0);
    });
    assert.equal(readFileSync(out, "utf8"), toJsonl(all));
  });
});
