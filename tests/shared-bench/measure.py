# Three agents on one project, with and without --shared: rust-analyzer
# processes, total RSS (proxies, daemon, servers; not the agents), and the
# time from the second (and third) agent's session/new to its first
# references answer equal to the first agent's.
#
#   python3 tests/shared-bench/measure.py ACP_LSP_BIN PROJECT FILE LINE CHAR shared plain
#
# (LINE and CHAR zero-based, the position of a symbol in FILE.) The agent is
# the scripted one of tests/daemon.rs: it relays the editor's
# `_test/ask {method, params}` to the proxy as its own request.
import json, os, subprocess, sys, tempfile, time
BIN, PROJECT, FILE, LINE, CHAR = os.path.abspath(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
AGENT_SOURCE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent.py")).read()
AGENT = os.path.join(tempfile.mkdtemp(), "agent.py")
with open(AGENT, "w") as f:
    f.write(AGENT_SOURCE)

class Proxy:
    def __init__(self, env, shared, log):
        args = [BIN, "proxy", "--mcp", "off"] + (["--shared"] if shared else []) + ["--log-level", "info", "--", "python3", AGENT]
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "w"), env=env, cwd=PROJECT, text=True, bufsize=1)
        self.n = 0
    def call(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n"); self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.n and "method" not in m:
                return m
    def ask(self, method, params):
        return self.call("_test/ask", {"method": method, "params": params})["result"]["response"]
    def start(self):
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.call("session/new", {"cwd": PROJECT, "mcpServers": []})
    def refs(self):
        while True:
            servers = self.ask("lsp/servers", {"sessionId": "s"})["result"]["servers"]
            ra = [s for s in servers if s["name"] == "rust-analyzer"]
            if ra: break
        r = self.ask("lsp/request", {"sessionId": "s", "serverId": ra[0]["serverId"], "method": "textDocument/references",
            "params": {"textDocument": {"uri": "file://" + os.path.join(PROJECT, FILE)}, "position": {"line": LINE, "character": CHAR}, "context": {"includeDeclaration": True}},
            "_meta": {"waitUntilReady": 300000}})
        return r

def ppid(pid):
    try: return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except Exception: return None
def rss(pid):
    try:
        for l in open(f"/proc/{pid}/status"):
            if l.startswith("VmRSS:"): return int(l.split()[1]) * 1024
    except Exception: pass
    return 0
def cmd0(pid):
    try: return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode()
    except Exception: return ""
def tree(roots):
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for p in pids:
            if p not in out and ppid(p) in out:
                out.add(p); changed = True
    return out

def run(shared):
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp)
    proxies = [Proxy(env, shared, os.path.join(tmp, f"p{i}.log")) for i in range(3)]
    proxies[0].start()
    first = proxies[0].refs()
    want = first["result"]["lspResult"]
    times = []
    for p in proxies[1:]:
        t0 = time.monotonic()
        p.start()
        r = p.refs()
        times.append(time.monotonic() - t0)
        assert r.get("result", {}).get("lspResult") == want, r
    roots = [p.p.pid for p in proxies]
    daemon = None
    if shared:
        st = json.loads(subprocess.run([BIN, "daemon", "status", "--json"], env=env, capture_output=True, text=True).stdout)
        daemon = st["pid"]; roots.append(daemon)
    procs = [p for p in tree(roots) if not cmd0(p).startswith("python")]
    ras = [p for p in procs if cmd0(p).endswith("rust-analyzer")]
    total = sum(rss(p) for p in procs)
    print(f"{'shared' if shared else 'plain '}: rust-analyzer processes {len(ras)}, total RSS {total/2**20:.0f} MiB, "
          f"{len(want)} references, 2nd agent session/new -> references {times[0]*1000:.0f} ms, 3rd {times[1]*1000:.0f} ms", flush=True)
    for p in proxies:
        p.p.stdin.close()
    for p in proxies:
        p.p.wait()
    if daemon:
        os.kill(daemon, 15)

for mode in sys.argv[6:]:
    run(mode == "shared")
