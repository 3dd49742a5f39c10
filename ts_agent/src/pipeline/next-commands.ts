/**
 * The commands printed for the user to run next (re-attach, cancel, resume, continue a sweep):
 * they repeat the flags the user gave, never the token.
 */
/** The flags the user gave, to repeat in a command we print for them (" --address H:P --evals-dir D"):
 *  only for a command that takes --evals-dir (watch, download, report, ...). The token is never
 *  printed. */
export function repeatFlags(values: { address?: string; token?: string; "evals-dir"?: string }): string {
  let out = sidecarFlags(values);
  if (values["evals-dir"]) out += ` --evals-dir ${values["evals-dir"]}`;
  return out;
}

/** The sidecar flags alone (" --address H:P"), for a printed command without --evals-dir (cancel, runs). */
export function sidecarFlags(values: { address?: string }): string {
  return values.address ? ` --address ${values.address}` : "";
}
