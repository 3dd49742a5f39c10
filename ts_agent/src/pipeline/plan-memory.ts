/**
 * `agent plan --config run.json`: the memory preflight. The sidecar's EstimateMemory validates the
 * TrainRequest as Train would and estimates its peak memory per process from the base model's
 * config.json (nothing is loaded): component by component, against the free memory of its device,
 * and the knob to lower first when it does not fit (on CUDA the run itself is refused then).
 */
import { loadTrainRequest } from "../agent/train/run.js";
import type { EstimateMemoryResponse } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../sidecar/client.js";

const gib = (b: bigint) => `${(Number(b) / 2 ** 30).toFixed(2)} GiB`;

/** The estimate as printed lines (pure). */
export function memoryLines(res: EstimateMemoryResponse): string[] {
  const lines = [`memory estimate on ${res.device} (per process, from the model's config.json):`];
  const width = Math.max(...res.components.map((c) => c.name.length));
  for (const c of res.components) lines.push(`  ${c.name.padEnd(width)}  ${gib(c.bytes).padStart(10)}  ${c.formula}`);
  lines.push(
    `  ${"total".padEnd(width)}  ${gib(res.totalBytes).padStart(10)}  (no second model for the reference under LoRA: the adapter is disabled instead)`,
  );
  lines.push(`free on ${res.device}: ${gib(res.deviceFreeBytes)}: ${res.knobToLower ? `does NOT fit; lower ${res.knobToLower}` : "fits"}`);
  lines.push("not counted: the framework's own footprint (CUDA context, allocator slack, the Python process); docs/benchmarks.md has the measured ratio");
  return lines;
}

/** Print the sidecar's estimate for the TrainRequest in `configPath`; exit 1 when it does not fit. */
export async function planMemory(client: SidecarClient, configPath: string): Promise<number> {
  const request = await loadTrainRequest(configPath);
  const res = await client.estimateMemory(request);
  for (const line of memoryLines(res)) console.log(line);
  return res.knobToLower ? 1 : 0;
}
