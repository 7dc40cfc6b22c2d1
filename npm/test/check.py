#!/usr/bin/env python3
"""Checks an installed acp-lsp npm package the way an editor uses it
(.ci/npm-packages runs it; every check fails loudly, none skips).

  check.py installed --prefix DIR --version V --agent-dir DIR
      DIR is an npm prefix where acp-lsp and its linux-x64 package were
      installed; `npx acp-lsp` runs from there. The agent of the initialize
      round trip is the ACP TypeScript SDK's example agent
      (tests/peers/agent.mjs); exit codes and signals through the launcher
      are checked with `sh` agents whose exit code is known.
  check.py missing --prefix DIR
      DIR has the launcher without its platform package.
  check.py wine --exe acp-lsp.exe --agent wine-agent.exe --version V
      The win32-x64 package's binary under wine, in front of a Windows agent.
"""

import argparse
import json
import os
import pty
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 120  # seconds for one step; a cold npx or wine start is slow


def fail(message):
    sys.stderr.write(f"npm check FAILED: {message}\n")
    sys.exit(1)


def ok(message):
    print(f"ok: {message}", flush=True)


def initialize_request():
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
            "clientInfo": {"name": "npm-check", "version": "0"},
        },
    }


def start(cmd, cwd, env=None):
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_line(proc, what):
    """One stdout line, within TIMEOUT (a hang fails instead of blocking CI)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(TIMEOUT):
        proc.kill()
        fail(f"{what}: no line on stdout within {TIMEOUT}s; stderr: {proc.stderr.read().decode(errors='replace')}")
    line = proc.stdout.readline()
    if not line:
        fail(f"{what}: stdout closed (exit {proc.wait()}); stderr: {proc.stderr.read().decode(errors='replace')}")
    return line


def finish(proc, what):
    """Closes stdin (the editor went away: communicate() closes it) and
    returns (rest of stdout, stderr, code)."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        fail(f"{what}: did not exit within {TIMEOUT}s of its input closing; stderr: {err.decode(errors='replace')}")
    return out, err.decode(errors="replace"), proc.returncode


def initialize_round_trip(cmd, cwd, agent_saw, what, env=None, agent_name=None):
    """The editor's initialize through `cmd` (an `acp-lsp proxy -- <agent>`):
    the editor gets the agent's answer, the agent got `clientCapabilities.lsp`
    (agent_saw() returns the lines the agent read), and stdout carried
    nothing but JSON-RPC lines."""
    proc = start(cmd, cwd, env)
    proc.stdin.write((json.dumps(initialize_request()) + "\n").encode())
    proc.stdin.flush()
    first = read_line(proc, what)
    try:
        answer = json.loads(first)
    except ValueError:
        fail(f"{what}: stdout's first line is not JSON: {first!r}")
    if answer.get("id") != 0 or "result" not in answer:
        fail(f"{what}: not the answer to initialize: {answer}")
    result = answer["result"]
    if agent_name and (result.get("agentInfo") or {}).get("name") != agent_name:
        fail(f"{what}: the answer is not the agent's ({agent_name}): {answer}")
    rest, err, code = finish(proc, what)
    for line in rest.splitlines():
        try:
            json.loads(line)
        except ValueError:
            fail(f"{what}: stdout has a line that is not JSON-RPC: {line!r}")
    if code != 0:
        fail(f"{what}: exit {code} after its input closed; stderr: {err}")
    seen = [json.loads(l) for l in agent_saw() if l.strip()]
    init = [m for m in seen if m.get("method") == "initialize"]
    if len(init) != 1:
        fail(f"{what}: the agent read {len(init)} initialize requests: {seen}")
    caps = init[0].get("params", {}).get("clientCapabilities", {})
    if "lsp" not in caps:
        fail(f"{what}: the agent's initialize has no clientCapabilities.lsp: {caps}")
    ok(f"{what}: initialize round trip (agent got clientCapabilities.lsp, editor got {json.dumps(result)[:80]}…)")
    return err


def tap_reader(path):
    def read():
        if not os.path.exists(path):
            return []
        lines = []
        with open(path, encoding="utf-8") as f:
            for entry in f:
                record = json.loads(entry)
                if record["dir"] == "in":
                    lines.append(record["line"])
        return lines

    return read


def run(cmd, cwd, what):
    try:
        return subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail(f"{what}: did not exit within {TIMEOUT}s")


def check_version(cmd, cwd, version, what):
    done = run(cmd + ["--version"], cwd, what)
    want = f"acp-lsp {version}"
    if done.returncode != 0 or done.stdout.decode().splitlines()[:1] != [want]:
        fail(f"{what}: `--version` gave exit {done.returncode}, stdout {done.stdout!r} (want {want!r}); stderr {done.stderr!r}")
    ok(f"{what} --version: {want}")


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def installed(args):
    prefix = args.prefix
    launcher = os.path.join(prefix, "node_modules", ".bin", "acp-lsp")
    agent = os.path.join(args.agent_dir, "agent.mjs")
    # npx from the prefix runs the installed package; --offline so that a
    # missing install fails here instead of fetching anything. npx takes a
    # flag right after the package name as its own (`npx acp-lsp --version`
    # is npm's version): `--` ends npx's options; after `proxy` none is needed.
    npx = ["npx", "--offline", "--no", "acp-lsp"]
    npx_only = ["npx", "--offline", "--no", "--", "acp-lsp"]
    check_version(npx_only, prefix, args.version, "npx acp-lsp")
    check_version([launcher], prefix, args.version, "node_modules/.bin/acp-lsp")

    with tempfile.TemporaryDirectory() as tmp:
        tap = os.path.join(tmp, "agent-tap.jsonl")
        env = dict(os.environ, PEER_TAP_AGENT=tap)
        initialize_round_trip(
            npx + ["proxy", "--", "node", agent],
            prefix,
            tap_reader(tap),
            "npx acp-lsp proxy -- node agent.mjs",
            env=env,
            agent_name="acp-lsp-test-agent",
        )

    # The binary's exit code comes out of the launcher (and npx): the proxy
    # exits with its agent's.
    for cmd, what in ((npx_only, "npx acp-lsp"), ([launcher], "launcher")):
        done = run(cmd + ["proxy", "--", "sh", "-c", "exit 7"], prefix, what)
        if done.returncode != 7 or done.stdout:
            fail(f"{what} proxy -- sh -c 'exit 7': exit {done.returncode}, stdout {done.stdout!r}; stderr {done.stderr!r}")
        done = run(cmd + ["--no-such-flag"], prefix, what)
        if done.returncode != 2 or done.stdout:
            fail(f"{what} --no-such-flag: exit {done.returncode} (want clap's 2), stdout {done.stdout!r}")
        ok(f"{what}: exit codes passed through (7 from the agent, 2 for a usage error)")

    # SIGTERM to the launcher (what an editor sends the agent it started)
    # reaches the binary, which ends its agent by closing the agent's input;
    # the agent then exits 5, the binary with it, and the launcher with the
    # binary's code, leaving nothing running. The agent's first line says it
    # is up (the proxy relays it), so the signal comes after the start.
    ready = '{"jsonrpc":"2.0","method":"_check/ready"}'
    agent_sh = f"echo '{ready}'; cat >/dev/null; exit 5"
    for sig in (signal.SIGTERM, signal.SIGINT):
        what = f"launcher, {sig.name}"
        proc = start([launcher, "proxy", "--log-level", "info", "--", "sh", "-c", agent_sh], prefix)
        line = read_line(proc, what)
        if json.loads(line).get("method") != "_check/ready":
            fail(f"{what}: the agent's first line was not relayed: {line!r}")
        binary = children(proc.pid)
        if len(binary) != 1:
            fail(f"{what}: the launcher has children {binary}, want the one acp-lsp binary")
        binary = binary[0]
        agents = children(binary)
        proc.send_signal(sig)
        # stdin stays open until the exit: its end would end the proxy too.
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail(f"{what}: no exit within {TIMEOUT}s of the signal")
        out = proc.stdout.read()
        err = proc.stderr.read().decode(errors="replace")
        proc.stdin.close()
        ended = [l for l in err.splitlines() if "ending the agent on signal" in l]
        if not ended or sig.name not in ended[0]:
            fail(f"{what}: acp-lsp did not log ending its agent on {sig.name}; stderr: {err}")
        if "signal received while ending the agent" in err:
            fail(f"{what}: acp-lsp got the signal twice (a second one escalates); stderr: {err}")
        if proc.returncode != 5 or out:
            fail(f"{what}: exit {proc.returncode} (want the agent's 5), stdout {out!r}; stderr: {err}")
        deadline = time.monotonic() + 10
        while any(alive(p) for p in [binary] + agents) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [p for p in [binary] + agents if alive(p)]
        if survivors:
            fail(f"{what}: still running after the launcher exited: {survivors}")
        ok(f"{what}: forwarded once (acp-lsp ended its agent), exit 5 from the agent, nothing left running")

    launcher_signal_copies(prefix)

    # A binary killed outright: the launcher ends by the same signal, as the
    # binary's own parent would have seen it.
    what = "launcher, its binary SIGKILLed"
    proc = start([launcher, "proxy", "--", "sh", "-c", agent_sh], prefix)
    read_line(proc, what)
    os.kill(children(proc.pid)[0], signal.SIGKILL)
    try:
        proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail(f"{what}: the launcher did not exit within {TIMEOUT}s")
    proc.stdin.close()
    if proc.returncode != -signal.SIGKILL:
        fail(f"{what}: the launcher's status is {proc.returncode}, want -{int(signal.SIGKILL)} (killed by SIGKILL)")
    ok(f"{what}: the launcher ended by SIGKILL too")


# A stand-in for the binary that counts the SIGINT and SIGTERM it receives
# in the second after the first, then exits 5: how many copies the launcher
# sent, which acp-lsp cannot show (its runtime merges two close signals).
# Two copies that arrive before the first is handled merge here too, so a
# launcher that sends one too many fails this check most runs, not all;
# one that sends the right number always passes.
COUNTING_BINARY = """#!/usr/bin/env python3
import signal, sys, time
got = []
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, lambda n, f: got.append(n))
print('{"jsonrpc":"2.0","method":"_check/ready"}', flush=True)
while not got:
    time.sleep(0.01)
time.sleep(1)
open(sys.argv[1], "w").write(str(len(got)))
sys.exit(5)
"""


def counting_prefix(prefix, tmp, version):
    """A prefix with the installed launcher and a platform package whose
    binary is COUNTING_BINARY."""
    shutil.copytree(os.path.join(prefix, "node_modules", "acp-lsp"), os.path.join(tmp, "node_modules", "acp-lsp"))
    platform = os.path.join(tmp, "node_modules", "@acp-lsp", "linux-x64")
    os.makedirs(os.path.join(platform, "bin"))
    with open(os.path.join(platform, "package.json"), "w") as f:
        json.dump({"name": "@acp-lsp/linux-x64", "version": version}, f)
    binary = os.path.join(platform, "bin", "acp-lsp")
    with open(binary, "w") as f:
        f.write(COUNTING_BINARY)
    os.chmod(binary, 0o755)
    return os.path.join(tmp, "node_modules", "acp-lsp", "bin", "acp-lsp.js")


def launcher_signal_copies(prefix):
    """The launcher sends the binary exactly one copy of a signal sent to it,
    and none of a terminal's Ctrl-C, which the kernel already sent to the
    whole foreground process group, the binary included (a second copy is
    a second signal: acp-lsp ends its agent harder)."""
    with open(os.path.join(prefix, "node_modules", "acp-lsp", "package.json")) as f:
        version = json.load(f)["version"]
    for sig in (signal.SIGTERM, signal.SIGINT):
        with tempfile.TemporaryDirectory() as tmp:
            launcher = counting_prefix(prefix, tmp, version)
            count = os.path.join(tmp, "count")
            what = f"launcher, {sig.name} (counting stand-in)"
            proc = start([launcher, count], tmp)
            read_line(proc, what)
            proc.send_signal(sig)
            try:
                proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                fail(f"{what}: no exit within {TIMEOUT}s")
            proc.stdin.close()
            with open(count) as f:
                copies = f.read()
            if proc.returncode != 5 or copies != "1":
                fail(f"{what}: exit {proc.returncode}, the binary got {copies} copies (want 5 and 1)")
            ok(f"{what}: the binary got 1 copy, exit 5")

    what = "launcher on a terminal, Ctrl-C (counting stand-in)"
    with tempfile.TemporaryDirectory() as tmp:
        launcher = counting_prefix(prefix, tmp, version)
        count = os.path.join(tmp, "count")
        # pty.fork: the child leads a new session whose controlling terminal
        # is the pty, so ^C there signals its foreground group.
        pid, master = pty.fork()
        if pid == 0:
            os.execv(launcher, [launcher, count])
        seen = b""
        deadline = time.monotonic() + TIMEOUT
        while b"_check/ready" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([master], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                fail(f"{what}: the binary's first line never reached the terminal: {seen!r}")
            seen += os.read(master, 4096)
        os.write(master, b"\x03")
        status = None
        while time.monotonic() < deadline:
            waited, raw = os.waitpid(pid, os.WNOHANG)
            if waited:
                status = os.waitstatus_to_exitcode(raw)
                break
            # Drain the terminal, so that no write to it blocks.
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 4096)
                except OSError:
                    pass
        os.close(master)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            fail(f"{what}: the launcher did not exit within {TIMEOUT}s of Ctrl-C")
        with open(count) as f:
            copies = f.read()
        if status != 5 or copies != "1":
            fail(f"{what}: exit {status}, the binary got {copies} SIGINTs (want 5 and 1: the terminal's only)")
        ok(f"{what}: the binary got the terminal's SIGINT only, exit 5")


def missing(args):
    launcher = os.path.join(args.prefix, "node_modules", ".bin", "acp-lsp")
    done = run([launcher, "--version"], args.prefix, "launcher without its platform package")
    err = done.stderr.decode(errors="replace")
    if done.returncode == 0 or done.stdout or "is not installed" not in err:
        fail(f"launcher without its platform package: exit {done.returncode}, stdout {done.stdout!r}, stderr {err!r}")
    ok(f"launcher without its platform package: exit {done.returncode}, stdout empty, stderr: {err.strip()[:90]}…")


def wine(args):
    def winpath(path):
        return subprocess.run(["winepath", "-w", path], capture_output=True, check=True, text=True).stdout.strip()

    check_version(["wine", args.exe], None, args.version, "wine acp-lsp.exe")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "agent-read.jsonl")

        def saw():
            if not os.path.exists(log):
                return []
            with open(log, encoding="utf-8") as f:
                return f.read().splitlines()

        initialize_round_trip(
            ["wine", args.exe, "proxy", "--", winpath(args.agent), winpath(log)],
            tmp,
            saw,
            "wine acp-lsp.exe proxy -- wine-agent.exe",
            agent_name="wine-agent",
        )


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("installed")
    p.add_argument("--prefix", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--agent-dir", required=True)
    p = sub.add_parser("missing")
    p.add_argument("--prefix", required=True)
    p = sub.add_parser("wine")
    p.add_argument("--exe", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--version", required=True)
    args = parser.parse_args()
    {"installed": installed, "missing": missing, "wine": wine}[args.what](args)


if __name__ == "__main__":
    main()
