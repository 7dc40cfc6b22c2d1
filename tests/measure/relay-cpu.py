# usage: python3 tests/measure/relay-cpu.py ACP_LSP_BINARY FAKE_SERVER_BINARY [ROUND_TRIPS]
# Editor -> agent -> editor round trips through `acp-lsp proxy -- FAKE` with
# the fake server in `echo_agent` mode (the agent of bench figure 1), one at
# a time. Prints the median round trip and the proxy's own CPU per round
# trip (utime+stime from /proc/PID/stat over the measured loop / count):
# the cleaner signal on a shared machine, where wall-clock medians swing.
import os, subprocess, sys, tempfile, time, statistics
binary, fake = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
config = tempfile.mkdtemp()  # an empty config home: the user's file must not matter
env = dict(os.environ, XDG_CONFIG_HOME=config, FAKE_LSP_MODE="echo_agent")
p = subprocess.Popen([binary, "proxy", "--", fake], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, env=env, bufsize=0)
def round_trip(i):
    p.stdin.write(b'{"jsonrpc":"2.0","id":%d,"method":"bench/echo","params":{}}\n' % i)
    got = b""
    while not got.endswith(b"\n"):
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            sys.exit("the proxy's output ended")
        got += chunk
def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
for i in range(500):  # warm-up
    round_trip(i)
before, samples = cpu_seconds(p.pid), []
for i in range(n):
    start = time.perf_counter()
    round_trip(1000 + i)
    samples.append(time.perf_counter() - start)
used = cpu_seconds(p.pid) - before
print(f"{os.path.basename(binary)}: median {statistics.median(samples) * 1e6:.1f} us, "
      f"proxy CPU {used / n * 1e6:.1f} us per round trip ({n} round trips)")
p.stdin.close()
p.wait()
