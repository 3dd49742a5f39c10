/**
 * Typed gRPC client for the py-trainer sidecar.
 *
 * Stack: Connect-ES v2 (@bufbuild/protobuf + @connectrpc/connect-node, createGrpcTransport).
 * It speaks the real gRPC protocol over HTTP/2 to the grpc.aio server, its types come from the
 * same protoc-gen-es run as the contract, and deadlines / cancellation are plain `timeoutMs` and
 * `AbortSignal`. uint64 fields (seq, step, sizes) arrive as bigint.
 *
 * Errors: every failure is a `SidecarError` with the gRPC code name and, for INVALID_ARGUMENT,
 * the field the sidecar named ("grpo.beta: must be >= 0" -> field "grpo.beta"). A sidecar that is
 * not running gives code "unavailable" with a message that says which address was tried.
 */
import { createHash } from "node:crypto";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import {
  DownloadArtifactRequestSchema,
  EvaluateRequestSchema,
  RunState,
  TrainerService,
  TrainRequestSchema,
  type EstimateMemoryResponse,
  type EvaluateResponse,
  type Run,
  type RunEvent,
} from "../gen/grpo/trainer/v1/trainer_service_pb.js";

export { RunState };
export type { Run, RunEvent };

/** Where and how to reach the sidecar. */
export interface SidecarOptions {
  /** "127.0.0.1:50151", "localhost:50151" or a full "http(s)://host:port" URL. */
  address: string;
  /** Bearer token for a sidecar bound to a non-loopback address. */
  token?: string;
  /** Deadline for unary calls, in ms (default 30 000). Streams have none unless given per call. */
  timeoutMs?: number;
}

/** Per-call options: an AbortSignal to cancel, and a deadline in ms. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** A failed sidecar call, with the gRPC status code name ("not_found", "invalid_argument", ...). */
export class SidecarError extends Error {
  constructor(
    message: string,
    readonly code: Code,
    readonly field: string | undefined,
  ) {
    super(message);
    this.name = "SidecarError";
  }

  /** Lower-case gRPC code name, e.g. "not_found". */
  get codeName(): string {
    return Code[this.code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  }
}

/** Normalise an address into the base URL Connect expects. */
export function baseUrlFor(address: string): string {
  if (/^https?:\/\//.test(address)) return address;
  return `http://${address}`;
}

function toSidecarError(err: unknown, address: string): SidecarError {
  const ce = ConnectError.from(err);
  let message = ce.rawMessage;
  if (ce.code === Code.Unavailable) {
    message = `sidecar at ${address} is unavailable (is \`py-trainer serve\` running?): ${ce.rawMessage}`;
  } else if (ce.code === Code.DeadlineExceeded) {
    message = `sidecar at ${address} did not answer in time: ${ce.rawMessage}`;
  } else if (ce.code === Code.Canceled) {
    message = `call to sidecar at ${address} was cancelled: ${ce.rawMessage}`;
  }
  const m = /^([A-Za-z_][\w.\[\]]*): /.exec(ce.rawMessage);
  const field = ce.code === Code.InvalidArgument || ce.code === Code.NotFound ? m?.[1] : undefined;
  return new SidecarError(message, ce.code, field);
}

/** A typed client for TrainerService plus the standard health service. */
export class SidecarClient {
  readonly raw: Client<typeof TrainerService>;
  readonly health: Client<typeof Health>;
  private readonly defaultTimeoutMs: number;

  constructor(readonly options: SidecarOptions) {
    const interceptors: Interceptor[] = [];
    if (options.token) {
      const token = options.token;
      interceptors.push((next) => async (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      });
    }
    const transport = createGrpcTransport({ baseUrl: baseUrlFor(options.address), interceptors });
    this.raw = createClient(TrainerService, transport);
    this.health = createClient(Health, transport);
    this.defaultTimeoutMs = options.timeoutMs ?? 30_000;
  }

  private unary(opts?: CallOptions) {
    return { signal: opts?.signal, timeoutMs: opts?.timeoutMs ?? this.defaultTimeoutMs };
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toSidecarError(err, this.options.address);
    }
  }

  private async *stream<T>(it: () => AsyncIterable<T>): AsyncGenerator<T> {
    try {
      yield* it();
    } catch (err) {
      throw toSidecarError(err, this.options.address);
    }
  }

  /** "SERVING", "NOT_SERVING", ... for `service` ("" = the whole server). */
  async checkHealth(service = "", opts?: CallOptions): Promise<string> {
    const res = await this.call(() => this.health.check({ service }, this.unary(opts)));
    return HealthCheckResponse_ServingStatus[res.status];
  }

  async getRun(runId: string, opts?: CallOptions): Promise<Run> {
    const res = await this.call(() => this.raw.getRun({ runId }, this.unary(opts)));
    if (!res.run) throw new SidecarError("GetRun answered without a run", Code.Internal, undefined);
    return res.run;
  }

  async listRuns(opts?: CallOptions & { state?: RunState; pageSize?: number }): Promise<Run[]> {
    const runs: Run[] = [];
    let pageToken = "";
    do {
      const res = await this.call(() => this.raw.listRuns({ pageToken, pageSize: opts?.pageSize ?? 0, state: opts?.state }, this.unary(opts)));
      runs.push(...res.runs);
      pageToken = res.nextPageToken;
    } while (pageToken);
    return runs;
  }

  async cancelRun(runId: string, opts?: CallOptions): Promise<Run> {
    const res = await this.call(() => this.raw.cancelRun({ runId }, this.unary(opts)));
    return res.run!;
  }

  /** Queue a FAILED or CANCELLED run again; it continues from its last complete checkpoint. */
  async resumeRun(runId: string, opts?: CallOptions): Promise<Run> {
    const res = await this.call(() => this.raw.resumeRun({ runId }, this.unary(opts)));
    return res.run!;
  }

  /** Remove a finished run and its folder on the sidecar (FAILED_PRECONDITION while it is active);
   *  returns the run as it was just before. */
  async deleteRun(runId: string, opts?: CallOptions): Promise<Run> {
    const res = await this.call(() => this.raw.deleteRun({ runId }, this.unary(opts)));
    if (!res.run) throw new SidecarError("DeleteRun answered without a run", Code.Internal, undefined);
    return res.run;
  }

  /** Estimated peak memory of a TrainRequest on the sidecar's device (validated as Train; nothing loads). */
  async estimateMemory(req: MessageInitShape<typeof TrainRequestSchema>, opts?: CallOptions): Promise<EstimateMemoryResponse> {
    return this.call(() => this.raw.estimateMemory({ request: create(TrainRequestSchema, req) }, this.unary(opts)));
  }

  /** Start a run and stream its events to the end. Aborting the signal drops the stream only. */
  async *train(req: MessageInitShape<typeof TrainRequestSchema>, opts?: CallOptions): AsyncGenerator<RunEvent> {
    for await (const res of this.stream(() => this.raw.train(create(TrainRequestSchema, req), opts))) {
      if (res.event) yield res.event;
    }
  }

  /** Replay events with seq > afterSeq, then follow the run live until it ends. */
  async *watchRun(runId: string, afterSeq = 0n, opts?: CallOptions): AsyncGenerator<RunEvent> {
    for await (const res of this.stream(() => this.raw.watchRun({ runId, afterSeq }, opts))) {
      if (res.event) yield res.event;
    }
  }

  async *evaluate(req: MessageInitShape<typeof EvaluateRequestSchema>, opts?: CallOptions): AsyncGenerator<EvaluateResponse> {
    yield* this.stream(() => this.raw.evaluate(create(EvaluateRequestSchema, req), opts));
  }

  /**
   * Download one artifact of a run to `dest`, resuming from a partial `dest.partial` if present,
   * and verify the sha256 the sidecar sends on the last chunk (and `expectedSha256` when given).
   * `dest` appears only once verified (rename), so a failed download never leaves a file that
   * looks complete; a partial that does not verify is deleted (the next try starts from 0).
   */
  async downloadArtifact(
    runId: string,
    path: string,
    dest: string,
    opts?: CallOptions & { expectedSha256?: string; totalSize?: bigint; onProgress?: (done: bigint, total: bigint) => void },
  ): Promise<{ bytes: bigint; sha256: string }> {
    await mkdir(dirname(dest), { recursive: true });
    const part = `${dest}${PARTIAL_SUFFIX}`;
    let offset = 0n;
    try {
      offset = BigInt((await stat(part)).size);
    } catch {
      offset = 0n;
    }
    if (opts?.totalSize !== undefined && offset > opts.totalSize) {
      await rm(part, { force: true }); // longer than the file: not a prefix of it
      offset = 0n;
    }
    const fh = await open(part, offset > 0n ? "a" : "w");
    let serverSha = "";
    let total = 0n;
    try {
      const req = create(DownloadArtifactRequestSchema, { runId, path, offset });
      for await (const chunk of this.stream(() => this.raw.downloadArtifact(req, opts))) {
        if (chunk.offset !== offset) {
          throw new SidecarError(`chunk at offset ${chunk.offset}, expected ${offset}`, Code.DataLoss, undefined);
        }
        await fh.write(chunk.data);
        offset += BigInt(chunk.data.length);
        total = chunk.totalSize;
        opts?.onProgress?.(offset, total);
        if (chunk.last) serverSha = chunk.sha256;
      }
    } finally {
      await fh.close();
    }
    const digest = await sha256File(part);
    const expected = opts?.expectedSha256 ?? serverSha;
    if (!serverSha || digest !== serverSha || digest !== expected) {
      await rm(part, { force: true });
      throw new SidecarError(
        `sha256 mismatch for ${runId}/${path}: got ${digest}, sidecar said ${serverSha || "(nothing)"}` +
          (opts?.expectedSha256 ? `, expected ${opts.expectedSha256}` : ""),
        Code.DataLoss,
        undefined,
      );
    }
    await rename(part, dest);
    return { bytes: offset, sha256: digest };
  }
}

/** The name a download has until its sha256 verified: `<dest>.partial`. */
export const PARTIAL_SUFFIX = ".partial";

/** sha256 of a file, lowercase hex. */
export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  const fh = await open(path, "r");
  try {
    for await (const chunk of fh.createReadStream()) h.update(chunk as Buffer);
  } finally {
    await fh.close().catch(() => undefined);
  }
  return h.digest("hex");
}

export function runStateName(state: RunState): string {
  return RunState[state]?.replace(/^RUN_STATE_/, "") ?? String(state);
}

/** SUCCEEDED, FAILED or CANCELLED: the run will not change any more. */
export function isTerminal(state: RunState): boolean {
  return state === RunState.SUCCEEDED || state === RunState.FAILED || state === RunState.CANCELLED;
}
