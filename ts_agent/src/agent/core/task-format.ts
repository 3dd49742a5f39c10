/**
 * The task format every command reads (docs/tasks.md): one JSON object per line with `id`,
 * `split`, `prompt` and `answers` (the list a grader accepts, canonical answer first), and the
 * optional `label` (gold class of a closed-label task), slice field, `template` and `human_label`.
 * An optional `<name>.meta.json` next to `<name>.jsonl` names the label field and the closed
 * label set, the slice field and the splits. What a task set lacks, the commands skip and say
 * which field would enable it (`skippedFeatures`).
 */

/** Repo-root-relative location of the default task file (the AML set, task-sets/aml-tasks.ts). */
export const TASKS_RELATIVE_PATH = "agent-evals/tasks/aml_typology.jsonl";

/** A split name; "train", "test" and "test_heldout_template" have roles (train rows, the eval's
 *  in-distribution test, its held-out-template companion). */
export type Split = string;

/** The splits a task file may use when its metadata names none. */
export const SPLITS: readonly Split[] = ["train", "test", "test_heldout_template"];

/** The split evaluated beside "test": tasks written from templates no train row uses. */
export const HELDOUT_TEMPLATE_SPLIT = "test_heldout_template";

/** One task as loaded; the optional fields are absent when the file does not carry them. */
export interface TaskRow {
  id: string;
  split: Split;
  prompt: string;
  /** accepted answers, canonical first (the label first when there is one) */
  answers: string[];
  /** the gold class of a closed-label task */
  label?: string;
  /** the value of the task set's slice field: the per-slice tables group by it */
  slice?: string;
  /** the template the prompt was written from: the held-out-template split and clustered SE */
  template?: string;
}

/** What the task file (and its metadata) declares: the names the commands print and what they skip. */
export interface TaskFormat {
  /** the row field holding the gold class ("label" unless the metadata names another) */
  labelField: string;
  /** the closed label set (metadata `labels`, else the labels the rows carry), or null: open answers */
  labels: string[] | null;
  /** the row field the per-slice tables group by ("slice" unless the metadata names another) */
  sliceField: string;
  /** whether the rows carry a slice value */
  hasSlices: boolean;
  /** whether the rows carry `template` */
  hasTemplates: boolean;
  splits: Split[];
  /** the graders the metadata names (`graders`), the first the primary one (the milestone's
   *  downstream metric); absent or null: exact_match, exact_match_lenient, format */
  graders?: string[] | null;
}

/** The completion a perfect model writes (before its end-of-sequence token). */
export function formatAnswer(label: string): string {
  return `<answer>${label}</answer>`;
}

/** Each feature the task set cannot have, with the field that would enable it (for the report
 *  and the commands' notes). */
export function skippedFeatures(f: Pick<TaskFormat, "labels" | "hasTemplates" | "hasSlices" | "sliceField" | "labelField">): string[] {
  const out: string[] = [];
  if (!f.hasTemplates) {
    out.push('no held-out-template split and no template-clustered SE: the tasks carry no "template" field');
  }
  if (!f.labels) {
    out.push(`no confusion matrix: no closed label set (a "${f.labelField}" field on every row, or "labels" in the metadata)`);
  }
  if (!f.hasSlices) out.push(`no per-slice table: the tasks carry no "${f.sliceField}" field`);
  return out;
}
