use super::*;

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (path, content) in files {
        let p = dir.path().join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("{e}"));
    }
    dir
}

const PKG: &str = "[package]\nname = \"x\"\nversion = \"0.1.0\"\n";

#[test]
fn verbose_lists_every_server_and_root() {
    let dir = tree(&[("Cargo.toml", PKG), ("src/main.rs", ""), ("tools/x.py", "")]);
    let mut cfg = Config::builtin();
    for s in &mut cfg.servers {
        if s.name == "pylsp" {
            s.enabled = false;
        }
    }
    let report = verbose(&survey(dir.path(), &cfg));
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("rust-analyzer"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains(" . "), "{report}");
    assert!(line.contains("marker Cargo.toml"), "{report}");
    assert!(
        line.contains("off (default): build scripts and proc macros disabled"),
        "{report}"
    );
    cfg.trusted_projects = vec![dir.path().to_path_buf()];
    let trusted = verbose(&survey(dir.path(), &cfg));
    assert!(
        trusted
            .lines()
            .any(|l| l.trim_start().starts_with("rust-analyzer")
                && l.contains("run (trusted project)")),
        "{trusted}"
    );
    let py = report
        .lines()
        .find(|l| l.trim_start().starts_with("pyright "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(py.contains("*.py files"), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("Not applicable") && l.contains("gopls")),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("Disabled") && l.contains("pylsp")),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.contains("SERVER") && l.contains("RUNS")),
        "{report}"
    );
}

/// A stand-in program named `name` in `bin` (it only needs to exist and
/// exit 0 for the start check).
fn stub(bin: &Path, name: &str) {
    std::fs::create_dir_all(bin).unwrap_or_else(|e| panic!("{e}"));
    let path = bin.join(name);
    std::fs::write(&path, "#!/bin/sh\necho \"$0 9.8.7\"\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Servers only this test's stand-ins provide: each runs here, whatever is
/// installed on the machine.
fn stand_in_config(bin: &Path) -> Config {
    let text = format!(
        "[servers.alpha]\ncommand = \"{bin}/alpha\"\nlanguage_ids = [\"alpha\"]\nfile_extensions = [\"al\"]\nroot_markers = [\"alpha.toml\"]\n\
         [servers.beta]\ncommand = \"{bin}/beta\"\nlanguage_ids = [\"beta\"]\nfile_extensions = [\"be\"]\nroot_markers = [\"beta.toml\"]\n\
         [servers.gamma]\ncommand = \"{bin}/not-there\"\nlanguage_ids = [\"gamma\"]\nfile_extensions = [\"ga\"]\nroot_markers = [\"gamma.toml\"]\n\
         [install.gamma]\nnpm = \"gamma-ls\"\nversion = \"1.0.0\"\n",
        bin = bin.display()
    );
    let mut config = Config::from_toml_str(&text, Path::new("/cfg/config.toml"), Config::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    // Only the stand-ins: no built-in depends on what this machine has.
    config
        .servers
        .retain(|s| ["alpha", "beta", "gamma"].contains(&s.name.as_str()));
    config
}

#[test]
fn brief_folds_nested_roots_and_lists_the_missing_once() {
    let mut files: Vec<(String, String)> = vec![
        ("alpha.toml".into(), String::new()),
        ("main.al".into(), String::new()),
        ("gamma.toml".into(), String::new()),
    ];
    for i in 0..12 {
        files.push((format!("fixtures/case{i:02}/beta.toml"), String::new()));
        files.push((format!("fixtures/case{i:02}/x.be"), String::new()));
        files.push((format!("fixtures/case{i:02}/y.ga"), String::new()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let dir = tree(&refs);
    let bin = dir.path().join("bin");
    stub(&bin, "alpha");
    stub(&bin, "beta");
    let config = stand_in_config(&bin);
    let text = brief(&survey(dir.path(), &config));
    assert!(
        text.lines().all(|l| l.chars().count() <= BRIEF_WIDTH),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{text}"))
            .to_string()
    };
    assert!(row("alpha").contains(". at session start"), "{text}");
    assert!(row("alpha").contains("9.8.7"), "{text}");
    assert!(
        row("beta").contains("12 nested roots, first on use"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.split_whitespace().next() == Some("beta"))
            .count(),
        1,
        "one line for beta's 12 roots:\n{text}"
    );
    // gamma is not installed: once, at the end, with its command.
    let missing: Vec<&str> = text.lines().filter(|l| l.contains("gamma")).collect();
    assert_eq!(missing.len(), 1, "{text}");
    assert!(
        missing[0].starts_with("Not installed: gamma")
            && missing[0].contains("acp-lsp install gamma"),
        "{text}"
    );
    // The project-code policy once for the whole folder.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("Project code"))
            .count(),
        1,
        "{text}"
    );
    assert!(text.lines().count() <= 8, "{text}");
}

#[test]
fn json_says_where_each_binary_comes_from() {
    let dir = tree(&[
        ("alpha.toml", ""),
        ("main.al", ""),
        ("y.ga", ""),
        ("gamma.toml", ""),
    ]);
    let bin = dir.path().join("bin");
    stub(&bin, "alpha");
    let config = stand_in_config(&bin);
    let value = json(&survey(dir.path(), &config));
    let servers = value["servers"].as_array().cloned().unwrap_or_default();
    let alpha = servers
        .iter()
        .find(|s| s["name"] == "alpha")
        .unwrap_or_else(|| panic!("{value}"));
    assert_eq!(alpha["role"], "primary", "{value}");
    assert_eq!(alpha["program"]["origin"], "path", "{value}");
    assert_eq!(alpha["check"]["starts"], true, "{value}");
    assert_eq!(alpha["roots"][0]["starts"], "session_start", "{value}");
    assert_eq!(
        value["notInstalled"],
        serde_json::json!([{"name": "gamma", "install": "acp-lsp install gamma", "needed": true}]),
        "{value}"
    );
}
