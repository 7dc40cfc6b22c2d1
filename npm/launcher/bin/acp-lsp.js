#!/usr/bin/env node
// The `acp-lsp` command of the npm package: starts the acp-lsp binary of the
// platform package npm installed next to it (@acp-lsp/<os>-<cpu>, one of the
// optionalDependencies; npm installs only the one whose `os`/`cpu` match).
//
// Plain Node, no dependencies, and it never writes to stdout: under
// `acp-lsp proxy` stdout is the ACP connection, so the child inherits the
// launcher's own descriptors and every byte on them is the binary's.
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const tty = require("node:tty");

const launcher = require("../package.json");
const target = `${process.platform}-${process.arch}`;
const platformPackage = `@acp-lsp/${target}`;
const exe = process.platform === "win32" ? "acp-lsp.exe" : "acp-lsp";

function fail(message) {
  process.stderr.write(`acp-lsp (npm launcher ${launcher.version}): ${message}\n`);
  process.exit(1);
}

function findBinary() {
  if (!Object.hasOwn(launcher.optionalDependencies || {}, platformPackage)) {
    fail(
      `no prebuilt binary for ${target}; the npm packages cover ` +
        `${Object.keys(launcher.optionalDependencies || {}).map((p) => p.slice("@acp-lsp/".length)).join(", ")}. ` +
        "Build it from source instead: cargo install --locked acp-lsp",
    );
  }
  let manifest;
  try {
    // Resolved from this file, so it finds the package wherever npm put it
    // (hoisted next to acp-lsp, or nested under it).
    manifest = require.resolve(`${platformPackage}/package.json`);
  } catch {
    fail(
      `${platformPackage} is not installed. npm installs it with acp-lsp as an ` +
        "optional dependency, unless optional dependencies were left out " +
        "(--omit=optional, --no-optional) or the lock file was made on another OS. " +
        `Reinstall acp-lsp, or install ${platformPackage}@${launcher.version} next to it.`,
    );
  }
  const binary = path.join(path.dirname(manifest), "bin", exe);
  if (!fs.existsSync(binary)) {
    fail(`${platformPackage} is installed but has no ${path.join("bin", exe)} (${binary}); reinstall it.`);
  }
  const { version } = JSON.parse(fs.readFileSync(manifest, "utf8"));
  if (version !== launcher.version) {
    // Still runs: a mismatch is a broken install, not a reason to refuse.
    process.stderr.write(
      `acp-lsp (npm launcher ${launcher.version}): warning: ${platformPackage} is ${version}; reinstall acp-lsp to match.\n`,
    );
  }
  return binary;
}

const binary = findBinary();
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });

// The editor ends the agent it started, which is this launcher: the binary
// must get the same signal to shut down its agent and servers. Windows has
// no signals: Ctrl-C and console close reach every process on the console,
// the child included, so there the handlers only keep the launcher alive
// until the child has exited.
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const handlers = new Map();
for (const signal of forwarded) {
  const handler = () => {
    if (process.platform === "win32") return;
    // Ctrl-C and a hangup on a terminal go to the whole foreground process
    // group, the child included: a second copy would count as a second
    // signal, which acp-lsp escalates (a further signal ends its agent
    // harder: tests/agent_shutdown.rs).
    if (signal !== "SIGTERM" && tty.isatty(0)) return;
    child.kill(signal);
  };
  handlers.set(signal, handler);
  process.on(signal, handler);
}

child.on("error", (error) => fail(`cannot start ${binary}: ${error.message}`));

child.on("exit", (code, signal) => {
  if (signal === null) {
    process.exit(code);
  }
  // Ended by a signal: end the same way, so the editor sees what the
  // binary's parent would have seen.
  for (const [name, handler] of handlers) process.off(name, handler);
  process.kill(process.pid, signal);
  // A signal whose default action does not end the process (or one Node
  // keeps for itself): the shell's convention.
  process.exit(128 + (os.constants.signals[signal] || 0));
});
