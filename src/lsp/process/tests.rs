//! Unit tests of `lsp/process.rs`.

use super::stderr::LineForwarder;
use super::*;

#[test]
fn ring_keeps_everything_below_capacity() {
    let mut ring = StderrRing::new(8);
    ring.push(b"abc");
    ring.push(b"de");
    assert_eq!(ring.bytes(), b"abcde");
    assert_eq!(ring.len(), 5);
    assert_eq!(ring.dropped_bytes(), 0);
    assert_eq!(ring.snapshot(), "abcde");
}

#[test]
fn ring_wraps_around_keeping_the_last_bytes() {
    let mut ring = StderrRing::new(8);
    ring.push(b"abcdef");
    ring.push(b"ghij");
    assert_eq!(ring.bytes(), b"cdefghij");
    ring.push(b"k");
    assert_eq!(ring.bytes(), b"defghijk");
    ring.push(b"lmnopq");
    assert_eq!(ring.bytes(), b"jklmnopq");
    assert_eq!(ring.len(), 8);
    assert_eq!(ring.total_bytes(), 17);
    assert_eq!(ring.dropped_bytes(), 9);
}

#[test]
fn ring_push_larger_than_capacity_keeps_its_tail() {
    let mut ring = StderrRing::new(4);
    ring.push(b"xy");
    ring.push(b"0123456789");
    assert_eq!(ring.bytes(), b"6789");
    ring.push(b"ab");
    assert_eq!(ring.snapshot(), "89ab");
}

#[test]
fn ring_matches_a_naive_model_over_many_pushes() {
    let mut ring = StderrRing::new(13);
    let mut model: Vec<u8> = Vec::new();
    for i in 0..200u32 {
        let chunk: Vec<u8> = (0..(i * 7 % 17)).map(|j| (i + j) as u8).collect();
        ring.push(&chunk);
        model.extend_from_slice(&chunk);
        let keep = model.len().min(13);
        assert_eq!(ring.bytes(), &model[model.len() - keep..], "after push {i}");
    }
}

#[test]
fn ring_of_zero_capacity_only_counts() {
    let mut ring = StderrRing::new(0);
    ring.push(b"abc");
    assert!(ring.is_empty());
    assert_eq!(ring.total_bytes(), 3);
    assert_eq!(ring.snapshot(), "");
}

#[test]
fn ring_snapshot_skips_a_character_cut_at_the_start() {
    let mut ring = StderrRing::new(4);
    ring.push("aé€".as_bytes()); // 61 c3 a9 e2 82 ac
    assert_eq!(ring.bytes(), [0xa9, 0xe2, 0x82, 0xac]);
    assert_eq!(ring.snapshot(), "€");
}

/// A `tracing` writer collecting output in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[test]
fn stderr_lines_are_split_truncated_and_rate_limited() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let mut lines = LineForwarder::new(Arc::from("srv"));
        lines.feed(b"hello\r\nwor");
        lines.feed(b"ld\n");
        lines.feed(&[b'x'; MAX_STDERR_LINE + 100]);
        lines.feed(b"yyy\n");
        for _ in 0..200 {
            lines.feed(b"spam\n");
        }
        lines.feed(b"unterminated");
        lines.finish();
    });
    let out = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with(": hello server=srv"), "{}", lines[0]);
    assert!(lines[1].ends_with(": world server=srv"), "{}", lines[1]);
    assert!(lines[2].contains("truncated_bytes=103"), "{}", lines[2]);
    assert!(lines[2].contains(&"x".repeat(MAX_STDERR_LINE)));
    assert!(!lines[2].contains(&"x".repeat(MAX_STDERR_LINE + 1)));
    let spam = lines
        .iter()
        .filter(|l| l.ends_with(": spam server=srv"))
        .count();
    assert_eq!(spam, MAX_STDERR_LINES_PER_SEC as usize - 3);
    let suppressed = 200 - spam + 1; // plus the unterminated last line
    let last = lines.last().copied().unwrap_or_default();
    assert!(last.contains(&format!("suppressed={suppressed}")), "{last}");
    assert_eq!(lines.len(), 3 + spam + 1);
}

#[test]
fn the_allowlist_keeps_toolchain_variables_and_refuses_credentials_in_their_families() {
    for name in [
        "PATH",
        "HOME",
        "LC_ALL",
        "XDG_CACHE_HOME",
        "RUSTUP_TOOLCHAIN",
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "RUSTC_WRAPPER",
        "GOPATH",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "npm_config_registry",
        "HTTPS_PROXY",
        "no_proxy",
        "SSH_AUTH_SOCK",
        "GIT_ASKPASS",
    ] {
        assert!(is_allowed_env(OsStr::new(name)), "{name}");
    }
    for name in [
        "MY_API_KEY",
        "GITHUB_TOKEN",
        "DATABASE_URL",
        "CARGO_REGISTRY_TOKEN",
        "CARGO_REGISTRIES_CORP_TOKEN",
        "npm_config__auth",
        "npm_config__authToken",
        "NPM_CONFIG__AUTH",
        "NODE_AUTH_TOKEN",
        "PYTHON_KEYRING_PASSWORD",
        "CONDA_PAT",
        "SOMETHING_ELSE",
    ] {
        assert!(!is_allowed_env(OsStr::new(name)), "{name}");
    }
}

#[test]
fn sanitized_env_drops_secrets_keeps_passthrough_and_applies_extras() {
    let base = [
        ("PATH", "/bin"),
        ("MY_API_KEY", "s1"),
        ("GITHUB_TOKEN", "s2"),
        ("NPM_TOKEN", "s3"),
        ("HOME", "/home/u"),
        ("DATABASE_URL", "postgres://u:pw@db/x"),
        ("CORP_A", "a"),
        ("CORP_B", "b"),
    ]
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let mut spec = SpawnSpec::new("x", "/");
    spec.env_passthrough = vec!["NPM_TOKEN".into(), "CORP_*".into()];
    spec.env_extra.insert("HOME".into(), "/tmp/h".into());
    spec.env_extra.insert("RA_LOG".into(), "info".into());
    let env: BTreeMap<String, String> = sanitized_env(base, &spec)
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let expected: BTreeMap<String, String> = [
        ("CORP_A", "a"),
        ("CORP_B", "b"),
        ("HOME", "/tmp/h"),
        ("NPM_TOKEN", "s3"),
        ("PATH", "/bin"),
        ("RA_LOG", "info"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    assert_eq!(env, expected);
}
