//! Which LSP methods the gate forwards and which it refuses, by category.
//!
//! The lists are the normative ones of `rfd/lsp-over-acp.md`; keep them in step.

/// The spellings under which the gate's two ACP methods are accepted.
pub(crate) const SERVERS_METHODS: &[&str] =
    &["lsp/servers", "_lsp/servers", "_zed.dev/lsp/servers"];
/// See [`SERVERS_METHODS`].
pub(crate) const REQUEST_METHODS: &[&str] =
    &["lsp/request", "_lsp/request", "_zed.dev/lsp/request"];

/// acp-lsp's extension: the latest diagnostics (rfd section 12).
pub(crate) const DIAGNOSTICS_METHODS: &[&str] = &["_acp-lsp/diagnostics"];

/// One of the gate's own ACP methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMethod {
    /// `lsp/servers`: the session's servers and `availableMethods`.
    Servers,
    /// `lsp/request`: one LSP request to one server.
    Request,
    /// **[acp-lsp]** `_acp-lsp/diagnostics`: published diagnostics.
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

    /// The method's canonical ACP name (for logs and error messages).
    pub fn as_acp(self) -> &'static str {
        match self {
            GateMethod::Servers => SERVERS_METHODS[0],
            GateMethod::Request => REQUEST_METHODS[0],
            GateMethod::Diagnostics => DIAGNOSTICS_METHODS[0],
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
    /// `workspace/will{Create,Rename,Delete}Files`: the client applies file
    /// operations, so it alone asks the server about them (the RFD's MUST).
    FileLifecycle,
    /// Requests that only make sense while a person types in an editor
    /// (the RFD's MUST).
    EditorInteraction,
    /// Any other method not in `availableMethods` (e.g. a server extension
    /// no server configuration names).
    NotListed,
}

impl Refusal {
    /// `data.category` of the `method_not_forwarded` error: why the method
    /// is not in `availableMethods`.
    pub fn category(self) -> &'static str {
        match self {
            Refusal::Lifecycle => "lifecycle",
            Refusal::DocumentSync => "document_sync",
            Refusal::Notification => "notification",
            Refusal::ServerToClient => "server_to_client",
            Refusal::FileLifecycle => "file_lifecycle",
            Refusal::EditorInteraction => "editor_interaction",
            Refusal::NotListed => "not_listed",
        }
    }
}

/// Lifecycle methods.
pub(crate) const LIFECYCLE: &[&str] = &["initialize", "initialized", "shutdown", "exit"];

/// Document synchronisation, requests and notifications alike.
pub(crate) const DOCUMENT_SYNC: &[&str] = &[
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
pub(crate) const NOTIFICATIONS: &[&str] = &[
    "$/cancelRequest",
    "$/setTrace",
    "$/progress",
    "window/workDoneProgress/cancel",
];

/// File lifecycle requests: refused for agents (RFD), sent only by acp-lsp's
/// own rename (an [`LspRequest`](crate::gate::LspRequest) whose caller is
/// [`Caller::FileLifecycle`](crate::gate::Caller::FileLifecycle)).
pub(crate) const FILE_LIFECYCLE: &[&str] = &[
    "workspace/willCreateFiles",
    "workspace/willRenameFiles",
    "workspace/willDeleteFiles",
];

/// Editor-interaction requests, refused (RFD).
pub(crate) const EDITOR_INTERACTION: &[&str] = &[
    "textDocument/foldingRange",
    "textDocument/selectionRange",
    "textDocument/linkedEditingRange",
    "textDocument/onTypeFormatting",
];

/// Server→client methods (requests and notifications).
pub(crate) const SERVER_TO_CLIENT: &[&str] = &[
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

/// The LSP 3.17 client→server requests the gate forwards to every server,
/// the base of `availableMethods`. `workspace/executeCommand` is listed only
/// for sessions where some server allows a command, and a server extension
/// (`rust-analyzer/expandMacro`) only where a server's configuration names it
/// (`extension_methods`); everything else is `method_not_forwarded`.
pub(crate) const FORWARDED: &[&str] = &[
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
    "textDocument/formatting",
    "textDocument/hover",
    "textDocument/implementation",
    "textDocument/inlayHint",
    "textDocument/inlineValue",
    "textDocument/moniker",
    "textDocument/prepareCallHierarchy",
    "textDocument/prepareRename",
    "textDocument/prepareTypeHierarchy",
    "textDocument/rangeFormatting",
    "textDocument/references",
    "textDocument/rename",
    "textDocument/semanticTokens/full",
    "textDocument/semanticTokens/full/delta",
    "textDocument/semanticTokens/range",
    "textDocument/signatureHelp",
    "textDocument/typeDefinition",
    "typeHierarchy/subtypes",
    "typeHierarchy/supertypes",
    "workspace/diagnostic",
    "workspace/symbol",
    "workspaceSymbol/resolve",
];

/// Read-only queries that acp-lsp asks again, within the request deadline,
/// when the server cancels them with ContentModified (-32801) or the text
/// they name changes in flight (rfd/lsp-over-acp.md, "ContentModified"):
/// their answer depends only on the workspace as it is, and asking twice
/// changes nothing. Never edits, commands, formatting, code actions, or
/// resolves and deltas of an earlier answer (whose data the change made stale).
pub const RETRIED_ON_CONTENT_MODIFIED: &[&str] = &[
    "callHierarchy/incomingCalls",
    "callHierarchy/outgoingCalls",
    "textDocument/completion",
    "textDocument/declaration",
    "textDocument/definition",
    "textDocument/diagnostic",
    "textDocument/documentHighlight",
    "textDocument/documentLink",
    "textDocument/documentSymbol",
    "textDocument/hover",
    "textDocument/implementation",
    "textDocument/inlayHint",
    "textDocument/moniker",
    "textDocument/prepareCallHierarchy",
    "textDocument/prepareRename",
    "textDocument/prepareTypeHierarchy",
    "textDocument/references",
    "textDocument/semanticTokens/full",
    "textDocument/semanticTokens/range",
    "textDocument/signatureHelp",
    "textDocument/typeDefinition",
    "typeHierarchy/subtypes",
    "typeHierarchy/supertypes",
    "workspace/diagnostic",
    "workspace/symbol",
];

/// Whether `method` is asked again on ContentModified ([`RETRIED_ON_CONTENT_MODIFIED`]).
pub fn retried_on_content_modified(method: &str) -> bool {
    RETRIED_ON_CONTENT_MODIFIED.contains(&method)
}

/// The command-running request, forwarded only with an allowlisted command.
pub(crate) const EXECUTE_COMMAND: &str = "workspace/executeCommand";

/// Whether `method` is one of the RFD's forwarded requests ([`FORWARDED`],
/// sorted: a binary search).
pub(crate) fn is_forwarded(method: &str) -> bool {
    FORWARDED.binary_search(&method).is_ok()
}

/// Whether `method` is a file lifecycle request ([`FILE_LIFECYCLE`]).
pub(crate) fn is_file_lifecycle(method: &str) -> bool {
    FILE_LIFECYCLE.contains(&method)
}

/// Why `method` belongs to a category the RFD refuses, or `None` when it is
/// in none (it is then forwarded if it is in `availableMethods`).
pub fn refusal(method: &str) -> Option<Refusal> {
    // The common case first: a forwarded method is in no refused category.
    if is_forwarded(method) {
        None
    } else if FILE_LIFECYCLE.contains(&method) {
        Some(Refusal::FileLifecycle)
    } else if EDITOR_INTERACTION.contains(&method) {
        Some(Refusal::EditorInteraction)
    } else if LIFECYCLE.contains(&method) {
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
        assert_eq!(
            refusal("workspace/willRenameFiles"),
            Some(Refusal::FileLifecycle)
        );
        assert_eq!(
            refusal("textDocument/foldingRange"),
            Some(Refusal::EditorInteraction)
        );
        assert_eq!(refusal("textDocument/rename"), None);
        assert_eq!(refusal("rust-analyzer/expandMacro"), None);
    }

    #[test]
    fn the_forwarded_list_is_sorted_for_its_binary_search() {
        assert!(FORWARDED.windows(2).all(|w| w[0] < w[1]), "{FORWARDED:?}");
        for method in FORWARDED {
            assert!(is_forwarded(method), "{method}");
        }
        assert!(!is_forwarded("textDocument/didOpen"));
    }

    #[test]
    fn forwarded_and_refused_lists_are_disjoint() {
        // Against the lists themselves: `refusal` answers a forwarded method
        // without looking at them.
        let refused = [
            FILE_LIFECYCLE,
            EDITOR_INTERACTION,
            LIFECYCLE,
            DOCUMENT_SYNC,
            SERVER_TO_CLIENT,
            NOTIFICATIONS,
        ];
        for method in FORWARDED.iter().chain([&EXECUTE_COMMAND]) {
            assert!(!method.starts_with("$/"), "{method}");
            for list in refused {
                assert!(!list.contains(method), "{method}");
            }
            assert_eq!(refusal(method), None, "{method}");
        }
        for method in FILE_LIFECYCLE.iter().chain(EDITOR_INTERACTION) {
            assert!(!FORWARDED.contains(method), "{method}");
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
