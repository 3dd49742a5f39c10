/**
 * An in-process TrainerService on 127.0.0.1 (Connect's Node adapter speaking real gRPC over
 * HTTP/2), for CLI tests of what a real sidecar cannot easily be made to do: answer a chosen
 * error, or die mid-stream. Methods not given answer UNIMPLEMENTED. Run the CLI against it with
 * an async spawn (spawnSync would block this process and the server with it).
 */
import { spawn } from "node:child_process";
import { createServer, type Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { TrainerService } from "../../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { REPO } from "./sidecar.js";

export interface FakeSidecar {
  address: string;
  /** names of the RPCs called, in order */
  calls: string[];
  /** drop every connection and stop listening: what a killed sidecar looks like to a client */
  kill: () => void;
  close: () => Promise<void>;
}

export async function startFakeSidecar(impl: Partial<ServiceImpl<typeof TrainerService>>): Promise<FakeSidecar> {
  const calls: string[] = [];
  const counted = Object.fromEntries(
    Object.entries(impl).map(([name, fn]) => [
      name,
      (...args: unknown[]) => {
        calls.push(name);
        return (fn as (...a: unknown[]) => unknown)(...args);
      },
    ]),
  ) as Partial<ServiceImpl<typeof TrainerService>>;
  const sessions = new Set<Http2Session>();
  const server = createServer(connectNodeAdapter({ routes: (router) => router.service(TrainerService, counted) }));
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
  const port = (server.address() as AddressInfo).port;
  const kill = () => {
    server.close();
    for (const s of sessions) s.destroy();
  };
  return {
    address: `127.0.0.1:${port}`,
    calls,
    kill,
    close: () => new Promise<void>((res) => (kill(), server.close(() => res()), setTimeout(res, 100))),
  };
}

/** bin/agent with `args`, `stdin` written then closed; resolves when it exits. */
export function agentAsync(args: string[], stdin = ""): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(join(REPO, "ts_agent", "bin", "agent"), args, { stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d) => (stdout += d));
  proc.stderr.on("data", (d) => (stderr += d));
  proc.stdin.end(stdin);
  return new Promise((res) => proc.on("close", (code) => res({ code, stdout, stderr })));
}
