#!/usr/bin/env node
// Builds the npm packages of acp-lsp from binaries already built by cargo:
//
//   node npm/build.mjs --out DIR [--linux-x64 PATH] [--linux-arm64 PATH]
//       [--darwin-arm64 PATH] [--darwin-x64 PATH] [--win32-x64 PATH] [--version V]
//
// Writes DIR/packages/acp-lsp (the launcher, npm/launcher/) and
// DIR/packages/<os>-<cpu> for every platform, then `npm pack`s into DIR the
// launcher and each platform package whose binary was given. The version is
// the acp-lsp crate's (Cargo.toml), so the npm packages and `acp-lsp
// --version` agree. Prints the tarballs' paths, one a line.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.dirname(here);

// npm's os/cpu names → the Rust target each binary is built for, and what its
// header must say (a binary for another OS or CPU in a package is refused
// here: npm would install it, and it would fail only on a user's machine).
const PLATFORMS = {
  "linux-x64": { os: "linux", cpu: "x64", rust: "x86_64-unknown-linux-gnu", format: "elf", machine: 0x3e },
  "linux-arm64": { os: "linux", cpu: "arm64", rust: "aarch64-unknown-linux-gnu", format: "elf", machine: 0xb7 },
  "darwin-arm64": { os: "darwin", cpu: "arm64", rust: "aarch64-apple-darwin", format: "macho", machine: 0x0100000c },
  "darwin-x64": { os: "darwin", cpu: "x64", rust: "x86_64-apple-darwin", format: "macho", machine: 0x01000007 },
  "win32-x64": { os: "win32", cpu: "x64", rust: "x86_64-pc-windows-msvc or -gnu", format: "pe", machine: 0x8664 },
};
const SCOPE = "@acp-lsp";

function usage(message) {
  process.stderr.write(
    `build.mjs: ${message}\nusage: node npm/build.mjs --out DIR [--version V] ` +
      Object.keys(PLATFORMS).map((p) => `[--${p} BINARY]`).join(" ") +
      "\n",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const args = { binaries: {} };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (!flag.startsWith("--") || value === undefined) usage(`expected --flag value, got ${flag}`);
    const name = flag.slice(2);
    if (name === "out") args.out = path.resolve(value);
    else if (name === "version") args.version = value;
    else if (Object.hasOwn(PLATFORMS, name)) args.binaries[name] = path.resolve(value);
    else usage(`unknown flag ${flag}`);
  }
  if (!args.out) usage("--out is required");
  return args;
}

// The `version` of Cargo.toml's [package] table (the workspace root is the
// acp-lsp crate); a line parser is enough for the file cargo itself checks.
function crateVersion() {
  const text = fs.readFileSync(path.join(repo, "Cargo.toml"), "utf8");
  let table = null;
  for (const line of text.split("\n")) {
    const header = line.match(/^\s*\[([^\]]+)\]\s*$/);
    if (header) table = header[1].trim();
    const version = line.match(/^\s*version\s*=\s*"([^"]+)"/);
    if (table === "package" && version) return version[1];
  }
  throw new Error("no version in Cargo.toml's [package]");
}

function checkBinary(name, file) {
  const want = PLATFORMS[name];
  const fd = fs.openSync(file, "r");
  const head = Buffer.alloc(4096);
  const n = fs.readSync(fd, head, 0, head.length, 0);
  fs.closeSync(fd);
  let format = "unknown";
  let machine = null;
  if (n >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    format = "elf";
    machine = head.readUInt16LE(18);
  } else if (n >= 8 && head.readUInt32LE(0) === 0xfeedfacf) {
    format = "macho";
    machine = head.readUInt32LE(4);
  } else if (n >= 64 && head.toString("latin1", 0, 2) === "MZ") {
    const pe = head.readUInt32LE(60);
    if (pe + 6 <= n && head.toString("latin1", pe, pe + 4) === "PE\0\0") {
      format = "pe";
      machine = head.readUInt16LE(pe + 4);
    }
  }
  if (format !== want.format || machine !== want.machine) {
    throw new Error(
      `--${name} ${file} is not a ${want.rust} binary (found ${format}, machine 0x${(machine ?? 0).toString(16)})`,
    );
  }
}

function writeJson(file, value) {
  fs.writeFileSync(file, JSON.stringify(value, null, 2) + "\n");
}

const COMMON = {
  license: "MIT OR Apache-2.0",
  keywords: ["acp", "agent-client-protocol", "lsp", "language-server", "agent"],
};

function platformPackage(dir, name, version, binary) {
  const p = PLATFORMS[name];
  const exe = p.os === "win32" ? "acp-lsp.exe" : "acp-lsp";
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  writeJson(path.join(dir, "package.json"), {
    name: `${SCOPE}/${name}`,
    version,
    description: `The acp-lsp binary for ${p.os} ${p.cpu} (${p.rust}); installed by the acp-lsp package`,
    ...COMMON,
    os: [p.os],
    cpu: [p.cpu],
    // The Linux binaries link glibc; on musl npm skips the package and the
    // launcher says so, rather than exec failing with "not found".
    ...(p.os === "linux" ? { libc: ["glibc"] } : {}),
    files: ["bin/"],
    // Yarn PnP must unpack it: a binary cannot be executed from a zip.
    preferUnplugged: true,
  });
  fs.writeFileSync(
    path.join(dir, "README.md"),
    `# ${SCOPE}/${name}\n\nThe \`acp-lsp\` binary for ${p.os} ${p.cpu}. Install \`acp-lsp\`, ` +
      "not this package: its launcher picks the binary of your platform.\n",
  );
  if (binary) {
    const dest = path.join(dir, "bin", exe);
    fs.copyFileSync(binary, dest);
    // npm pack keeps the mode; the launcher executes the file directly.
    fs.chmodSync(dest, 0o755);
  }
}

function launcherPackage(dir, version) {
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  fs.copyFileSync(path.join(here, "launcher", "bin", "acp-lsp.js"), path.join(dir, "bin", "acp-lsp.js"));
  fs.chmodSync(path.join(dir, "bin", "acp-lsp.js"), 0o755);
  fs.copyFileSync(path.join(here, "launcher", "README.md"), path.join(dir, "README.md"));
  writeJson(path.join(dir, "package.json"), {
    name: "acp-lsp",
    version,
    description:
      "Gives ACP coding agents real language-server intelligence: run `npx acp-lsp proxy -- <agent>` where the editor starts the agent",
    ...COMMON,
    bin: { "acp-lsp": "bin/acp-lsp.js" },
    files: ["bin/"],
    engines: { node: ">=18" },
    // Exactly this version: the launcher and the binary are one release.
    optionalDependencies: Object.fromEntries(Object.keys(PLATFORMS).map((n) => [`${SCOPE}/${n}`, version])),
  });
}

function pack(dir, out) {
  // `npm pack --json` names the tarball it wrote; its log goes to stderr.
  const json = execFileSync("npm", ["pack", dir, "--pack-destination", out, "--json", "--silent"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return path.join(out, JSON.parse(json)[0].filename);
}

const args = parseArgs(process.argv.slice(2));
let version;
try {
  version = args.version ?? crateVersion();
  for (const [name, file] of Object.entries(args.binaries)) checkBinary(name, file);
} catch (error) {
  process.stderr.write(`build.mjs: ${error.message}\n`);
  process.exit(1);
}

const packages = path.join(args.out, "packages");
fs.rmSync(packages, { recursive: true, force: true });
fs.mkdirSync(packages, { recursive: true });
launcherPackage(path.join(packages, "acp-lsp"), version);
for (const name of Object.keys(PLATFORMS)) {
  platformPackage(path.join(packages, name), name, version, args.binaries[name]);
}

const tarballs = [pack(path.join(packages, "acp-lsp"), args.out)];
for (const name of Object.keys(args.binaries)) tarballs.push(pack(path.join(packages, name), args.out));
for (const t of tarballs) process.stdout.write(`${t}\n`);
