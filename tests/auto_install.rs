//! Install on first use (`auto_install = true`), with the real npm registry
//! and a real pyright, on a machine where no Python server is found: a
//! clean prefix (`ACP_LSP_DATA_DIR`) and a `PATH` of only the tools a
//! recipe runs. The session lists pyright `starting` with
//! `_meta["acp-lsp"].status = "installing"` and its progress, then it is
//! `running` and answers a hover. Without `auto_install` the entry is
//! `not_installed` with the install command, and a request's error names
//! it. An untrusted project's own `.acp-lsp.toml` is never read: its pinned
//! version is not what gets installed.
//!
//! One test function: it sets the process's environment first.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use std::path::{Path, PathBuf};

use acp_lsp::lsp::config::Config;
use acp_lsp::session_facade::{FacadeError, SessionFacade};
use acp_lsp_core::gate::{GateError, ServerState, State};
use serde_json::json;

/// A directory of links to the tools the npm recipe runs.
fn tool_path(dir: &Path) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    for tool in ["node", "npm", "sh", "env"] {
        if let Some(target) = acp_lsp::lsp::detect::find_on_path(tool) {
            std::os::unix::fs::symlink(target, dir.join(tool)).expect("link");
        }
    }
    dir.display().to_string()
}

fn python_project(root: &Path) {
    std::fs::create_dir_all(root).expect("mkdir");
    std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n").expect("write");
    std::fs::write(
        root.join("m.py"),
        "def area(width: int, height: int) -> int:\n    return width * height\n\n\nprint(area(2, 3))\n",
    )
    .expect("write");
}

fn auto_install(on: bool) -> Config {
    let mut config = Config::builtin();
    config.auto_install = on;
    config
}

fn hover_params(root: &Path) -> serde_json::Value {
    let uri = url::Url::from_file_path(root.join("m.py")).expect("uri");
    json!({ "textDocument": { "uri": uri.as_str() }, "position": { "line": 4, "character": 7 } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_session_installs_pyright_on_first_use() {
    support::require("npm", "apt-get install -y nodejs npm");
    let dir = tempfile::tempdir().expect("temp dir");
    let data: PathBuf = dir.path().join("data");
    let path = tool_path(&dir.path().join("bin"));
    // Before any thread of this binary reads the environment.
    std::env::set_var("ACP_LSP_DATA_DIR", &data);
    std::env::set_var("PATH", &path);

    // Without auto_install: listed as not installed, with the command.
    let plain = dir.path().join("plain");
    python_project(&plain);
    let tool = SessionFacade::start(&plain, auto_install(false));
    let servers = tool.servers().await.expect("lsp/servers");
    let pyright = servers
        .iter()
        .find(|s| s.name == "pyright")
        .unwrap_or_else(|| panic!("no pyright entry: {servers:?}"));
    assert_eq!(pyright.state, State::NotRunning);
    assert_eq!(pyright.status(), ServerState::NotInstalled);
    assert_eq!(
        pyright.ours().install_command.as_deref(),
        Some("acp-lsp install pyright")
    );
    let entry = tool
        .pick_server(None, Some(&plain.join("m.py")))
        .await
        .expect("pick");
    let error = tool
        .request(&entry.server_id, "textDocument/hover", hover_params(&plain))
        .await
        .expect_err("no answer without pyright");
    assert!(
        matches!(
            &error,
            FacadeError::Gate {
                error: GateError::ServerNotRunning { .. },
                ..
            }
        ) && error.to_string().contains("run `acp-lsp install pyright`"),
        "{error}"
    );
    tool.finish().await;
    assert!(
        !data.join("servers").join("npm-pyright").exists(),
        "installed without auto_install"
    );

    // With it, in an untrusted project whose own file pins another version.
    let project = dir.path().join("project");
    python_project(&project);
    std::fs::write(
        project.join(".acp-lsp.toml"),
        "[install.pyright]\nversion = \"1.1.400\"\n",
    )
    .expect("write the project file");
    let tool = SessionFacade::start(&project, auto_install(true));
    let servers = tool.servers().await.expect("lsp/servers");
    let pyright = servers
        .iter()
        .find(|s| s.name == "pyright")
        .unwrap_or_else(|| panic!("no pyright entry: {servers:?}"))
        .clone();
    assert_eq!(pyright.state, State::Starting, "{pyright:?}");
    assert_eq!(pyright.status(), ServerState::Installing, "{pyright:?}");
    let progress = pyright.ours().progress.clone().expect("install progress");
    assert_eq!(
        progress.title, "installing npm pyright@1.1.414",
        "{progress:?}"
    );
    let wire = serde_json::to_value(&pyright).expect("entry JSON");
    assert_eq!(wire["_meta"]["acp-lsp"]["status"], "installing", "{wire}");

    // Then running, and a hover answers.
    let hover = tool
        .request(
            &pyright.server_id,
            "textDocument/hover",
            hover_params(&project),
        )
        .await
        .expect("hover after the install");
    let hover: serde_json::Value = serde_json::from_str(hover.get()).expect("hover JSON");
    let text = hover["contents"]["value"].as_str().unwrap_or_default();
    assert!(
        text.contains("def area(") && text.contains("width: int"),
        "{hover}"
    );
    let servers = tool.servers().await.expect("lsp/servers");
    let after = servers
        .iter()
        .find(|s| s.name == "pyright")
        .expect("pyright");
    assert_eq!(after.state, State::Running, "{after:?}");
    assert_eq!(after.ours().install_command, None);
    tool.finish().await;
    // The built-in recipe's version, not the untrusted file's.
    let installed: Vec<String> = std::fs::read_dir(data.join("servers").join("npm-pyright"))
        .expect("the install")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(
        installed.len() == 1 && installed[0].starts_with("1.1.414-"),
        "{installed:?}"
    );
}
