//! Session roots as the agent spelled them (issue 27, 3): with a symlinked
//! cwd, `workspacePath` is under the cwd the agent sent, so the RFD's FAQ
//! rule (the running server whose `workspacePath` contains the file) finds
//! the server, while confinement still checks where files really are.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp_core::gate::GateMethod;
use serde_json::{json, Value};
use support::fake::{uri_of, FakeServer};

const LINKED: &str = "linked";

async fn servers(fake: &FakeServer, session: &str) -> Vec<Value> {
    let answer = fake
        .call(GateMethod::Servers, json!({ "sessionId": session }))
        .await;
    answer["result"]["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("lsp/servers failed: {answer}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_path_is_spelled_as_the_agents_cwd_and_confinement_stays_real() {
    // Cargo.toml is the one marker that does not claim its subtree (a
    // package, not a workspace): the nested project gets a server of its own.
    let (fake, direct) = FakeServer::start(
        "",
        RegistryOptions::default(),
        |_| {},
        |server, _| server.root_markers = vec!["Cargo.toml".into()],
    )
    .await;
    // The same workspace through a symlink, as a second session's cwd, and a
    // nested project below it.
    let link = fake.outside.join("link-to-ws");
    std::os::unix::fs::symlink(&fake.root, &link).expect("symlink");
    let package = |name: &str| format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n");
    std::fs::write(fake.root.join("Cargo.toml"), package("top")).expect("marker");
    std::fs::create_dir(fake.root.join("sub")).expect("mkdir");
    std::fs::write(fake.root.join("sub/Cargo.toml"), package("sub")).expect("marker");
    std::fs::write(fake.root.join("sub/b.fake"), "b\n").expect("file");
    fake.gate.open_session(LINKED, vec![link.clone()]);

    let listed = servers(&fake, LINKED).await;
    let paths: Vec<&str> = listed
        .iter()
        .filter_map(|e| e["workspacePath"].as_str())
        .collect();
    let top = link.display().to_string();
    let nested = link.join("sub").display().to_string();
    assert!(paths.contains(&top.as_str()), "{listed:#?}");
    assert!(paths.contains(&nested.as_str()), "{listed:#?}");
    // One server for both spellings: the id is the resolved root's.
    let top_entry = listed
        .iter()
        .find(|e| e["workspacePath"] == json!(top))
        .expect("top entry");
    assert_eq!(top_entry["serverId"], direct["serverId"]);
    // The session that spelled the real path still sees the real path.
    let real = servers(&fake, support::fake::SESSION).await;
    assert!(
        real.iter()
            .any(|e| e["workspacePath"] == json!(fake.root.display().to_string())),
        "{real:#?}"
    );

    // The FAQ rule, on the agent's own path of a file: the deepest running
    // server whose workspacePath contains it.
    let file = link.join("sub/b.fake");
    let deepest = listed
        .iter()
        .filter(|e| file.starts_with(e["workspacePath"].as_str().unwrap_or("/nowhere")))
        .max_by_key(|e| e["workspacePath"].as_str().map_or(0, str::len))
        .expect("a server contains the file");
    assert_eq!(deepest["workspacePath"], json!(nested), "{deepest}");

    // Confinement resolves the link: the file is inside; the real target of
    // a link that leaves the roots is not.
    let hover = |uri: String, server: Value| {
        fake.call(
            GateMethod::Request,
            json!({
                "sessionId": LINKED, "serverId": server, "method": "textDocument/hover",
                "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
                "_meta": {"waitUntilReady": 30_000},
            }),
        )
    };
    let inside = hover(uri_of(&link.join("a.fake")), top_entry["serverId"].clone()).await;
    assert!(inside["result"].is_object(), "{inside}");
    std::fs::write(fake.outside.join("secret.fake"), "s\n").expect("outside file");
    std::os::unix::fs::symlink(
        fake.outside.join("secret.fake"),
        fake.root.join("escape.fake"),
    )
    .expect("symlink");
    let escaped = hover(
        uri_of(&link.join("escape.fake")),
        top_entry["serverId"].clone(),
    )
    .await;
    assert_eq!(
        escaped["error"]["data"]["reason"],
        json!("uri_outside_roots"),
        "{escaped}"
    );
    fake.registry.shutdown().await;
}
