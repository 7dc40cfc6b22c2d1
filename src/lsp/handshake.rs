//! The LSP handshake: the `initialize` params acp-lsp sends (honest client
//! capabilities), reading the server's answer, and `capabilities` as
//! `lsp/servers` reports them (initialize result merged with registrations).

use super::config::ServerConfig;
use super::registration::raw_json;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::path::Path;

/// What acp-lsp keeps from an initialize result.
#[derive(Debug)]
pub struct InitializeInfo {
    /// `capabilities`, verbatim.
    pub capabilities: Box<RawValue>,
    pub version: Option<String>,
    pub position_encoding: Option<String>,
}

fn file_uri(path: &Path) -> String {
    url::Url::from_directory_path(path)
        .or_else(|_| url::Url::from_file_path(path))
        .map(|u| u.as_str().trim_end_matches('/').to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

/// `[{uri, name}]` for the server's root.
pub fn workspace_folders(root: &Path) -> Value {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string());
    json!([{ "uri": file_uri(root), "name": name }])
}

/// The `initialize` params. Capabilities advertise only what acp-lsp really does.
pub fn initialize_params(config: &ServerConfig, root: &Path) -> Box<RawValue> {
    let encodings = if config.position_encodings.is_empty() {
        vec!["utf-16".to_string()]
    } else {
        config.position_encodings.clone()
    };
    let mut params = json!({
        "processId": std::process::id(),
        "clientInfo": { "name": "acp-lsp", "version": env!("CARGO_PKG_VERSION") },
        "rootUri": file_uri(root),
        "rootPath": root.display().to_string(),
        "workspaceFolders": workspace_folders(root),
        "capabilities": {
            "general": { "positionEncodings": encodings },
            "window": {
                "workDoneProgress": true,
                "showMessage": {},
                "showDocument": { "support": false }
            },
            "workspace": {
                "workspaceFolders": true,
                "configuration": true,
                "didChangeWatchedFiles": { "dynamicRegistration": true, "relativePatternSupport": true },
                "didChangeConfiguration": { "dynamicRegistration": false },
                "applyEdit": false,
                "workspaceEdit": {
                    "documentChanges": true,
                    "resourceOperations": ["create", "rename", "delete"],
                    "failureHandling": "abort",
                    "changeAnnotationSupport": { "groupsOnLabel": false }
                },
                "symbol": { "dynamicRegistration": false },
                "executeCommand": { "dynamicRegistration": false },
                "fileOperations": { "dynamicRegistration": false, "willRename": true, "willCreate": true, "willDelete": true }
            },
            "textDocument": {
                "synchronization": { "dynamicRegistration": false, "didSave": false, "willSave": false, "willSaveWaitUntil": false },
                "hover": { "contentFormat": ["markdown", "plaintext"] },
                "definition": { "linkSupport": true },
                "declaration": { "linkSupport": true },
                "typeDefinition": { "linkSupport": true },
                "implementation": { "linkSupport": true },
                "references": {},
                "documentSymbol": { "hierarchicalDocumentSymbolSupport": true },
                "rename": { "prepareSupport": true },
                "codeAction": { "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["", "quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite", "source", "source.organizeImports"] } }, "resolveSupport": { "properties": ["edit"] } },
                "completion": { "completionItem": { "snippetSupport": false } },
                "signatureHelp": {},
                "publishDiagnostics": { "relatedInformation": true, "versionSupport": true },
                "callHierarchy": {},
                "typeHierarchy": {},
                "formatting": {},
                "rangeFormatting": {},
                "inlayHint": {},
                "semanticTokens": { "requests": { "full": true, "range": true }, "tokenTypes": [], "tokenModifiers": [], "formats": ["relative"] },
                "diagnostic": { "dynamicRegistration": false }
            },
            "experimental": { "serverStatusNotification": true }
        }
    });
    // A server on another machine would look for this process there, and
    // servers exit when their parent's pid is not alive: none for a remote one.
    if config.remote.is_some() {
        params["processId"] = serde_json::Value::Null;
    }
    if let Some(options) = &config.initialization_options {
        params["initializationOptions"] = options.clone();
    }
    raw_json(&params)
}

/// Reads the parts of an initialize result acp-lsp uses, keeping `capabilities` raw.
pub fn read_initialize_result(result: &RawValue) -> Result<InitializeInfo, serde_json::Error> {
    #[derive(Deserialize)]
    struct ServerInfo {
        #[serde(default)]
        version: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Encoding {
        #[serde(default)]
        position_encoding: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Result<'a> {
        #[serde(borrow)]
        capabilities: &'a RawValue,
        #[serde(default)]
        server_info: Option<ServerInfo>,
    }
    let parsed: Result = serde_json::from_str(result.get())?;
    let encoding: Encoding = serde_json::from_str(parsed.capabilities.get()).unwrap_or(Encoding {
        position_encoding: None,
    });
    Ok(InitializeInfo {
        capabilities: parsed.capabilities.to_owned(),
        version: parsed.server_info.and_then(|i| i.version),
        position_encoding: encoding.position_encoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_result_and_keeps_capabilities_verbatim() {
        let result: &RawValue = serde_json::from_str(
            r#"{"capabilities":{"positionEncoding":"utf-16","x_vendor":{"a":1},"hoverProvider":true},"serverInfo":{"name":"s","version":"1.2"}}"#,
        )
        .unwrap();
        let info = read_initialize_result(result).unwrap();
        assert_eq!(
            info.capabilities.get(),
            r#"{"positionEncoding":"utf-16","x_vendor":{"a":1},"hoverProvider":true}"#
        );
        assert_eq!(info.version.as_deref(), Some("1.2"));
        assert_eq!(info.position_encoding.as_deref(), Some("utf-16"));
    }

    #[test]
    fn initialize_params_are_honest() {
        let config = ServerConfig::new("x", "x", &[], &["rust"], &["rs"], &[]);
        let params: Value =
            serde_json::from_str(initialize_params(&config, Path::new("/ws/proj")).get()).unwrap();
        assert_eq!(params["rootUri"], "file:///ws/proj");
        assert_eq!(
            params["capabilities"]["general"]["positionEncodings"],
            json!(["utf-16"])
        );
        assert_eq!(
            params["capabilities"]["workspace"]["didChangeWatchedFiles"]["dynamicRegistration"],
            true
        );
        assert_eq!(params["workspaceFolders"][0]["name"], "proj");
    }
}
