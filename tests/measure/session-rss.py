# usage: python3 tests/measure/session-rss.py ACP_LSP_BINARY PROJECT_DIR [SETTLE_SECONDS]
# Starts `acp-lsp proxy --mcp off -- python3 agent.py` with PROJECT_DIR as the
# session cwd, sends initialize + session/new, waits for the agent's hover on
# src/lib.rs, then SETTLE_SECONDS more (default 30), and prints the proxy's
# process tree: language servers started, and the sum of VmRSS over the proxy
# and all its descendants (peak over samples every 0.5 s).
import sys, json, os, subprocess, time, threading
binary, project = sys.argv[1], os.path.realpath(sys.argv[2])
settle = float(sys.argv[3]) if len(sys.argv) > 3 else 30
here = os.path.dirname(os.path.abspath(__file__))
done = os.path.join(__import__("tempfile").gettempdir(), f"acp-lsp-session-rss-{os.getpid()}")
env = dict(os.environ, DONE_FILE=done)
p = subprocess.Popen([binary, "proxy", "--mcp", "off", "--", "python3", os.path.join(here, "session-rss-agent.py")],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=project, env=env)
threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
def tree(root):
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(pid))
        except Exception: pass
    out, todo = [], [root]
    while todo:
        x = todo.pop(); out.append(x); todo += kids.get(x, [])
    return out
def rss(pid):
    try:
        for l in open(f"/proc/{pid}/status"):
            if l.startswith("VmRSS:"): return int(l.split()[1]) * 1024
    except Exception: pass
    return 0
def comm(pid):
    try: return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:90]
    except Exception: return "?"
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": project, "mcpServers": []}})
t0 = time.time(); peak = 0; hover_at = None
while True:
    pids = tree(p.pid); total = sum(rss(x) for x in pids); peak = max(peak, total)
    if hover_at is None and os.path.exists(done): hover_at = time.time() - t0
    if hover_at is not None and time.time() - t0 > hover_at + settle: break
    if time.time() - t0 > 300: break
    time.sleep(0.5)
pids = tree(p.pid)
children = [x for x in pids if x != p.pid]
servers = [x for x in children if any(k in comm(x) for k in ("rust-analyzer", "pyright", "typescript-language-server", "clangd", "tsserver", "pylsp", "node"))]
direct = [x for x in children if int(open(f"/proc/{x}/stat").read().rsplit(")", 1)[1].split()[1]) == p.pid]
print(f"hover answered after {hover_at:.1f} s" if hover_at else "no hover answer")
if hover_at: print("hover:", open(done).read()[:200])
print(f"processes in the tree: {len(pids)}")
print("direct children of the proxy:")
for x in direct: print(f"  {x} {rss(x)//2**20:5} MiB  {comm(x)}")
print(f"language-server processes: {len(servers)}")
print(f"VmRSS sum now: {sum(rss(x) for x in pids)/2**20:.0f} MiB; peak: {peak/2**20:.0f} MiB")
p.stdin.close(); p.wait(timeout=60)
