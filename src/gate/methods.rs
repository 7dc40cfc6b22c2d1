//! Which LSP methods the gate forwards and which it refuses, by category.
//!
//! The lists are the normative ones of `rfd/lsp-over-acp.md`; keep them in step.

/// The spellings under which the gate's two ACP methods are accepted.
pub const SERVERS_METHODS: &[&str] = &["lsp/servers", "_lsp/servers", "_zed.dev/lsp/servers"];
/// See [`SERVERS_METHODS`].
pub const REQUEST_METHODS: &[&str] = &["lsp/request", "_lsp/request", "_zed.dev/lsp/request"];

/// acp-lsp's extension: the latest diagnostics (rfd section 12).
pub const DIAGNOSTICS_METHODS: &[&str] = &["_acp-lsp/diagnostics"];

/// One of the gate's own ACP methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMethod {
    Servers,
    Request,
    Diagnostics,
}

impl GateMethod {
    /// Recognises an ACP method name as one of ours.
    pub fn from_acp(method: &str) -> Option<GateMethod> {
        if SERVERS_METHODS.contains(&method) {
            Some(GateMethod::Servers)
        } else if REQUEST_METHODS.contains(&method) {
            Some(GateMethod::Request)
        } else if DIAGNOSTICS_METHODS.contains(&method) {
            Some(GateMethod::Diagnostics)
        } else {
            None
        }
    }
}

/// Why an LSP method is not forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Connection lifecycle belongs to the proxy.
    Lifecycle,
    /// Document state is kept by the proxy from the disk.
    DocumentSync,
    /// A client→server notification: `lsp/request` carries requests only.
    Notification,
    /// A method the server sends to its client, never the other way.
    ServerToClient,
    /// `workspace/executeCommand` with a command not on the server's allowlist.
    CommandNotAllowed,
}

impl Refusal {
    /// The `data.reason` of the error.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Lifecycle => "lifecycle_method",
            Refusal::DocumentSync => "document_sync_method",
            Refusal::Notification => "notification_method",
            Refusal::ServerToClient => "server_to_client_method",
            Refusal::CommandNotAllowed => "command_not_allowed",
        }
    }
}

/// Lifecycle methods.
pub const LIFECYCLE: &[&str] = &["initialize", "initialized", "shutdown", "exit"];

/// Document synchronisation, requests and notifications alike.
pub const DOCUMENT_SYNC: &[&str] = &[
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "textDocument/didSave",
    "textDocument/willSave",
    "textDocument/willSaveWaitUntil",
    "notebookDocument/didOpen",
    "notebookDocument/didChange",
    "notebookDocument/didSave",
    "notebookDocument/didClose",
    "workspace/didChangeWatchedFiles",
    "workspace/didChangeConfiguration",
    "workspace/didChangeWorkspaceFolders",
    "workspace/didCreateFiles",
    "workspace/didRenameFiles",
    "workspace/didDeleteFiles",
];

/// Other client→server notifications. Every `$/` method is refused as well.
pub const NOTIFICATIONS: &[&str] = &[
    "$/cancelRequest",
    "$/setTrace",
    "$/progress",
    "window/workDoneProgress/cancel",
];

/// Server→client methods (requests and notifications).
pub const SERVER_TO_CLIENT: &[&str] = &[
    "workspace/applyEdit",
    "workspace/configuration",
    "workspace/workspaceFolders",
    "workspace/codeLens/refresh",
    "workspace/semanticTokens/refresh",
    "workspace/inlayHint/refresh",
    "workspace/inlineValue/refresh",
    "workspace/diagnostic/refresh",
    "workspace/foldingRange/refresh",
    "client/registerCapability",
    "client/unregisterCapability",
    "window/showMessage",
    "window/showMessageRequest",
    "window/showDocument",
    "window/logMessage",
    "window/workDoneProgress/create",
    "telemetry/event",
    "textDocument/publishDiagnostics",
    "$/logTrace",
];

/// The LSP 3.17 client→server requests the gate forwards, as listed in
/// `availableMethods`. Methods outside every list (server extensions such as
/// `rust-analyzer/expandMacro`) are forwarded too.
pub const FORWARDED: &[&str] = &[
    "callHierarchy/incomingCalls",
    "callHierarchy/outgoingCalls",
    "codeAction/resolve",
    "codeLens/resolve",
    "completionItem/resolve",
    "documentLink/resolve",
    "inlayHint/resolve",
    "textDocument/codeAction",
    "textDocument/codeLens",
    "textDocument/colorPresentation",
    "textDocument/completion",
    "textDocument/declaration",
    "textDocument/definition",
    "textDocument/diagnostic",
    "textDocument/documentColor",
    "textDocument/documentHighlight",
    "textDocument/documentLink",
    "textDocument/documentSymbol",
    "textDocument/foldingRange",
    "textDocument/formatting",
    "textDocument/hover",
    "textDocument/implementation",
    "textDocument/inlayHint",
    "textDocument/inlineValue",
    "textDocument/linkedEditingRange",
    "textDocument/moniker",
    "textDocument/onTypeFormatting",
    "textDocument/prepareCallHierarchy",
    "textDocument/prepareRename",
    "textDocument/prepareTypeHierarchy",
    "textDocument/rangeFormatting",
    "textDocument/references",
    "textDocument/rename",
    "textDocument/selectionRange",
    "textDocument/semanticTokens/full",
    "textDocument/semanticTokens/full/delta",
    "textDocument/semanticTokens/range",
    "textDocument/signatureHelp",
    "textDocument/typeDefinition",
    "typeHierarchy/subtypes",
    "typeHierarchy/supertypes",
    "workspace/diagnostic",
    "workspace/executeCommand",
    "workspace/symbol",
    "workspaceSymbol/resolve",
    "workspace/willCreateFiles",
    "workspace/willRenameFiles",
    "workspace/willDeleteFiles",
];

/// Why `method` must not be forwarded, or `None` when it may be (subject to the
/// `workspace/executeCommand` allowlist, checked separately).
pub fn refusal(method: &str) -> Option<Refusal> {
    if LIFECYCLE.contains(&method) {
        Some(Refusal::Lifecycle)
    } else if DOCUMENT_SYNC.contains(&method) {
        Some(Refusal::DocumentSync)
    } else if SERVER_TO_CLIENT.contains(&method) {
        Some(Refusal::ServerToClient)
    } else if NOTIFICATIONS.contains(&method) || method.starts_with("$/") {
        Some(Refusal::Notification)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_is_refused() {
        assert_eq!(refusal("initialize"), Some(Refusal::Lifecycle));
        assert_eq!(refusal("exit"), Some(Refusal::Lifecycle));
        assert_eq!(refusal("textDocument/didOpen"), Some(Refusal::DocumentSync));
        assert_eq!(
            refusal("workspace/didChangeWatchedFiles"),
            Some(Refusal::DocumentSync)
        );
        assert_eq!(refusal("$/cancelRequest"), Some(Refusal::Notification));
        assert_eq!(refusal("$/anything"), Some(Refusal::Notification));
        assert_eq!(
            refusal("workspace/applyEdit"),
            Some(Refusal::ServerToClient)
        );
        assert_eq!(
            refusal("client/registerCapability"),
            Some(Refusal::ServerToClient)
        );
        assert_eq!(refusal("textDocument/rename"), None);
        assert_eq!(refusal("rust-analyzer/expandMacro"), None);
    }

    #[test]
    fn forwarded_and_refused_lists_are_disjoint() {
        for method in FORWARDED {
            assert_eq!(refusal(method), None, "{method}");
        }
    }

    #[test]
    fn recognises_every_spelling() {
        for m in SERVERS_METHODS {
            assert_eq!(GateMethod::from_acp(m), Some(GateMethod::Servers));
        }
        for m in REQUEST_METHODS {
            assert_eq!(GateMethod::from_acp(m), Some(GateMethod::Request));
        }
        assert_eq!(
            GateMethod::from_acp("_acp-lsp/diagnostics"),
            Some(GateMethod::Diagnostics)
        );
        assert_eq!(GateMethod::from_acp("lsp/other"), None);
        assert_eq!(GateMethod::from_acp("session/new"), None);
    }
}
