# A minimal ACP agent: answers initialize and session/new, then asks the
# proxy lsp/servers and one hover on src/lib.rs (waitUntilReady), and
# writes the hover answer to $DONE_FILE.
import sys, json, os
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
cwd = None; sid = None
for line in sys.stdin:
    m = json.loads(line)
    meth = m.get("method")
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif meth == "session/new":
        cwd = m["params"]["cwd"]; sid = "s1"
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": sid}})
        send({"jsonrpc": "2.0", "id": "a1", "method": "lsp/servers", "params": {"sessionId": sid}})
    elif m.get("id") == "a1":
        servers = m["result"]["servers"]
        with open(os.environ["DONE_FILE"] + ".servers", "w") as f:
            json.dump(servers, f)
        ra = [s for s in servers if s["name"] == "rust-analyzer" and s["workspacePath"] == cwd][0]
        send({"jsonrpc": "2.0", "id": "a2", "method": "lsp/request", "params": {
            "sessionId": sid, "serverId": ra["serverId"], "method": "textDocument/hover",
            "params": {"textDocument": {"uri": "file://" + cwd + "/src/lib.rs"}, "position": {"line": 9, "character": 9}},
            "_meta": {"waitUntilReady": 120000}}})
    elif m.get("id") == "a2":
        with open(os.environ["DONE_FILE"], "w") as f:
            json.dump(m, f)
