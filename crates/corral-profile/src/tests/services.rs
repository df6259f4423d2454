//! `[services.NAME]`: defaults, expansion, overrides and errors.

use super::{check_err, example_plan};
use crate::plan::{Restart, StartMode};
use std::path::PathBuf;

const FPM: &str = r#"
[services.php]
command = ["/usr/sbin/php-fpm8.2", "--nodaemonize", "--fpm-config", "$HOME/fpm.conf"]
listen = "/run/corral/fpm/$USER.sock"
listen_group = "0"
stop_signal = "SIGQUIT"
idle_timeout = "5m"

[services.php.env]
PHP_INI_SCAN_DIR = "$HOME/php.d"
"#;

#[test]
fn a_service_is_expanded_with_defaults() {
    let plan = example_plan(FPM, None).unwrap();
    assert_eq!(plan.services.len(), 1);
    let s = &plan.services[0];
    assert_eq!(s.name, "php");
    assert_eq!(s.command[3], "/home/example/fpm.conf");
    assert_eq!(s.env["PHP_INI_SCAN_DIR"], "/home/example/php.d");
    assert_eq!(s.listen, [PathBuf::from("/run/corral/fpm/example.sock")]);
    assert_eq!(
        s.start,
        StartMode::OnDemand,
        "a service with sockets starts on demand"
    );
    assert_eq!(s.restart, Restart::OnFailure);
    assert_eq!(s.idle_timeout_ms, 300_000);
    assert_eq!(s.stop_signal, 3);
    assert_eq!(s.stop_timeout_ms, 10_000);
    assert_eq!((s.listen_gid, s.listen_mode), (0, 0o660));
    assert_eq!(s.log, PathBuf::from("/var/log/corral/example/php.log"));
    assert_eq!((s.log_max_size, s.log_keep), (1 << 20, 3));
    assert_eq!(
        s.workdir,
        PathBuf::from("/home/example"),
        "the profile's workdir"
    );
}

#[test]
fn without_sockets_a_service_starts_with_the_sandbox() {
    let plan = example_plan(
        "[services.app]\ncommand = [\"/usr/bin/app\"]\nrestart = \"always\"\n",
        None,
    )
    .unwrap();
    let s = &plan.services[0];
    assert_eq!(
        (s.start, s.restart, s.idle_timeout_ms),
        (StartMode::AtUp, Restart::Always, 0)
    );
}

#[test]
fn an_override_replaces_or_removes_a_service() {
    let over = "[services.php]\ncommand = [\"/usr/sbin/php-fpm8.3\"]\nstart = \"at-up\"\n\
                [services.worker]\ncommand = [\"/usr/bin/worker\"]\n";
    let plan = example_plan(FPM, Some(over)).unwrap();
    let names: Vec<&str> = plan.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["php", "worker"]);
    assert_eq!(plan.services[0].command, ["/usr/sbin/php-fpm8.3"]);
    assert!(
        plan.services[0].listen.is_empty(),
        "replaced whole, not merged"
    );
    let plan = example_plan(FPM, Some("[services.php]\nenabled = false\n")).unwrap();
    assert!(plan.services.is_empty());
}

#[test]
fn service_errors_name_the_key() {
    let e = check_err("[services.Php]\ncommand = [\"x\"]\n");
    assert!(e.contains(":1:") && e.contains("a service name"), "{e}");
    let e = check_err("[services.php]\nlisten = \"/run/x.sock\"\n");
    assert!(
        e.contains("services.php.command") && e.contains("a command"),
        "{e}"
    );
    let e = check_err("[services.php]\ncommand = []\n");
    assert!(e.contains(":2:") && e.contains("non-empty array"), "{e}");
    let e = check_err("[services.php]\ncommand = [\"x\"]\nstart = \"on-demand\"\n");
    assert!(e.contains(":3:") && e.contains("at-up"), "{e}");
    let e = check_err("[services.php]\ncommand = [\"x\"]\nidle_timeout = \"5 min\"\n");
    assert!(
        e.contains("services.php.idle_timeout") && e.contains("a duration"),
        "{e}"
    );
    let e = check_err("[services.php]\ncommand = [\"x\"]\nstop_signal = \"TERM\"\n");
    assert!(e.contains("SIGTERM"), "{e}");
    let e = check_err("[services.php]\ncommand = [\"x\"]\nlisten_group = \"no-such-group-here\"\n");
    assert!(e.contains("an existing group"), "{e}");
    let long = format!("/run/{}.sock", "x".repeat(110));
    let e = check_err(&format!(
        "[services.php]\ncommand = [\"x\"]\nlisten = \"{long}\"\n"
    ));
    assert!(e.contains("at most 107 bytes"), "{e}");
    let e = check_err(
        "[services.a]\ncommand = [\"x\"]\nlisten = \"/run/s.sock\"\n\
         [services.b]\ncommand = [\"y\"]\nlisten = \"/run/s.sock\"\n",
    );
    assert!(e.contains("service a listens on it too"), "{e}");
    let e = check_err("[services.php]\nenabled = true\n");
    assert!(
        e.contains("services.php.command") && e.contains("a command"),
        "{e}"
    );
    let many: Vec<String> = (0..17).map(|i| format!("\"/run/s{i}.sock\"")).collect();
    let e = check_err(&format!(
        "[services.php]\ncommand = [\"x\"]\nlisten = [{}]\n",
        many.join(", ")
    ));
    assert!(e.contains("at most 16"), "{e}");
    let e = check_err("[services.php]\ncommand = [\"x\"]\ncomand = 1\n");
    assert!(e.contains("unknown key \"comand\""), "{e}");
}

#[test]
fn durations() {
    use crate::values::parse_duration_ms;
    assert_eq!(parse_duration_ms("500ms"), Some(500));
    assert_eq!(parse_duration_ms("30s"), Some(30_000));
    assert_eq!(parse_duration_ms("30"), Some(30_000));
    assert_eq!(parse_duration_ms("10m"), Some(600_000));
    assert_eq!(parse_duration_ms("2h"), Some(7_200_000));
    assert_eq!(parse_duration_ms("0"), Some(0));
    for bad in ["", "s", "1d", "1.5s", "-1s", "1 s"] {
        assert_eq!(parse_duration_ms(bad), None, "{bad}");
    }
}
