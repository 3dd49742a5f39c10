/**
 * What an eval-shaped command works on: the settings, the task file, the evals dir. The commands
 * build it from their flags (commands/flags.ts evalTargetFromFlags); the pipeline passes it on.
 */
import type { EvalSettings } from "../agent/core/eval-log.js";

export interface EvalTarget {
  settings: EvalSettings;
  tasksPath: string;
  /** whether tasksPath was given (--tasks) or derived (a run's own file): else it is the AML default */
  tasksGiven: boolean;
  evalsDir: string;
}
