//! Size and shape limits on what the proxy reads, with named defaults.

/// Largest LSP frame body accepted from a language server.
pub const DEFAULT_MAX_LSP_FRAME: usize = 32 * 1024 * 1024;
/// Most header lines in one LSP frame.
pub const DEFAULT_MAX_HEADER_LINES: usize = 32;
/// Most header bytes in one LSP frame.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 8 * 1024;
/// Chunk size used to drain an oversized LSP body without allocating it.
pub const DRAIN_CHUNK: usize = 64 * 1024;
/// Largest `params` of a request the proxy answers itself.
pub const DEFAULT_MAX_INTERCEPTED_PARAMS: usize = 4 * 1024 * 1024;
/// Deepest JSON nesting accepted in a request the proxy answers itself.
pub const DEFAULT_MAX_DEPTH: usize = 64;
/// Longest ACP line the relay buffers to inspect; longer lines stream through
/// uninspected. Larger than the params limit so that an oversized request of
/// ours is still recognised and refused rather than forwarded.
pub const DEFAULT_MAX_INSPECTED_LINE: usize = 8 * 1024 * 1024;

/// The limits in force, configurable as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest LSP frame body accepted ([`DEFAULT_MAX_LSP_FRAME`]).
    pub max_lsp_frame: usize,
    /// Most header lines in one LSP frame ([`DEFAULT_MAX_HEADER_LINES`]).
    pub max_header_lines: usize,
    /// Most header bytes in one LSP frame ([`DEFAULT_MAX_HEADER_BYTES`]).
    pub max_header_bytes: usize,
    /// Largest params of a gate request ([`DEFAULT_MAX_INTERCEPTED_PARAMS`]).
    pub max_intercepted_params: usize,
    /// Deepest nesting of a gate request's params ([`DEFAULT_MAX_DEPTH`]).
    pub max_depth: usize,
    /// Longest ACP line a relay buffers to inspect ([`DEFAULT_MAX_INSPECTED_LINE`]).
    pub max_inspected_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_lsp_frame: DEFAULT_MAX_LSP_FRAME,
            max_header_lines: DEFAULT_MAX_HEADER_LINES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_intercepted_params: DEFAULT_MAX_INTERCEPTED_PARAMS,
            max_depth: DEFAULT_MAX_DEPTH,
            max_inspected_line: DEFAULT_MAX_INSPECTED_LINE,
        }
    }
}
