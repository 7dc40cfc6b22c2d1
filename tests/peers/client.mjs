#!/usr/bin/env node
// A real ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk).
// Used by tests/e2e_sdk.rs.
//
// Usage:
//   node client.mjs <acp-lsp binary> <workdir> <agent.mjs>
//     spawns `<acp-lsp> proxy --record <workdir>/record.jsonl -- node <agent.mjs>`
//   node client.mjs --direct <workdir> <agent.mjs>
//     spawns `node <agent.mjs>` directly (no proxy), to check the peers alone.
//
// It initializes (protocolVersion 1, fs read/write, no terminal), opens a
// session in <workdir>, prompts "hello", answers permission (first option) and
// fs requests for real, collects session/update notifications, then closes the
// child's stdin, waits for it to exit and prints ONE JSON line on stdout:
//   {updates, agentReport, stopReason, permissionRequests, fsReads, fsWrites,
//    unexpected, initializeResponse, sessionId, childExitCode, childSignal, ...}
//
// Env:
//   PEER_TAP_CLIENT=<path>   record every raw line written to the child ("out")
//                            and read from it ("in") as JSONL.
//   PEER_CLIENT_META=<json>  if set, sent as clientCapabilities._meta.

import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { openTap, tappedReadable, tappedWritable } from "./tap.mjs";

const EXIT_TIMEOUT_MS = 20_000;

function usage() {
  process.stderr.write(
    "usage: node client.mjs <acp-lsp binary>|--direct <workdir> <agent.mjs>\n",
  );
  process.exit(2);
}

const [binary, workdirArg, agentArg] = process.argv.slice(2);
if (!binary || !workdirArg || !agentArg) usage();
const workdir = path.resolve(workdirArg);
const agentPath = path.resolve(agentArg);
const direct = binary === "--direct";

const command = direct ? process.execPath : binary;
// `--mcp off`: these peers check that every line but initialize is relayed
// byte for byte; the MCP entry the proxy adds to session requests by default
// is tested in tests/mcp.rs and tests/mcp_elizacp.rs.
const args = direct
  ? [agentPath]
  : ["proxy", "--mcp", "off", "--record", path.join(workdir, "record.jsonl"), "--", process.execPath, agentPath];

const out = {
  mode: direct ? "direct" : "proxy",
  command: [command, ...args],
  updates: [],
  agentReport: null,
  stopReason: null,
  permissionRequests: [],
  fsReads: [],
  fsWrites: [],
  unexpected: [],
  initializeResponse: null,
  sessionId: null,
  childExitCode: null,
  childSignal: null,
  childExitTimedOut: false,
  error: null,
};

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const childExited = new Promise((resolve) => {
  child.on("exit", (code, signal) => resolve({ code, signal }));
  child.on("error", (err) => {
    out.error = `spawn failed: ${err.message}`;
    resolve({ code: null, signal: null });
  });
});
let stdoutEnded;
const stdoutEnd = new Promise((resolve) => (stdoutEnded = resolve));
// EPIPE on a dead child would otherwise crash the client; the error is reported.
child.stdin.on("error", (err) => {
  out.error ??= `child stdin: ${err.message}`;
});

const tapFd = openTap(process.env.PEER_TAP_CLIENT);
const stream = acp.ndJsonStream(
  tappedWritable(child.stdin, tapFd),
  tappedReadable(child.stdout, tapFd, () => stdoutEnded()),
);

const app = acp
  .client({ name: "acp-lsp-test-client" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    out.updates.push(params);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    out.permissionRequests.push(params);
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    out.fsReads.push(params.path);
    return { content: await fs.readFile(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    out.fsWrites.push(params.path);
    await fs.writeFile(params.path, params.content, "utf8");
    return {};
  })
  // Anything else (e.g. an lsp/servers request leaking through the proxy) is
  // recorded and refused the way a real editor would.
  .onRequest("*", ({ method, params }) => {
    out.unexpected.push({ kind: "request", method, params });
    throw acp.RequestError.methodNotFound(method);
  })
  .onNotification("*", ({ method, params }) => {
    out.unexpected.push({ kind: "notification", method, params });
  });

const connection = app.connect(stream);
const agent = connection.agent;

async function main() {
  const clientCapabilities = {
    fs: { readTextFile: true, writeTextFile: true },
    terminal: false,
  };
  if (process.env.PEER_CLIENT_META) {
    clientCapabilities._meta = JSON.parse(process.env.PEER_CLIENT_META);
  }
  out.initializeResponse = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities,
    clientInfo: { name: "acp-lsp-test-client", version: "0.0.0" },
  });
  const session = await agent.request(acp.methods.agent.session.new, {
    cwd: workdir,
    mcpServers: [],
  });
  out.sessionId = session.sessionId;
  const res = await agent.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "hello" }],
  });
  out.stopReason = res.stopReason;

  // The report is the last agent_message_chunk; parse it.
  const last = out.updates.at(-1);
  const t = last?.update?.content?.text;
  try {
    out.agentReport = JSON.parse(t);
  } catch {
    out.error ??= "last session/update is not a JSON report";
  }
}

async function finish() {
  // Close our side: EOF to the proxy, which must pass it on and exit.
  child.stdin.end();
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve("timeout"), EXIT_TIMEOUT_MS);
  });
  const status = await Promise.race([childExited, timeout]);
  if (status === "timeout") {
    out.childExitTimedOut = true;
    child.kill("SIGKILL");
    await childExited;
  } else {
    out.childExitCode = status.code;
    out.childSignal = status.signal;
  }
  // Make sure the tap saw everything the child wrote.
  await Promise.race([stdoutEnd, new Promise((r) => setTimeout(r, 2_000))]);
  clearTimeout(timer);
  connection.close();
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  out.error = String(err?.stack ?? err) + (err?.code !== undefined ? ` (code ${err.code})` : "");
}
await finish();
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(failed ? 1 : 0));
