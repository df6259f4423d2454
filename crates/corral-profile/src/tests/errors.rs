//! Every error class names file:line:column, the key, what was expected and
//! what was found.

use super::check_err;

const TYPES: &str = "bind, ro-bind, dev-bind, bind-try, ro-bind-try, dev-bind-try, tmpfs, dir, \
                     symlink, file, copy, proc, dev, remount-ro, hide";

#[test]
fn unknown_top_level_key() {
    assert_eq!(
        check_err("hostname = \"web\"\nhostnme = \"x\"\n"),
        "/etc/corral/profile.toml:2:1: top level: expected one of the keys hostname, workdir, shell, \
         plan, groups, tenant_min_uid, tenant_allow, namespaces, env, tmp, seccomp, limits, mount, \
         services; found unknown key \"hostnme\""
    );
}

#[test]
fn unknown_key_in_table() {
    assert_eq!(
        check_err("[namespaces]\npid = true\n  pidd = true\n"),
        "/etc/corral/profile.toml:3:3: namespaces: expected one of the keys mount, pid, ipc, uts, \
         cgroup, net, user; found unknown key \"pidd\""
    );
}

#[test]
fn unknown_key_in_mount() {
    // `create` is only for a plain bind.
    assert_eq!(
        check_err("[[mount]]\ntype = \"ro-bind\"\nsrc = \"/x\"\ncreate = true\n"),
        "/etc/corral/profile.toml:4:1: mount[0].create: expected only the keys type, src, dst for \
         a ro-bind mount; found key \"create\""
    );
    assert_eq!(
        check_err("[[mount]]\ntype = \"bind\"\nsorce = \"/usr\"\n"),
        "/etc/corral/profile.toml:3:1: mount[0]: expected one of the keys type, src, dst, size, mode, \
         target, content, create; found unknown key \"sorce\""
    );
}

#[test]
fn key_not_for_this_mount_type() {
    assert_eq!(
        check_err("[[mount]]\ntype = \"dir\"\ndst = \"/x\"\nsize = \"1M\"\n"),
        "/etc/corral/profile.toml:4:1: mount[0].size: expected only the keys type, dst, mode for a dir \
         mount; found key \"size\""
    );
}

#[test]
fn missing_required_mount_key() {
    assert_eq!(
        check_err("[[mount]]\ntype = \"proc\"\ndst = \"/proc\"\n\n[[mount]]\ntype = \"tmpfs\"\n"),
        "/etc/corral/profile.toml:5:1: mount[1].dst: expected an absolute path (dst is required for a \
         tmpfs mount); found nothing"
    );
}

#[test]
fn wrong_type() {
    assert_eq!(
        check_err("[namespaces]\npid = \"yes\"\n"),
        "/etc/corral/profile.toml:2:7: namespaces.pid: expected a boolean (true or false); found string \"yes\""
    );
    assert_eq!(
        check_err("[env]\nkeep = [\"LANG\", 3]\n"),
        "/etc/corral/profile.toml:2:17: env.keep[1]: expected a string; found integer 3"
    );
    assert_eq!(
        check_err("namespaces = 1\n"),
        "/etc/corral/profile.toml:1:14: namespaces: expected a table; found integer 1"
    );
}

#[test]
fn bad_choice() {
    assert_eq!(
        check_err("[[mount]]\n    type = \"rbind\"\n    src = \"/usr\"\n"),
        format!("/etc/corral/profile.toml:2:12: mount[0].type: expected one of {TYPES}; found \"rbind\"")
    );
    assert_eq!(
        check_err("[namespaces]\nnet = \"bridge\"\n"),
        "/etc/corral/profile.toml:2:7: namespaces.net: expected one of private, host, none; found \"bridge\""
    );
    assert_eq!(
        check_err("[namespaces]\nmount = false\n"),
        "/etc/corral/profile.toml:2:9: namespaces.mount: expected true (a sandbox always has a mount \
         namespace); found false"
    );
}

#[test]
fn relative_and_dotdot_paths() {
    assert_eq!(
        check_err("[[mount]]\ntype = \"tmpfs\"\ndst = \"run\"\n"),
        "/etc/corral/profile.toml:3:7: mount[0].dst: expected an absolute path (starting with /); found \"run\""
    );
    assert_eq!(
        check_err("[[mount]]\ntype = \"ro-bind\"\nsrc = \"/usr/../etc\"\n"),
        "/etc/corral/profile.toml:3:7: mount[0].src: expected an absolute path without \"..\" components; \
         found \"/usr/../etc\""
    );
    assert_eq!(
        check_err("[[mount]]\ntype = \"tmpfs\"\ndst = \"//\"\n"),
        "/etc/corral/profile.toml:3:7: mount[0].dst: expected an absolute path other than /; found \"//\""
    );
    assert_eq!(
        check_err("workdir = \"srv\"\n"),
        "/etc/corral/profile.toml:1:11: workdir: expected an absolute path (starting with /); found \"srv\""
    );
}

#[test]
fn bad_size() {
    let expected =
        "expected a size greater than 0: an integer number of bytes, or a string like \"64M\" \
                    (units K, M, G, T: powers of 1024)";
    for (value, found) in [
        ("\"12X\"", "string \"12X\""),
        ("0", "integer 0"),
        ("-5", "integer -5"),
        ("\"99999999999T\"", "string \"99999999999T\""),
        ("\"M\"", "string \"M\""),
    ] {
        assert_eq!(
            check_err(&format!("[tmp]\nkind = \"tmpfs\"\nsize = {value}\n")),
            format!("/etc/corral/profile.toml:3:8: tmp.size: {expected}; found {found}")
        );
    }
}

#[test]
fn bad_mode() {
    let expected =
        "expected a mode of at most 0o7777: an octal string like \"0755\", or an integer \
                    written in octal like 0o755";
    for (value, found) in [
        ("\"0999\"", "string \"0999\""),
        ("\"17777\"", "string \"17777\""),
        ("0o17777", "integer 8191"),
        ("755", "decimal integer 755 (write 0o755 or \"755\")"),
        ("true", "boolean true"),
    ] {
        assert_eq!(
            check_err(&format!(
                "[[mount]]\ntype = \"dir\"\ndst = \"/srv\"\nmode = {value}\n"
            )),
            format!("/etc/corral/profile.toml:4:8: mount[0].mode: {expected}; found {found}")
        );
    }
}

#[test]
fn bad_hostname() {
    let expected =
        "expected a hostname label: 1 to 64 letters, digits or '-', not starting or ending \
                    with '-' (after expansion; set hostname for this tenant)";
    assert_eq!(
        check_err("hostname = \"web_1\"\n"),
        format!("/etc/corral/profile.toml:1:12: hostname: {expected}; found \"web_1\"")
    );
    assert_eq!(
        check_err(&format!("hostname = \"{}\"\n", "a".repeat(65))),
        format!(
            "/etc/corral/profile.toml:1:12: hostname: {expected}; found \"{}\"",
            "a".repeat(65)
        )
    );
    assert_eq!(
        check_err("hostname = \"$USER-\"\n"),
        format!("/etc/corral/profile.toml:1:12: hostname: {expected}; found \"example-\"")
    );
}

#[test]
fn unknown_variable() {
    let expected =
        "expected one of the variables $USER, $UID, $GID, $HOME (also written ${USER}...), \
                    or $$ for a literal $";
    assert_eq!(
        check_err("[env.set]\nPATH = \"/bin\"\nDATA = \"$HOME/$SITE/data\"\n"),
        format!("/etc/corral/profile.toml:3:8: env.set.DATA: {expected}; found $SITE")
    );
    assert_eq!(
        check_err("[[mount]]\ntype = \"bind\"\nsrc = \"${HOME\"\n"),
        format!("/etc/corral/profile.toml:3:7: mount[0].src: {expected}; found unclosed \"${{\" in \"${{HOME\"")
    );
    assert_eq!(
        check_err("[[mount]]\ntype = \"file\"\ndst = \"/etc/motd\"\ncontent = \"costs 5$\"\n"),
        format!("/etc/corral/profile.toml:4:11: mount[0].content: {expected}; found a lone \"$\" in \"costs 5$\"")
    );
}

#[test]
fn bad_names() {
    assert_eq!(
        check_err("[env.set]\n\"1X\" = \"a\"\n"),
        "/etc/corral/profile.toml:2:1: env.set: expected an environment variable name matching \
         [A-Za-z_][A-Za-z0-9_]*; found \"1X\""
    );
    assert_eq!(
        check_err("[seccomp]\ndeny = [\"ptrace\", \"Mount\"]\n"),
        "/etc/corral/profile.toml:2:19: seccomp.deny[1]: expected a syscall name matching [a-z0-9_]+; \
         found \"Mount\""
    );
    assert_eq!(
        check_err("plan = \"../secret\"\n"),
        "/etc/corral/profile.toml:1:8: plan: expected a plan name: letters, digits, '_', '-' or '.', not \
         starting with '.'; found \"../secret\""
    );
}

#[test]
fn tmp_settings_of_the_other_kind() {
    assert_eq!(
        check_err("[tmp]\nkind = \"tmpfs\"\ndir = \"/var/tmp/x\"\n"),
        "/etc/corral/profile.toml:3:7: tmp.dir: expected no tmp.dir with kind = \"tmpfs\" (dir is for \
         kind = \"disk\"); found \"/var/tmp/x\""
    );
}

#[test]
fn syntax_errors() {
    assert_eq!(
        check_err("hostname = \"web\"\n[namespaces\npid = true\n"),
        "/etc/corral/profile.toml:2:12: invalid TOML: invalid table header; expected `.`, `]`"
    );
    assert_eq!(
        check_err("plan = \"a\"\nplan = \"b\"\n"),
        "/etc/corral/profile.toml:2:1: invalid TOML: duplicate key `plan` in document root"
    );
}

#[test]
fn limits_keys() {
    assert_eq!(
        check_err("[limits]\n\"memory.max\" = \"1G\"\n"),
        "/etc/corral/profile.toml:2:1: limits.\"memory.max\": expected a limit name without '.' (nest \
         tables instead); found \"memory.max\""
    );
}

#[test]
fn columns_count_characters() {
    // "é" is two bytes but one column.
    assert_eq!(
        check_err("[env.set]\n\"CAFÉ\" = \"1\"\n"),
        "/etc/corral/profile.toml:2:1: env.set: expected an environment variable name matching \
         [A-Za-z_][A-Za-z0-9_]*; found \"CAFÉ\""
    );
    assert_eq!(
        check_err("# café\n[env.set]\nX = 1 # é\n"),
        "/etc/corral/profile.toml:3:5: env.set.X: expected a string; found integer 1"
    );
    assert_eq!(
        crate::error::line_col("aé\nbé c", &crate::error::line_starts("aé\nbé c"), 8),
        (2, 4)
    );
    assert_eq!(
        crate::error::line_col("aé", &crate::error::line_starts("aé"), 2),
        (1, 2),
        "inside a character: back to its start"
    );
    assert_eq!(
        crate::error::line_col("ab", &crate::error::line_starts("ab"), 99),
        (1, 3),
        "past the end: clamped"
    );
}
