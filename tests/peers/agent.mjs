#!/usr/bin/env node
// A real ACP agent built on the official TypeScript SDK (@agentclientprotocol/sdk),
// speaking newline-delimited JSON-RPC on stdio. Used by tests/e2e_sdk.rs.
//
// initialize  -> protocolVersion 1, agentCapabilities {loadSession:false};
//                remembers the raw clientCapabilities it received.
// session/new -> a fresh sessionId.
// session/prompt, in this order:
//   1. several session/update agent_message_chunk notifications (plain text,
//      unicode/emoji, one ~64 KiB text);
//   2. session/request_permission, awaited;
//   3. fs/read_text_file then fs/write_text_file on <cwd>/hello.txt;
//   4. the LSP ext request (method from PEER_LSP_METHOD, default "lsp/servers")
//      with {sessionId};
//   5. one session/update whose text is a JSON report of what it saw;
//   then answers stopReason "end_turn".
//
// Env:
//   PEER_TAP_AGENT=<path>   record every raw line read from stdin ("in") and
//                           written to stdout ("out") as JSONL.
//   PEER_LSP_METHOD=<name>  the method used for the lsp/servers call.

import * as acp from "@agentclientprotocol/sdk";
import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { openTap, tappedReadable, tappedWritable } from "./tap.mjs";

const FILE_NAME = "hello.txt";
const UNICODE_TEXT =
  "unicode: héllo wörld — 你好, мир; emoji 👋🏽🦀🎉; combining e\u0301; " +
  "line separator [\u2028] paragraph [\u2029]; quote \" backslash \\ tab \t newline \n end";

function bigText() {
  // ~64 KiB of mixed 1-, 2-, 3- and 4-byte UTF-8, so multi-byte characters
  // straddle pipe-buffer boundaries.
  const unit = "abcdefghij0123456789 é ü ß 中文字 🦀 ✓\n";
  let s = "";
  let i = 0;
  while (Buffer.byteLength(s, "utf8") < 64 * 1024) s += `${i++}:${unit}`;
  return s;
}

const lspMethod = process.env.PEER_LSP_METHOD || "lsp/servers";
const tapFd = openTap(process.env.PEER_TAP_AGENT);

let clientCapabilities = null; // raw, as received on the wire
let initializeProtocolVersion = null;
const sessions = new Map(); // sessionId -> cwd

function text(sessionId, t) {
  return {
    sessionId,
    update: {
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text: t },
    },
  };
}

function errorJson(err) {
  if (err instanceof acp.RequestError || (err && typeof err.code === "number")) {
    return { code: err.code, message: err.message, data: err.data ?? null };
  }
  return { code: null, message: String(err && err.stack ? err.stack : err), data: null };
}

const app = acp
  .agent({ name: "acp-lsp-test-agent" })
  // Identity parser: the SDK's typed zod parse of InitializeRequest strips
  // unknown keys such as clientCapabilities.lsp, so keep the raw params.
  .onRequest(acp.methods.agent.initialize, (raw) => raw, ({ params }) => {
    clientCapabilities = params?.clientCapabilities ?? null;
    initializeProtocolVersion = params?.protocolVersion ?? null;
    return {
      protocolVersion: 1,
      agentCapabilities: { loadSession: false },
      agentInfo: { name: "acp-lsp-test-agent", version: "0.0.0" },
      authMethods: [],
    };
  })
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `sess-${randomUUID()}`;
    sessions.set(sessionId, params.cwd);
    return { sessionId };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {})
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const { sessionId } = params;
    const cwd = sessions.get(sessionId);
    const report = { lspMethod, initializeProtocolVersion };
    const notify = (t) => client.notify(acp.methods.client.session.update, text(sessionId, t));

    // 1. streamed text
    await notify("Hello from the SDK agent.");
    await notify(UNICODE_TEXT);
    const big = bigText();
    report.bigTextBytes = Buffer.byteLength(big, "utf8");
    await notify(big);
    await notify("Asking for permission next.");

    // 2. permission round trip
    try {
      const res = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: {
          toolCallId: "call-1",
          title: `Edit ${FILE_NAME}`,
          kind: "edit",
          status: "pending",
        },
        options: [
          { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
          { optionId: "reject-once", name: "Reject", kind: "reject_once" },
        ],
      });
      report.permissionOutcome = res.outcome;
    } catch (err) {
      report.permissionError = errorJson(err);
    }

    // 3. client file system
    const file = path.join(cwd, FILE_NAME);
    try {
      const read = await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: file });
      report.readContent = read.content;
      report.wroteContent = `${read.content}edited by the agent ✅\n`;
      await client.request(acp.methods.client.fs.writeTextFile, {
        sessionId,
        path: file,
        content: report.wroteContent,
      });
      report.writeOk = true;
    } catch (err) {
      report.fsError = errorJson(err);
    }

    // 4. the LSP extension: the SDK sends the method name verbatim.
    try {
      report.lspServers = { result: await client.request(lspMethod, { sessionId }) };
    } catch (err) {
      report.lspServers = { error: errorJson(err) };
    }

    // 5. report what was seen
    const caps = clientCapabilities ?? {};
    report.sawLspCapability = isDeepStrictEqual(caps.lsp, {});
    report.sawMetaLsp = isDeepStrictEqual(caps._meta?.lsp, {});
    report.clientCapabilities = clientCapabilities;
    await notify(JSON.stringify(report));

    return { stopReason: "end_turn" };
  });

const stream = acp.ndJsonStream(
  tappedWritable(process.stdout, tapFd),
  tappedReadable(process.stdin, tapFd),
);
const connection = app.connect(stream);
connection.closed.then(() => {
  // stdin reached EOF (or the connection failed): we are done.
  process.exit(0);
});
