//! `acp-lsp index`.
