//! The configuration's tests: files, errors, the built-in table, project code.

use super::*;
use serde_json::Value;

/// What `acp-lsp servers --print-builtins` prints, read as a user file
/// over the built-ins or over nothing, is the built-in table.
#[test]
fn builtin_toml_parses_back_to_the_same_config() {
    let builtin = Config::builtin();
    let over_builtins = parse(BUILTIN_TOML).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(over_builtins.servers, builtin.servers);
    let over_nothing = Config::from_toml_str(BUILTIN_TOML, &origin(), Config::without_servers())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(over_nothing.servers, builtin.servers);
    // The table holds what the code relies on.
    let rust = builtin.server("rust-analyzer").expect("rust-analyzer");
    assert!(rust.ready_when_quiescent);
    assert_eq!(
        rust.settings_section(Some("rust-analyzer.checkOnSave")),
        json!(false)
    );
    let pyright = builtin.server("pyright").expect("pyright");
    assert_eq!(pyright.probe_args, vec!["--stdio"]);
    let names: Vec<&str> = builtin.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        &names[..5],
        [
            "rust-analyzer",
            "clangd",
            "pyright",
            "basedpyright",
            "pylsp"
        ],
        "preference order"
    );
}

fn origin() -> PathBuf {
    PathBuf::from("/etc/acp-lsp/config.toml")
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, &origin(), Config::builtin())
}

#[test]
fn builtins_are_well_formed() {
    let c = Config::builtin();
    let mut names: Vec<&str> = c.servers.iter().map(|s| s.name.as_str()).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "duplicate built-in names");
    for s in &c.servers {
        assert!(!s.command.is_empty(), "{}", s.name);
        assert!(!s.language_ids.is_empty(), "{}", s.name);
        assert!(!s.file_extensions.is_empty(), "{}", s.name);
        assert_eq!(s.position_encodings, vec!["utf-16".to_string()]);
    }
    let py = c
        .server("pyright")
        .map(|s| (s.command.as_str(), s.args.clone()));
    assert_eq!(
        py,
        Some(("pyright-langserver", vec!["--stdio".to_string()]))
    );
    assert!(c.server("pylsp").is_some());
    assert!(c.skip_dirs.iter().any(|d| d == "node_modules"));
    assert_eq!(c.idle_grace_ms, 30_000);
}

#[test]
fn quiescence_readiness_is_on_for_rust_analyzer_and_configurable() {
    let builtin = Config::builtin();
    assert!(builtin
        .server("rust-analyzer")
        .is_some_and(|s| s.ready_when_quiescent));
    assert!(builtin
        .server("clangd")
        .is_some_and(|s| !s.ready_when_quiescent));
    let c = match parse("[servers.rust-analyzer]\nready_when_quiescent = false\n") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert!(c
        .server("rust-analyzer")
        .is_some_and(|s| !s.ready_when_quiescent));
}

#[test]
fn pyrights_wait_for_their_source_files_and_a_bad_log_pattern_is_an_error() {
    let builtin = Config::builtin();
    for name in ["pyright", "basedpyright"] {
        let server = builtin.server(name).expect("a built-in python server");
        let matcher = server
            .ready_log_matcher()
            .expect("a ready_after_log matcher");
        // pyright 1.1.414's words, whatever the count.
        for said in [
            "Found 3 source files",
            "Found 1 source file",
            "No source files found.",
        ] {
            assert!(matcher.is_match(said), "{name}: {said}");
        }
        for said in [
            "Searching for source files",
            "Loading pyproject.toml file at /p/pyproject.toml",
        ] {
            assert!(!matcher.is_match(said), "{name}: {said}");
        }
    }
    assert!(builtin
        .server("rust-analyzer")
        .is_some_and(|s| s.ready_log_matcher().is_none()));
    let error = match parse("[servers.pyright]\nready_after_log = [\"Found [ source\"]\n") {
        Ok(_) => panic!("an unclosed class was taken"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("ready_after_log"), "{error}");
}

#[test]
fn override_field_of_builtin() {
    let c = match parse(
        "[servers.rust-analyzer]\nargs = [\"--verbose\"]\nrequest_timeout_ms = 5000\n\
         settings = { \"rust-analyzer\" = { cargo = { features = \"all\" } } }\n",
    ) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let ra = c
        .server("rust-analyzer")
        .cloned()
        .unwrap_or_else(|| panic!());
    assert_eq!(ra.args, vec!["--verbose".to_string()]);
    assert_eq!(ra.request_timeout(), Duration::from_millis(5000));
    // Untouched keys keep their built-in values; settings merge deeply.
    assert_eq!(ra.command, "rust-analyzer");
    assert_eq!(ra.root_markers[0], "Cargo.toml");
    assert_eq!(
        ra.settings,
        json!({"rust-analyzer": {"checkOnSave": false, "cargo": {"features": "all"}}})
    );
    assert_eq!(c.sources, vec![origin()]);
    assert_eq!(c.servers.len(), Config::builtin().servers.len());
}

#[test]
fn disable_builtin() {
    let c = parse("[servers.pyright]\nenabled = false\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(c.server("pyright").is_some_and(|s| !s.enabled));
    assert!(c.enabled_servers().all(|s| s.name != "pyright"));
    assert!(c.enabled_servers().any(|s| s.name == "pylsp"));
}

#[test]
fn add_server_and_top_level_keys() {
    let text = r#"# acp-lsp config
read_only_roots = ["~/.rustup/toolchains", "vendor"]
allowed_uri_schemes = ["jdt"]
skip_dirs = ["target", "node_modules"]
idle_grace_ms = 1000
trusted_projects = ["/src/work"]
[servers.mylint]
command = "mylint"
args = ["server"]
language_ids = ["python"]
file_extensions = ["py"]
root_markers = ["pyproject.toml", "mylint.toml"]
[servers.aaa]
command = "aaa-ls"
language_ids = ["aaa"]
file_extensions = [".aaa"]
"#;
    let c = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mylint = c
        .server("mylint")
        .cloned()
        .unwrap_or_else(|| panic!("no mylint"));
    assert_eq!(mylint.args, vec!["server".to_string()]);
    assert_eq!(mylint.root_markers.len(), 2);
    assert!(mylint.enabled);
    assert_eq!(mylint.settings, json!({}));
    assert_eq!(mylint.request_timeout_ms, 30_000);
    // New servers come after built-ins, in file order.
    let n = c.servers.len();
    assert_eq!(c.servers[n - 2].name, "mylint");
    assert_eq!(c.servers[n - 1].name, "aaa");
    assert_eq!(c.servers[n - 1].file_extensions, vec!["aaa".to_string()]);
    assert_eq!(
        c.skip_dirs,
        vec!["target".to_string(), "node_modules".to_string()]
    );
    assert_eq!(c.idle_grace_ms, 1000);
    assert_eq!(c.allowed_uri_schemes, vec!["jdt".to_string()]);
    assert_eq!(c.trusted_projects, vec![PathBuf::from("/src/work")]);
    assert_eq!(c.read_only_roots[1], PathBuf::from("/etc/acp-lsp/vendor"));
    if let Some(home) = super::paths::home_dir() {
        assert_eq!(c.read_only_roots[0], home.join(".rustup/toolchains"));
    }
}

#[test]
fn unknown_key_reports_line_column_and_key() {
    let text = "idle_grace_ms = 5\n\n[servers.mylint]\ncommand = \"mylint\"\nlanguage_ids = [\"python\"]\nfile_extensions = [\"py\"]\nargz = [\"server\"]\n";
    let err = parse(text).err().unwrap_or_else(|| panic!("accepted"));
    match &err {
        ConfigError::Parse {
            line, column, key, ..
        } => {
            assert_eq!(*line, 7);
            assert_eq!(*column, 1);
            assert_eq!(key.as_deref(), Some("servers.mylint.argz"));
        }
        other => panic!("wrong error {other:?}"),
    }
    let shown = err.to_string();
    assert!(
        shown
            .starts_with("/etc/acp-lsp/config.toml:7:1: servers.mylint.argz: unknown field `argz`"),
        "{shown}"
    );
}

#[test]
fn unknown_top_level_key_and_wrong_type() {
    let err = parse("idle_grace_ms = 5\nbogus = 1\n").err();
    assert!(
        matches!(&err, Some(ConfigError::Parse { line: 2, key: Some(k), .. }) if k == "bogus"),
        "{err:?}"
    );
    let err = parse("[servers.mylint]\ncommand = \"mylint\"\nargs = \"server\"\n").err();
    match &err {
        Some(ConfigError::Parse {
            line, column, key, ..
        }) => {
            assert_eq!((*line, *column), (3, 8));
            assert_eq!(key.as_deref(), Some("servers.mylint.args"));
        }
        other => panic!("{other:?}"),
    }
    let err =
        parse("[servers.rust-analyzer]\nsettings = { \"rust-analyzer\" = { x = 1, y = [1, 2 }\n")
            .err();
    assert!(
        matches!(err, Some(ConfigError::Parse { line: 2, .. })),
        "{err:?}"
    );
}

#[test]
fn missing_command_is_invalid_and_names_key() {
    let text = "skip_dirs = []\n\n[servers.mylint]\nargs = [\"server\"]\nlanguage_ids = [\"python\"]\nfile_extensions = [\"py\"]\n";
    let err = parse(text).err().unwrap_or_else(|| panic!("accepted"));
    match &err {
        ConfigError::Invalid {
            key,
            message,
            location,
            ..
        } => {
            assert_eq!(key, "servers.mylint");
            assert_eq!(message, "missing field `command`");
            assert_eq!(*location, Some((3, 1)));
        }
        other => panic!("wrong error {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "/etc/acp-lsp/config.toml:3:1: servers.mylint: missing field `command`"
    );
    // An override of a built-in needs no command.
    assert!(parse("[servers.clangd]\nargs = [\"--log=error\"]\n").is_ok());
    // Invalid values name the field.
    let err = parse("[servers.clangd]\nrequest_timeout_ms = 0\n").err();
    assert_eq!(
        err.as_ref().and_then(|e| e.key()),
        Some("servers.clangd.request_timeout_ms")
    );
    let err = parse("[servers.clangd]\nposition_encodings = [\"utf-7\"]\n").err();
    assert!(matches!(err, Some(ConfigError::Invalid { .. })), "{err:?}");
}

#[test]
fn error_display_uses_tilde() {
    let Some(home) = super::paths::home_dir() else {
        return;
    };
    if home == Path::new("/") {
        return;
    }
    let path = home.join(".config/acp-lsp/config.toml");
    let err = Config::from_toml_str("[servers.x]\nargs = []\n", &path, Config::builtin())
        .err()
        .unwrap_or_else(|| panic!("accepted"));
    assert_eq!(
        err.to_string(),
        "~/.config/acp-lsp/config.toml:1:1: servers.x: missing field `command`"
    );
}

#[test]
fn settings_section_paths() {
    let mut s = ServerConfig::new("x", "x", &[], &["x"], &["x"], &[]);
    s.settings = json!({
        "rust-analyzer": {"cargo": {"features": "all"}, "checkOnSave": false},
        "python.analysis": {"typeCheckingMode": "basic"},
    });
    assert_eq!(
        s.settings_section(Some("rust-analyzer.cargo")),
        json!({"features": "all"})
    );
    assert_eq!(
        s.settings_section(Some("rust-analyzer.checkOnSave")),
        json!(false)
    );
    assert_eq!(s.settings_section(Some("rust-analyzer.nope")), Value::Null);
    assert_eq!(s.settings_section(Some("nope")), Value::Null);
    assert_eq!(
        s.settings_section(Some("rust-analyzer.checkOnSave.deeper")),
        Value::Null
    );
    assert_eq!(
        s.settings_section(Some("python")),
        json!({"analysis": {"typeCheckingMode": "basic"}})
    );
    assert_eq!(
        s.settings_section(Some("python.analysis.typeCheckingMode")),
        json!("basic")
    );
    let whole = s.settings_section(None);
    assert_eq!(whole, s.settings_section(Some("")));
    assert_eq!(whole["rust-analyzer"]["checkOnSave"], json!(false));
    assert_eq!(
        whole["python"]["analysis"]["typeCheckingMode"],
        json!("basic")
    );
}

#[test]
fn language_id_by_extension() {
    let c = Config::builtin();
    let ts = c
        .server("typescript-language-server")
        .unwrap_or_else(|| panic!());
    assert_eq!(ts.language_id_for(Path::new("a/b.tsx")), "typescriptreact");
    assert_eq!(ts.language_id_for(Path::new("b.js")), "javascript");
    assert_eq!(ts.language_id_for(Path::new("b.jsx")), "javascriptreact");
    assert_eq!(ts.language_id_for(Path::new("b.ts")), "typescript");
    assert_eq!(ts.language_id_for(Path::new("Makefile")), "typescript");
    let clangd = c.server("clangd").unwrap_or_else(|| panic!());
    assert_eq!(clangd.language_id_for(Path::new("x.c")), "c");
    assert_eq!(clangd.language_id_for(Path::new("x.cpp")), "cpp");
    let ra = c.server("rust-analyzer").unwrap_or_else(|| panic!());
    assert_eq!(ra.language_id_for(Path::new("src/lib.rs")), "rust");
}

#[test]
fn project_config_only_when_trusted() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trusted = home.path().join("work");
    let proj = trusted.join("proj");
    let other = home.path().join("other");
    for d in [&proj, &other] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join(PROJECT_FILE), "[servers.gopls]\nenabled = false\n")
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let user = home.path().join("config.toml");
    std::fs::write(
        &user,
        format!("trusted_projects = [{:?}]\n", trusted.display().to_string()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = Config::load(Some(&user)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.sources, vec![user.clone()]);

    assert!(!c.load_project(&other).unwrap_or_else(|e| panic!("{e}")));
    assert!(c.server("gopls").is_some_and(|s| s.enabled));
    assert_eq!(c.sources.len(), 1);

    assert!(c.load_project(&proj).unwrap_or_else(|e| panic!("{e}")));
    assert!(c.server("gopls").is_some_and(|s| !s.enabled));
    assert_eq!(c.sources, vec![user, proj.join(PROJECT_FILE)]);

    // A project file may not widen trust; the error leaves the config unchanged.
    std::fs::write(proj.join(PROJECT_FILE), "trusted_projects = [\"/\"]\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let before = c.clone();
    let err = c.load_project(&proj).err();
    assert_eq!(err.as_ref().and_then(|e| e.key()), Some("trusted_projects"));
    assert_eq!(c, before);
}

#[test]
fn explicit_file_must_exist() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let missing = dir.path().join("nope.toml");
    let err = Config::load(Some(&missing)).err();
    assert!(matches!(err, Some(ConfigError::Io { .. })), "{err:?}");
}

#[test]
fn syntax_error_message_is_one_line() {
    let err = parse("a = 1\n[servers.ruff\n").err();
    let shown = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        shown.starts_with("/etc/acp-lsp/config.toml:2:14: "),
        "{shown}"
    );
    assert!(!shown.contains('\n'), "{shown}");
}

#[test]
fn line_col_counts_characters() {
    let text = "a\nbé = 1\n";
    assert_eq!(line_col(text, 0), (1, 1));
    assert_eq!(line_col(text, 2), (2, 1));
    assert_eq!(line_col(text, 6), (2, 4));
}

#[test]
fn project_code_is_off_by_default_run_when_trusted_and_settings_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let mut config = Config::builtin();
    let rust = config.server("rust-analyzer").cloned().expect("built-in");
    assert_eq!(
        config.project_code_for(&rust, root),
        (ProjectCode::Off, ProjectCodeSource::Default)
    );
    let off = config.effective_server(&rust, root, Path::new("rust-analyzer"));
    assert_eq!(
        off.settings_section(Some("rust-analyzer.cargo.buildScripts.enable")),
        json!(false)
    );
    assert_eq!(
        off.settings_section(Some("rust-analyzer.procMacro.enable")),
        json!(false)
    );
    let options = off.initialization_options.clone().unwrap_or_default();
    assert_eq!(options["cargo"]["buildScripts"]["enable"], json!(false));
    assert_eq!(options["procMacro"]["enable"], json!(false));
    // The rest of the built-in's settings stay.
    assert_eq!(
        off.settings_section(Some("rust-analyzer.checkOnSave")),
        json!(false)
    );

    config.trusted_projects = vec![root.to_path_buf()];
    assert_eq!(
        config.project_code_for(&rust, root),
        (ProjectCode::Run, ProjectCodeSource::TrustedProject)
    );
    assert_eq!(
        config.effective_server(&rust, root, Path::new("rust-analyzer")),
        rust
    );

    let parsed = Config::from_toml_str(
        "project_code = \"off\"\n[servers.gopls]\nproject_code = \"run\"\n",
        Path::new("/x/config.toml"),
        config,
    )
    .expect("valid");
    assert_eq!(
        parsed.project_code_for(&rust, root),
        (ProjectCode::Off, ProjectCodeSource::Global)
    );
    let gopls = parsed.server("gopls").cloned().expect("built-in");
    assert_eq!(
        parsed.project_code_for(&gopls, root),
        (ProjectCode::Run, ProjectCodeSource::Server)
    );
    let mut gopls_off = gopls.clone();
    gopls_off.project_code = None;
    let effective = parsed.effective_server(&gopls_off, root, Path::new("gopls"));
    assert_eq!(
        effective.env.get("GOTOOLCHAIN").map(String::as_str),
        Some("local")
    );
}

#[test]
fn quotas_and_http_limits_are_read_and_checked() {
    let parsed = Config::from_toml_str(
        "max_requests_per_session = 3\nmax_requests_total = 7\n[mcp_http]\nmax_body_bytes = 1000\nmax_concurrent = 2\nread_timeout_ms = 500\n",
        Path::new("/x/config.toml"),
        Config::builtin(),
    )
    .expect("valid");
    let gate = parsed.gate_config();
    assert_eq!(
        (gate.max_requests_per_session, gate.max_requests_total),
        (3, 7)
    );
    assert_eq!(
        parsed.mcp_http,
        McpHttpLimits {
            max_body_bytes: 1000,
            max_concurrent: 2,
            read_timeout: Duration::from_millis(500)
        }
    );
    let zero = Config::from_toml_str(
        "max_requests_total = 0\n",
        Path::new("/x/config.toml"),
        Config::builtin(),
    );
    assert!(zero.is_err());
}

#[cfg(unix)]
#[test]
fn project_code_off_pins_typescript_beside_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let modules = dir.path().join("lib/node_modules");
    let cli = modules.join("typescript-language-server/lib/cli.mjs");
    let tsserver = modules.join("typescript/lib/tsserver.js");
    for file in [&cli, &tsserver] {
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, "").expect("write");
    }
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let program = bin.join("typescript-language-server");
    std::os::unix::fs::symlink(&cli, &program).expect("link");
    let config = Config::builtin();
    let ts = config
        .server("typescript-language-server")
        .cloned()
        .expect("built-in");
    let off = config.effective_server(&ts, dir.path(), &program);
    let options = off.initialization_options.expect("options");
    assert_eq!(options["plugins"], json!([]));
    let pinned = tsserver.canonicalize().expect("canonical");
    assert_eq!(
        options["tsserver"]["path"],
        json!(pinned.display().to_string())
    );
    // The built-in's own option stays.
    assert_eq!(options["tsserver"]["useSyntaxServer"], json!("never"));
}

#[test]
fn lazy_roots_keys_are_read_and_checked() {
    let defaults = Config::builtin();
    assert!(!defaults.lazy);
    assert_eq!(defaults.max_running_servers, DEFAULT_MAX_RUNNING_SERVERS);
    assert_eq!(defaults.nested_idle_stop_ms, DEFAULT_NESTED_IDLE_STOP_MS);
    let config = parse(
        "lazy = true\nmax_running_servers = 3\nnested_idle_stop_ms = 0\n\
         [servers.pylsp]\nsecondary = true\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(config.lazy);
    assert_eq!(config.max_running_servers, 3);
    assert_eq!(config.nested_idle_stop_ms, 0);
    assert!(config.server("pylsp").is_some_and(|s| s.secondary));
    assert!(config.server("pyright").is_some_and(|s| !s.secondary));
    let err = parse("max_running_servers = 0\n").expect_err("0 servers is refused");
    assert_eq!(err.key(), Some("max_running_servers"), "{err}");
}
