//! `--record FILE`: every message the proxy sees or sends, one JSON object per
//! line: `{"t": <ns since start>, "dir": "<direction>", "msg": <message>}`, or
//! `"text"` instead of `"msg"` when the bytes were not JSON, or `"fragment"` for
//! pieces of a line too long to inspect; `"event"` for what is not a message
//! (a server process starting or ending, the editor closing the input).
//!
//! Writing happens on a dedicated thread so the relay never waits on the disk.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

/// Where a message went (the record format's `dir`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Direction {
    EditorToProxy,
    ProxyToAgent,
    AgentToProxy,
    ProxyToEditor,
    /// By serverId (in a fixture, usually a `${serverId:…}` placeholder).
    ProxyToServer(String),
    ServerToProxy(String),
    /// What the editor's user did between messages (conformance fixtures
    /// only; the proxy never records it).
    Workspace,
}

impl Direction {
    pub fn parse(label: &str) -> Option<Direction> {
        Some(match label {
            "editor→proxy" => Direction::EditorToProxy,
            "proxy→agent" => Direction::ProxyToAgent,
            "agent→proxy" => Direction::AgentToProxy,
            "proxy→editor" => Direction::ProxyToEditor,
            "workspace" => Direction::Workspace,
            other => {
                if let Some(id) = other.strip_prefix("proxy→server:") {
                    Direction::ProxyToServer(id.to_string())
                } else {
                    let id = other.strip_prefix("server:")?.strip_suffix("→proxy")?;
                    Direction::ServerToProxy(id.to_string())
                }
            }
        })
    }

    pub fn label(&self) -> String {
        match self {
            Direction::Workspace => "workspace".into(),
            Direction::EditorToProxy => "editor→proxy".into(),
            Direction::ProxyToAgent => "proxy→agent".into(),
            Direction::AgentToProxy => "agent→proxy".into(),
            Direction::ProxyToEditor => "proxy→editor".into(),
            Direction::ProxyToServer(id) => format!("proxy→server:{id}"),
            Direction::ServerToProxy(id) => format!("server:{id}→proxy"),
        }
    }
}

#[derive(Debug)]
enum Entry {
    /// Flush, then acknowledge.
    Sync(mpsc::SyncSender<()>),
    Message {
        t: u128,
        dir: String,
        bytes: Vec<u8>,
    },
    Fragment {
        t: u128,
        dir: String,
        bytes: Vec<u8>,
    },
    /// `fields` is a JSON object's members without the braces.
    Event {
        t: u128,
        dir: String,
        fields: String,
    },
}

/// A cheap handle to the recording thread; clones share one file.
#[derive(Clone, Debug)]
pub struct Recorder {
    start: Instant,
    tx: mpsc::Sender<Entry>,
}

impl Recorder {
    /// Creates (truncates) the file and starts the writer thread.
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let file = std::fs::File::create(path)?;
        let (tx, rx) = mpsc::channel::<Entry>();
        std::thread::Builder::new()
            .name("acp-lsp-record".into())
            .spawn(move || write_entries(file, rx))?;
        Ok(Recorder {
            start: Instant::now(),
            tx,
        })
    }

    /// Records one whole message.
    pub fn message(&self, dir: &Direction, bytes: &[u8]) {
        let _ = self.tx.send(Entry::Message {
            t: self.start.elapsed().as_nanos(),
            dir: dir.label(),
            bytes: bytes.to_vec(),
        });
    }

    /// Waits until everything recorded so far is in the file.
    pub fn sync(&self) {
        let (ack, done) = mpsc::sync_channel(1);
        if self.tx.send(Entry::Sync(ack)).is_ok() {
            let _ = done.recv();
        }
    }

    /// Records what is not a message: `{"t", "dir", "event": name, ...extra}`.
    /// `extra` holds string members, e.g. a server's name and root.
    pub fn event(&self, dir: &Direction, name: &str, extra: &[(&str, &str)]) {
        let mut fields = format!("\"event\":{}", json_string(name));
        for (key, value) in extra {
            fields.push_str(&format!(",{}:{}", json_string(key), json_string(value)));
        }
        let _ = self.tx.send(Entry::Event {
            t: self.start.elapsed().as_nanos(),
            dir: dir.label(),
            fields,
        });
    }

    /// Records a piece of a line too long to inspect.
    pub fn fragment(&self, dir: &Direction, bytes: &[u8]) {
        let _ = self.tx.send(Entry::Fragment {
            t: self.start.elapsed().as_nanos(),
            dir: dir.label(),
            bytes: bytes.to_vec(),
        });
    }
}

fn write_entries(file: std::fs::File, rx: mpsc::Receiver<Entry>) {
    let mut out = std::io::BufWriter::new(file);
    while let Ok(mut entry) = rx.recv() {
        // Write everything queued, then flush once: a crash loses little and
        // bursts cost one write.
        loop {
            match entry {
                Entry::Sync(ack) => {
                    let _ = out.flush();
                    let _ = ack.send(());
                }
                other => {
                    if out.write_all(&render(&other)).is_err() {
                        return;
                    }
                }
            }
            match rx.try_recv() {
                Ok(next) => entry = next,
                Err(_) => break,
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("BUG: a string always serializes")
}

fn render(entry: &Entry) -> Vec<u8> {
    let (t, dir, bytes, fragment) = match entry {
        Entry::Message { t, dir, bytes } => (t, dir, bytes, false),
        Entry::Fragment { t, dir, bytes } => (t, dir, bytes, true),
        Entry::Event { t, dir, fields } => {
            return format!("{{\"t\":{t},\"dir\":{},{fields}}}\n", json_string(dir)).into_bytes()
        }
        Entry::Sync(_) => return Vec::new(),
    };
    let mut line = Vec::with_capacity(bytes.len() + 64);
    line.extend_from_slice(format!("{{\"t\":{t},\"dir\":").as_bytes());
    line.extend_from_slice(
        serde_json::to_string(dir)
            .expect("BUG: a string always serializes")
            .as_bytes(),
    );
    let as_json = !fragment
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
        && !bytes.contains(&b'\n');
    if as_json {
        line.extend_from_slice(b",\"msg\":");
        line.extend_from_slice(bytes);
    } else {
        line.extend_from_slice(if fragment {
            b",\"fragment\":"
        } else {
            b",\"text\":"
        });
        let text = String::from_utf8_lossy(bytes);
        line.extend_from_slice(
            serde_json::to_string(&text)
                .expect("BUG: a string always serializes")
                .as_bytes(),
        );
    }
    line.extend_from_slice(b"}\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_json_raw_and_other_bytes_as_text() {
        let line = render(&Entry::Message {
            t: 5,
            dir: "agent→proxy".into(),
            bytes: br#"{"id":18446744073709551616}"#.to_vec(),
        });
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"t\":5,\"dir\":\"agent→proxy\",\"msg\":{\"id\":18446744073709551616}}\n"
        );
        let line = render(&Entry::Message {
            t: 6,
            dir: "x".into(),
            bytes: b"not json".to_vec(),
        });
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"t\":6,\"dir\":\"x\",\"text\":\"not json\"}\n"
        );
    }

    #[test]
    fn renders_events_with_their_members() {
        let line = render(&Entry::Event {
            t: 7,
            dir: "proxy→server:x".into(),
            fields: format!(
                "\"event\":{},\"name\":{}",
                json_string("spawn"),
                json_string("a\"b")
            ),
        });
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["event"], "spawn");
        assert_eq!(value["name"], "a\"b");
        assert_eq!(value["dir"], "proxy→server:x");
    }

    #[test]
    fn writes_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let recorder = Recorder::create(&path).unwrap();
        recorder.message(&Direction::ProxyToServer("abc".into()), b"{}");
        recorder.sync();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"dir\":\"proxy→server:abc\",\"msg\":{}"),
            "{text}"
        );
    }
}
