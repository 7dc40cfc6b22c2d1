//! A server reached over the network instead of run as a child: the
//! `connect`, `token_env`, `token_via`, `subprotocol`, `tls_ca_file` and `path_map` keys of
//! a `[servers.NAME]` table, validated here (config.rs only carries them).

use super::path_map::PathMapping;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where a remote server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `tcp://host:port`: Content-Length framed LSP on the byte stream.
    Tcp(String),
    /// `unix:/path`: the same on a Unix socket.
    Unix(PathBuf),
    /// `ws://…` or `wss://…`: one LSP message per WebSocket text frame.
    WebSocket(String),
}

impl Endpoint {
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        if let Some(rest) = text.strip_prefix("tcp://") {
            let rest = rest.trim_end_matches('/');
            let valid = rest
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid || rest.contains('/') {
                return Err(format!("`{text}`: expected tcp://host:port"));
            }
            return Ok(Endpoint::Tcp(rest.to_string()));
        }
        if let Some(path) = text.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(format!("`{text}`: expected unix:/absolute/path"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        if text.starts_with("ws://") || text.starts_with("wss://") {
            let url = url::Url::parse(text).map_err(|e| format!("`{text}`: {e}"))?;
            if url.host_str().is_none_or(str::is_empty) {
                return Err(format!("`{text}`: no host"));
            }
            return Ok(Endpoint::WebSocket(text.to_string()));
        }
        Err(format!(
            "`{text}`: expected tcp://host:port, unix:/path, ws://… or wss://…"
        ))
    }
}

/// How the token of `token_env` is sent (WebSocket only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenVia {
    /// `Authorization: Bearer <token>` on the upgrade request.
    #[default]
    Header,
    /// Offered as a WebSocket subprotocol (`Sec-WebSocket-Protocol`), after
    /// `subprotocol` when one is set: for servers behind browsers' rules,
    /// where no header can be set.
    Subprotocol,
}

/// The remote part of a server definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remote {
    /// As written (validated by [`Endpoint::parse`]).
    pub connect: String,
    /// The environment variable of the proxy holding the token; the token
    /// itself is never in a config file.
    pub token_env: Option<String>,
    pub token_via: TokenVia,
    /// A subprotocol to offer (first) on WebSocket.
    pub subprotocol: Option<String>,
    /// PEM certificates trusted for `wss://` besides the public roots
    /// (a server with its own CA).
    pub tls_ca_file: Option<PathBuf>,
    pub path_map: Vec<PathMapping>,
}

impl Remote {
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        Endpoint::parse(&self.connect)
    }
}

/// The remote keys of one `[servers.NAME]` table, as given.
#[derive(Debug, Default)]
pub struct RemoteKeys {
    pub connect: Option<String>,
    pub token_env: Option<String>,
    pub token_via: Option<TokenVia>,
    pub subprotocol: Option<String>,
    pub tls_ca_file: Option<PathBuf>,
    pub path_map: Option<Vec<PathMapping>>,
}

impl RemoteKeys {
    fn any(&self) -> bool {
        self.connect.is_some()
            || self.token_env.is_some()
            || self.token_via.is_some()
            || self.subprotocol.is_some()
            || self.tls_ca_file.is_some()
            || self.path_map.is_some()
    }
}

/// Applies the given remote keys over `current`; on failure (key, message).
pub fn apply(current: &mut Option<Remote>, keys: RemoteKeys) -> Result<(), (&'static str, String)> {
    if !keys.any() {
        return Ok(());
    }
    let mut remote = match (current.take(), keys.connect) {
        (_, Some(connect)) => Remote {
            connect,
            token_env: None,
            token_via: TokenVia::default(),
            subprotocol: None,
            tls_ca_file: None,
            path_map: Vec::new(),
        },
        (Some(existing), None) => existing,
        (None, None) => {
            return Err((
                "connect",
                "token_env, token_via, subprotocol, tls_ca_file and path_map need `connect`"
                    .to_string(),
            ))
        }
    };
    let endpoint = remote.endpoint().map_err(|e| ("connect", e))?;
    if let Some(name) = keys.token_env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(("token_env", "must name an environment variable".to_string()));
        }
        remote.token_env = Some(name);
    }
    if let Some(via) = keys.token_via {
        remote.token_via = via;
    }
    if let Some(sub) = keys.subprotocol {
        if sub.is_empty() || !sub.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            return Err((
                "subprotocol",
                "must be a non-empty token (no spaces or commas)".to_string(),
            ));
        }
        remote.subprotocol = Some(sub);
    }
    if let Some(file) = keys.tls_ca_file {
        if !file.is_absolute() {
            return Err(("tls_ca_file", "must be an absolute path".to_string()));
        }
        if !remote.connect.starts_with("wss://") {
            return Err(("tls_ca_file", "only wss:// uses TLS".to_string()));
        }
        remote.tls_ca_file = Some(file);
    }
    if let Some(map) = keys.path_map {
        for mapping in &map {
            mapping.validate().map_err(|e| ("path_map", e))?;
        }
        remote.path_map = map;
    }
    if remote.token_env.is_some() && !matches!(endpoint, Endpoint::WebSocket(_)) {
        return Err((
            "token_env",
            "a token is sent only over ws:// or wss://".to_string(),
        ));
    }
    *current = Some(remote);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:9257"),
            Ok(Endpoint::Tcp("127.0.0.1:9257".into()))
        );
        assert_eq!(
            Endpoint::parse("unix:/run/ls.sock"),
            Ok(Endpoint::Unix("/run/ls.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("wss://ls.example:443/lsp"),
            Ok(Endpoint::WebSocket("wss://ls.example:443/lsp".into()))
        );
        for bad in [
            "tcp://host",
            "tcp://:1",
            "unix:rel.sock",
            "http://x",
            "ws://",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn acp_lsp_servers_names_the_connection_not_a_local_binary() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
        let config_dir = tempfile::tempdir().unwrap();
        let file = config_dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[servers.pyright]\nconnect = \"tcp://127.0.0.1:9\"\n",
        )
        .unwrap();
        let config = crate::lsp::config::Config::load(Some(&file)).unwrap();
        let report = crate::lsp::detect::health_report(dir.path(), &config);
        let line = report
            .lines()
            .find(|l| l.trim_start().starts_with("pyright "))
            .unwrap_or_else(|| panic!("{report}"));
        assert!(
            line.ends_with("connect tcp://127.0.0.1:9 (not probed)"),
            "{report}"
        );
    }

    #[test]
    fn keys_need_connect_and_tokens_need_websocket() {
        let mut remote = None;
        let err = apply(
            &mut remote,
            RemoteKeys {
                token_env: Some("T".into()),
                ..RemoteKeys::default()
            },
        );
        assert_eq!(err.unwrap_err().0, "connect");
        let err = apply(
            &mut remote,
            RemoteKeys {
                connect: Some("tcp://h:1".into()),
                token_env: Some("T".into()),
                ..RemoteKeys::default()
            },
        );
        assert_eq!(err.unwrap_err().0, "token_env");
        apply(
            &mut remote,
            RemoteKeys {
                connect: Some("ws://h:1/".into()),
                token_env: Some("T".into()),
                token_via: Some(TokenVia::Subprotocol),
                ..RemoteKeys::default()
            },
        )
        .unwrap();
        let remote = remote.unwrap();
        assert_eq!(remote.token_env.as_deref(), Some("T"));
        assert_eq!(remote.token_via, TokenVia::Subprotocol);
    }
}
