//! `acp-lsp daemon status`: asks a running daemon (never starts one) for
//! its clients, servers, memory and uptime.

use super::paths::Paths;
use super::wire::{self, Op, Reply, Request, Status};
use super::{HELLO_TIMEOUT, MAX_LINE_BYTES};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::{FramedRead, LinesCodec};

/// Why no status came back.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("no shared daemon is running (nothing answers on {0})")]
    NotRunning(String),
    #[error("the daemon did not answer within {0} ms")]
    Timeout(u64),
    #[error("the daemon's answer is not a status: {0}")]
    Bad(String),
    #[error("the daemon connection failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The status of the daemon at `paths`.
pub async fn query(paths: &Paths) -> Result<Status, StatusError> {
    let stream = crate::sys::local_socket::connect(&paths.socket)
        .await
        .map_err(|_| StatusError::NotRunning(paths.socket.display().to_string()))?;
    let (read, mut write) = stream.into_split();
    let request = wire::line(&Request {
        id: 1,
        op: Op::Status,
    })
    .map_err(|e| StatusError::Bad(e.to_string()))?;
    write.write_all(request.as_bytes()).await?;
    let mut lines = FramedRead::new(read, LinesCodec::new_with_max_length(MAX_LINE_BYTES));
    let line = tokio::time::timeout(HELLO_TIMEOUT, lines.next())
        .await
        .map_err(|_| StatusError::Timeout(HELLO_TIMEOUT.as_millis() as u64))?
        .ok_or_else(|| StatusError::Bad("the connection closed".into()))?
        .map_err(|e| StatusError::Bad(e.to_string()))?;
    let reply: Reply = serde_json::from_str(&line).map_err(|e| StatusError::Bad(e.to_string()))?;
    let ok = reply
        .ok
        .ok_or_else(|| StatusError::Bad(format!("{:?}", reply.err)))?;
    serde_json::from_str(ok.get()).map_err(|e| StatusError::Bad(e.to_string()))
}

/// The status as people read it.
pub fn render(status: &Status) -> String {
    let mut out = format!(
        "daemon pid {}, acp-lsp {}, up {}, memory {}\nsocket {}\n",
        status.pid,
        status.version,
        seconds(status.uptime_ms),
        mib(status.memory_bytes),
        status.socket.display()
    );
    out.push_str(&format!("clients: {}\n", status.clients.len()));
    for c in &status.clients {
        out.push_str(&format!(
            "  #{} pid {} sessions {} in flight {} connected {}\n",
            c.client,
            c.pid,
            c.sessions,
            c.in_flight,
            seconds(c.connected_ms)
        ));
    }
    out.push_str(&format!("servers: {}\n", status.servers.len()));
    for s in &status.servers {
        let ours = s.ours();
        out.push_str(&format!(
            "  {} {} ({}) {} serverId {} pid {} memory {}\n",
            s.name,
            s.state.as_str(),
            ours.status.as_str(),
            s.workspace_path,
            s.server_id,
            ours.pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            mib(ours.memory_bytes)
        ));
    }
    out
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn mib(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "-".into())
}
