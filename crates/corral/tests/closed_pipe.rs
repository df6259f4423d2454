//! Every command that prints exits quietly when its output pipe closes
//! (`corral ls | head -1`), like `ls | head`: status 0 or 141 (128 +
//! SIGPIPE), no panic, no backtrace (real tenants, as root).

mod common;
use common::*;
use std::process::{Command, Output, Stdio};

/// The commands that print something, against a running tenant and a
/// stopped one.
fn printing_commands() -> Vec<Vec<&'static str>> {
    [
        &["--help"][..],
        &["--version"],
        &["help"],
        &["limits", "--help"],
        &["run", "--help"],
        &["profile", "default"],
        &["profile", "show", T1],
        &["--json", "profile", "show", T1],
        &["check"],
        &["check", "--tenant", T1],
        &["ls"],
        &["--json", "ls"],
        &["up", T1],
        &["--json", "up", T1],
        &["limits", "show", T1],
        &["limits", "show", T2],
        &["--json", "limits", "show", T1],
        &["limits", "set", T1, "processes=300"],
        &["limits", "reload", T1],
        &["down", T2],
        &["--json", "down", T2],
        &["stats", "--interval-ms", "50"],
        &["--json", "stats", "--interval-ms", "50"],
        &["top", "--iterations", "2", "--interval-ms", "50"],
        &["--json", "top", "--iterations", "2", "--interval-ms", "50"],
    ]
    .iter()
    .map(|a| a.to_vec())
    .collect()
}

/// What a broken pipe must not print.
fn assert_quiet(how: &str, args: &[&str], o: &Output) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    for bad in [
        "panicked",
        "backtrace",
        "failed printing",
        "Broken pipe",
        "os error 32",
    ] {
        assert!(
            !stderr.contains(bad),
            "corral {args:?} {how}: {bad:?} on stderr:\n{stderr}"
        );
    }
    use std::os::unix::process::ExitStatusExt;
    let ok =
        matches!(o.status.code(), Some(0) | Some(141)) || o.status.signal() == Some(libc::SIGPIPE);
    assert!(
        ok,
        "corral {args:?} {how}: {:?} (expected 0 or 141)\nstderr: {stderr}",
        o.status
    );
}

#[test]
fn printing_commands_exit_quietly_when_their_output_pipe_closes() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    // The variables that point corral at this test's state and config.
    let vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = env
        .cmd()
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    let mut closed_early = 0;
    for args in printing_commands() {
        // Each command works when its output is read.
        let read = env.run(&args);
        assert!(
            read.status.success() && !read.stdout.is_empty(),
            "corral {args:?}: {:?}\nstderr: {}",
            read.status,
            String::from_utf8_lossy(&read.stderr)
        );

        // Into `head -1`, as a shell pipeline: corral's own status.
        let o = Command::new("bash")
            .arg("-c")
            .arg(r#""$@" | head -1 >/dev/null; exit "${PIPESTATUS[0]}""#)
            .arg("bash")
            .arg(corral_bin())
            .args(&args)
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .stderr(Stdio::piped())
            .output()
            .expect("run bash");
        assert_quiet("| head -1", &args, &o);

        // Into a pipe whose reader is already gone: the first write fails.
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        let o = env
            .cmd()
            .args(&args)
            .stdout(Stdio::from(w))
            .stderr(Stdio::piped())
            .output()
            .expect("spawn corral");
        assert_quiet("into a closed pipe", &args, &o);
        closed_early += usize::from(o.status.code() == Some(141));
    }
    // clap's help and version swallow the error (status 0); the others stop
    // at their first line.
    assert!(
        closed_early >= 15,
        "only {closed_early} saw the closed pipe"
    );
}
