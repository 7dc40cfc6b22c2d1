# An ACP agent for the shared-server tests and figure 6 of the bench
# (tests/daemon.rs, benches/support/shared.rs, tests/shared-bench/measure.py).
# It answers `initialize` and `session/new` (always session "s": a shared
# daemon must keep several proxies' "s" apart) and, for the editor's
# `_test/ask {method, params}`, sends that request to its client (the proxy
# answers `lsp/*`) and answers with `{response}`; for
# `_test/notify {method, params}`, sends that notification.
import json, sys
pending = {}
n = 0
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "method" in msg and "id" in msg:
        method = msg["method"]
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s"}})
        elif method == "_test/notify":
            send({"jsonrpc": "2.0", "method": msg["params"]["method"], "params": msg["params"]["params"]})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
        elif method == "_test/ask":
            n += 1
            ours = "agent-%d" % n
            pending[ours] = msg["id"]
            send({"jsonrpc": "2.0", "id": ours, "method": msg["params"]["method"], "params": msg["params"]["params"]})
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
    elif "id" in msg and msg["id"] in pending:
        send({"jsonrpc": "2.0", "id": pending.pop(msg["id"]), "result": {"response": msg}})
