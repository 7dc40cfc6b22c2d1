// Byte tap shared by the test peers.
//
// Wraps a Node writable/readable byte stream into a Web stream for the SDK's
// `ndJsonStream`, and records every raw line that passes, exactly as it was on
// the wire (without its terminating "\n"), as JSONL `{"dir":"out"|"in","line":…}`
// into the file named by the given path. Lines are split on byte 0x0A before
// decoding, so a multi-byte UTF-8 character split across pipe chunks is kept
// whole. Records are written synchronously so that they survive a crash and
// keep the order in which the bytes passed.

import fs from "node:fs";

class LineTap {
  constructor(fd, dir) {
    this.fd = fd;
    this.dir = dir;
    this.pending = [];
  }

  push(chunk) {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl === -1) break;
      this.pending.push(chunk.subarray(start, nl));
      this.emit(Buffer.concat(this.pending));
      this.pending = [];
      start = nl + 1;
    }
    if (start < chunk.length) this.pending.push(Buffer.from(chunk.subarray(start)));
  }

  // A trailing line without "\n" (stream ended mid-line) is recorded as well,
  // flagged so that a test can tell it apart.
  flush() {
    if (this.pending.length === 0) return;
    const line = Buffer.concat(this.pending);
    this.pending = [];
    this.emit(line, true);
  }

  emit(bytes, unterminated = false) {
    if (this.fd === null) return;
    const rec = { dir: this.dir, line: bytes.toString("utf8") };
    if (unterminated) rec.unterminated = true;
    fs.writeSync(this.fd, JSON.stringify(rec) + "\n");
  }
}

/** Opens the tap file (truncating it), or returns null when no path is set. */
export function openTap(path) {
  if (!path) return null;
  return fs.openSync(path, "w");
}

/** A WritableStream<Uint8Array> that records and forwards to a Node writable. */
export function tappedWritable(nodeWritable, fd) {
  const tap = new LineTap(fd, "out");
  return new WritableStream({
    write(chunk) {
      const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      tap.push(buf);
      return new Promise((resolve, reject) => {
        nodeWritable.write(buf, (err) => (err ? reject(err) : resolve()));
      });
    },
    close() {
      tap.flush();
      nodeWritable.end();
    },
    abort() {
      tap.flush();
      nodeWritable.end();
    },
  });
}

/**
 * A ReadableStream<Uint8Array> fed by a Node readable, recording every line.
 * `onEnd` is called once the Node stream has ended (after the last record).
 */
export function tappedReadable(nodeReadable, fd, onEnd = () => {}) {
  const tap = new LineTap(fd, "in");
  return new ReadableStream({
    start(controller) {
      nodeReadable.on("data", (chunk) => {
        tap.push(chunk);
        // Copy: Node may reuse pooled buffers, and the SDK keeps references.
        controller.enqueue(new Uint8Array(chunk));
      });
      nodeReadable.on("end", () => {
        tap.flush();
        onEnd();
        try {
          controller.close();
        } catch {
          // already cancelled by the SDK
        }
      });
      nodeReadable.on("error", (err) => {
        tap.flush();
        onEnd();
        try {
          controller.error(err);
        } catch {
          // already cancelled by the SDK
        }
      });
    },
  });
}
