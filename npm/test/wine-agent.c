/* A trivial ACP agent for the Windows binary's check under wine
   (.ci/npm-packages): acp-lsp.exe must start a Windows program, and no
   Windows Node or Python is at hand. It appends every line it reads to the
   file named by argv[1] (so the check sees what acp-lsp relayed) and
   answers each request's integer id with an `initialize` result; it exits
   when its input ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <io.h>

int main(int argc, char **argv) {
    static char line[1 << 16];
    /* Text mode would turn each "\n" written into "\r\n" on the wire. */
    _setmode(_fileno(stdin), _O_BINARY);
    _setmode(_fileno(stdout), _O_BINARY);
    FILE *log = argc > 1 ? fopen(argv[1], "ab") : NULL;
    if (!log) {
        fprintf(stderr, "wine-agent: usage: wine-agent LOG_FILE\n");
        return 2;
    }
    while (fgets(line, sizeof line, stdin)) {
        fputs(line, log);
        fflush(log);
        const char *id = strstr(line, "\"id\":");
        if (!id || !strstr(line, "\"method\":")) continue;
        long n = strtol(id + 5, NULL, 10);
        printf("{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"protocolVersion\":1,"
               "\"agentCapabilities\":{},\"agentInfo\":{\"name\":\"wine-agent\",\"version\":\"0\"}}}\n",
               n);
        fflush(stdout);
    }
    fclose(log);
    return 0;
}
