//! `project_code`: whether language servers may run code the project brings,
//! where the effective value came from, and what `off` does per server.

/// Whether language servers may run code the project brings (rust-analyzer's
/// build scripts and proc macros, a workspace's own TypeScript, a go.mod's
/// toolchain). The effective value for a server at a root is, first found:
/// the server's `project_code`, the global `project_code`, else `run` when the
/// root lies under `trusted_projects` and `off` otherwise. Off by default
/// because the agent, not a person, decides what a session opens and writes:
/// a `build.rs` it writes (or a checkout it is pointed at) would otherwise run
/// on the next `session/new` with no one asking. See ARCHITECTURE.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectCode {
    Run,
    Off,
}

impl ProjectCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectCode::Run => "run",
            ProjectCode::Off => "off",
        }
    }
}

/// Where an effective [`ProjectCode`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectCodeSource {
    Server,
    Global,
    TrustedProject,
    Default,
}

impl ProjectCodeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectCodeSource::Server => "server setting",
            ProjectCodeSource::Global => "global setting",
            ProjectCodeSource::TrustedProject => "trusted project",
            ProjectCodeSource::Default => "default",
        }
    }
}

/// What `project_code = "off"` changes for a server: how, or why it cannot.
pub fn project_code_switch(server: &str) -> &'static str {
    match server {
        "rust-analyzer" => "build scripts and proc macros disabled",
        "typescript-language-server" => {
            "no global plugins; tsserver pinned to the TypeScript installed beside the server"
        }
        "gopls" => "GOTOOLCHAIN=local (a go.mod cannot pick a toolchain to run)",
        "clangd" => "runs no project code (no --query-driver)",
        "ruff" => "runs no project code",
        "pyright" | "basedpyright" | "pylsp" => {
            "cannot be turned off: it may run the project's configured Python interpreter"
        }
        "eslint" => "cannot be turned off: it loads the project's ESLint, config and plugins",
        "zls" => "cannot be turned off: it runs the project's build.zig",
        _ => "no switch known",
    }
}

/// [`project_code_switch`] in a few words, for `acp-lsp servers`' one line
/// per policy; `None` for a server that runs no project code anyway.
pub fn project_code_brief(server: &str) -> Option<&'static str> {
    Some(match server {
        "rust-analyzer" => "no build scripts or proc macros",
        "typescript-language-server" => "no plugins, its own tsserver",
        "gopls" => "GOTOOLCHAIN=local",
        "clangd" | "ruff" => return None,
        "pyright" | "basedpyright" | "pylsp" => "may still run the project's Python",
        "eslint" => "still loads the project's ESLint",
        "zls" => "still runs build.zig",
        _ => "no switch known",
    })
}
