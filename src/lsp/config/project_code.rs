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
        "pyright" | "basedpyright" | "pylsp" => {
            "no switch: it may run the project's configured Python interpreter"
        }
        "zls" => "no switch: it runs the project's build.zig",
        _ => "no switch known",
    }
}
