/**
 * A request's `base_model` as the TS side reads it: the embedded default model (""), the embedded
 * model of a file under the sidecar's data root ("embedded:<path>"), or any other name (a GGUF file
 * or packaged short name, a model folder, a hub id), which only the sidecar sorts further
 * (py_trainer core/model_files.py `parse_base_model`, whose EMBEDDED_PREFIX test/base-model.test.ts
 * holds equal to this one). Parsed here once; no other file writes the prefix.
 */

export const EMBEDDED_PREFIX = "embedded:";

export type BaseModel =
  | { kind: "default"; text: "" }
  | { kind: "embedded"; text: string; /** the file, relative to the sidecar's data root */ path: string }
  | { kind: "other"; text: string };

export function parseBaseModel(text: string): BaseModel {
  if (text === "") return { kind: "default", text: "" };
  if (text.startsWith(EMBEDDED_PREFIX)) return { kind: "embedded", text, path: text.slice(EMBEDDED_PREFIX.length) };
  return { kind: "other", text };
}

/** The base_model that names the embedded model of `relPath` (a file under the sidecar's data root). */
export function embeddedBaseModel(relPath: string): string {
  return `${EMBEDDED_PREFIX}${relPath}`;
}
