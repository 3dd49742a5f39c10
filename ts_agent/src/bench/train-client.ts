/**
 * Benchmark helper: train one request (JSON file) through a running sidecar with the TS client and
 * print the wall time of the Train call, from request to the run's final event, as JSON.
 *
 *   tsx src/bench/train-client.ts --address 127.0.0.1:PORT --config req.json
 */
import { parseArgs } from "node:util";

import { followRun, loadTrainRequest } from "../agent/train/run.js";
import { RunState, SidecarClient } from "../sidecar/client.js";

const { values } = parseArgs({ options: { address: { type: "string" }, config: { type: "string" } } });
const client = new SidecarClient({ address: values.address! });
const request = await loadTrainRequest(values.config!);
const t0 = performance.now();
let state = RunState.UNSPECIFIED as RunState;
let steps = 0;
await followRun(client, client.train(request), (ev) => {
  if (ev.kind.case === "stateChange") state = ev.kind.value.state;
  if (ev.kind.case === "trainStep") steps += 1;
});
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ seconds, steps, state: RunState[state] }));
process.exit(state === RunState.SUCCEEDED ? 0 : 1);
