use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const PASSWD: &str = "\
# comment
root:x:0:0:root:/root:/bin/bash

+nisuser::::::
web1:x:1001:1001:Web One,,,:/home/web1:/bin/sh
broken:x:notanumber:1:::/bin/sh
short:x:1002
web2:x:1002:1002::/srv/web2:/usr/sbin/nologin
web1:x:9999:9999:second entry never wins:/x:/bin/sh
";

const GROUP: &str = "\
root:x:0:
web1:x:1001:
staff:x:50:web2, web1
-nisgroup
sftp:x:60:web1
web2:x:1002:
";

struct Fixture {
    dir: tempfile::TempDir,
    db: Db,
}

/// Files in a temp dir; `nsswitch` as given; a fake getent that prints
/// `answers` (a shell `case` on "$1:$3") or exits 2.
fn fixture(nsswitch: &str, answers: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let source = w(
        "getent.sh",
        &format!(
            "#!/bin/sh\necho \"$@\" >> {}/asked\ncase \"$1:$3\" in\n{answers}\n*) exit 2;;\nesac\n",
            dir.path().display()
        ),
    );
    // The script that is executed is written by another process (cp): a
    // write fd of this one, inherited by a child another test thread forks
    // at that moment, would make the exec fail with ETXTBSY.
    let getent = dir.path().join("getent");
    let cp = std::process::Command::new("cp")
        .arg(&source)
        .arg(&getent)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::set_permissions(&getent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = Db {
        passwd: w("passwd", PASSWD),
        group: w("group", GROUP),
        nsswitch: w("nsswitch.conf", nsswitch),
        getent,
    };
    Fixture { dir, db }
}

fn asked(f: &Fixture) -> String {
    std::fs::read_to_string(f.dir.path().join("asked")).unwrap_or_default()
}

#[test]
fn files_are_read_like_nss_files() {
    let f = fixture("passwd: files\ngroup: files\n", "");
    let web1 = f.db.user_by_name("web1").unwrap().unwrap();
    assert_eq!(
        web1,
        User {
            name: "web1".into(),
            uid: 1001,
            gid: 1001,
            home: "/home/web1".into(),
            shell: "/bin/sh".into()
        }
    );
    assert_eq!(
        f.db.user_by_uid(1002).unwrap().unwrap().home,
        Path::new("/srv/web2")
    );
    assert_eq!(f.db.user_by_uid(0).unwrap().unwrap().name, "root");
    for missing in ["broken", "short", "nisuser", "+nisuser", "nobody"] {
        assert_eq!(f.db.user_by_name(missing).unwrap(), None, "{missing}");
    }
    assert_eq!(
        f.db.user_by_uid(9999).unwrap().unwrap().name,
        "web1",
        "a later duplicate line is still found by uid"
    );
    assert_eq!(
        f.db.group_by_name("staff").unwrap().unwrap(),
        Group {
            name: "staff".into(),
            gid: 50,
            members: vec!["web2".into(), "web1".into()]
        }
    );
    assert_eq!(f.db.group_by_gid(60).unwrap().unwrap().name, "sftp");
    assert_eq!(f.db.group_by_name("nisgroup").unwrap(), None);
    assert_eq!(f.db.group_list("web1", 1001).unwrap(), vec![1001, 50, 60]);
    assert_eq!(f.db.group_list("web2", 1002).unwrap(), vec![1002, 50]);
    assert_eq!(
        f.db.group_list("web2", 50).unwrap(),
        vec![50],
        "the primary group is not repeated"
    );
    assert_eq!(
        asked(&f),
        "",
        "getent is not asked when nsswitch.conf names only files"
    );
}

#[test]
fn getent_answers_what_the_files_do_not_have_when_other_sources_are_named() {
    let answers = "\
passwd:ldapuser) echo 'ldapuser:*:5000:5000:LDAP:/home/ldapuser:/bin/bash';;
passwd:5000) echo 'ldapuser:*:5000:5000:LDAP:/home/ldapuser:/bin/bash';;
group:ldapgroup) echo 'ldapgroup:*:7000:ldapuser';;
initgroups:web1) echo 'web1   7000 50';;
passwd:garbled) echo 'garbled';;
passwd:failing) exit 1;;";
    let f = fixture(
        "passwd: files ldap\ngroup: files [NOTFOUND=return] sss\n",
        answers,
    );
    assert_eq!(
        f.db.user_by_name("web1").unwrap().unwrap().uid,
        1001,
        "files first"
    );
    assert_eq!(asked(&f), "", "an entry in the files costs no getent");
    assert_eq!(
        f.db.user_by_name("ldapuser").unwrap().unwrap().home,
        Path::new("/home/ldapuser")
    );
    assert_eq!(f.db.user_by_uid(5000).unwrap().unwrap().name, "ldapuser");
    assert_eq!(
        f.db.user_by_name("nobody").unwrap(),
        None,
        "exit status 2 is 'not found'"
    );
    assert_eq!(f.db.group_by_name("ldapgroup").unwrap().unwrap().gid, 7000);
    assert_eq!(
        f.db.group_list("web1", 1001).unwrap(),
        vec![1001, 50, 60, 7000]
    );
    let e = f.db.user_by_name("garbled").unwrap_err();
    assert!(e.to_string().contains("cannot read \"garbled\""), "{e}");
    let e = f.db.user_by_name("failing").unwrap_err();
    assert!(
        e.to_string().contains("passwd failing") && e.to_string().contains("failed"),
        "{e}"
    );
    assert!(asked(&f).contains("passwd -- ldapuser\n"), "{}", asked(&f));
}

#[test]
fn systemd_serves_only_what_the_files_lack_and_a_missing_nsswitch_conf_means_files() {
    let answers = "passwd:homed) echo 'homed:x:60001:60001::/home/homed:/bin/bash';;\ninitgroups:homed) echo 'homed 50';;";
    let f = fixture(
        "passwd: files systemd\ngroup: files systemd # comment ldap\n",
        answers,
    );
    assert_eq!(f.db.group_list("web1", 1001).unwrap(), vec![1001, 50, 60]);
    assert_eq!(f.db.user_by_name("web1").unwrap().unwrap().uid, 1001);
    assert_eq!(
        asked(&f),
        "",
        "a user of the files costs no getent with Debian's default order"
    );
    assert_eq!(
        f.db.user_by_name("homed").unwrap().unwrap().uid,
        60001,
        "nss-systemd's own users come from getent"
    );
    assert_eq!(
        f.db.group_list("homed", 60001).unwrap(),
        vec![60001, 50],
        "and so do their groups"
    );
    std::fs::remove_file(&f.db.nsswitch).unwrap();
    let before = asked(&f);
    assert_eq!(
        f.db.user_by_name("homed").unwrap(),
        None,
        "no nsswitch.conf: files only"
    );
    assert_eq!(asked(&f), before);
}

#[test]
fn another_source_first_means_getent_for_everything() {
    let answers = "passwd:web1) echo 'web1:x:4242:4242::/ldap/web1:/bin/sh';;\ninitgroups:web1) echo 'web1 7000';;";
    let f = fixture("passwd: sss files\ngroup: ldap files\n", answers);
    assert_eq!(
        f.db.user_by_name("web1").unwrap().unwrap().uid,
        4242,
        "the first source wins, as in glibc"
    );
    assert_eq!(f.db.group_list("web1", 4242).unwrap(), vec![4242, 7000]);
}

#[test]
fn getent_answers_for_another_key_are_no_answer() {
    // `getent passwd 33` looks 33 up as a uid.
    let f = fixture(
        "passwd: files ldap\ngroup: files ldap\n",
        "passwd:33) echo 'www-data:x:33:33::/var/www:/bin/sh';;\ngroup:33) echo 'www-data:x:33:';;",
    );
    assert_eq!(f.db.user_by_name("33").unwrap(), None);
    assert_eq!(f.db.user_by_uid(33).unwrap().unwrap().name, "www-data");
    assert_eq!(f.db.group_by_name("33").unwrap(), None);
    assert_eq!(f.db.group_by_gid(33).unwrap().unwrap().name, "www-data");
}

#[test]
fn lines_are_read_as_leniently_as_glibc_reads_them() {
    let u = parse_passwd_line("sixfields:x:1:2:gecos:/home/six").unwrap();
    assert_eq!(
        (
            u.uid,
            u.gid,
            u.home.to_str().unwrap(),
            u.shell.to_str().unwrap()
        ),
        (1, 2, "/home/six", "")
    );
    assert_eq!(
        parse_passwd_line("extra:x:1:2::/h:/bin/sh:more")
            .unwrap()
            .shell
            .to_str()
            .unwrap(),
        "/bin/sh:more",
        "the shell is the rest of the line"
    );
    assert_eq!(parse_passwd_line("five:x:1:2:gecos"), None);
    let g = parse_group_line("nocolon:x:70").unwrap();
    assert_eq!((g.gid, g.members.len()), (70, 0));
    assert_eq!(parse_group_line("two:x"), None);
}

#[test]
fn nsswitch_sources_skip_actions_and_comments() {
    let text = "# passwd: ldap\npasswd:   files  [ NOTFOUND=return ] ldap # sss\ngroup:files\n";
    assert_eq!(nsswitch::sources(text, "passwd"), ["files", "ldap"]);
    assert_eq!(nsswitch::sources(text, "group"), ["files"]);
    assert_eq!(
        nsswitch::sources(text, "shadow"),
        ["files"],
        "missing line: glibc's default"
    );
}

#[test]
fn missing_files_and_getent_are_errors_that_name_them() {
    let f = fixture("passwd: files ldap\n", "");
    let db = Db {
        getent: f.dir.path().join("no-getent"),
        ..f.db.clone()
    };
    let e = db.user_by_name("ldapuser").unwrap_err();
    assert!(
        e.to_string().contains("no-getent") && e.to_string().contains("only getent can ask"),
        "{e}"
    );
    let db = Db {
        passwd: f.dir.path().join("no-passwd"),
        ..f.db.clone()
    };
    let e = db.user_by_name("web1").unwrap_err();
    assert!(
        e.to_string().contains("read ") && e.to_string().contains("no-passwd"),
        "{e}"
    );
}

/// The system's databases answer as the system's own tools (dynamically
/// linked, all NSS sources) do, for users the files hold.
#[test]
fn system_lookups_agree_with_getent_and_id() {
    let db = Db::system();
    let tool = |args: &[&str]| {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap().trim().to_string())
    };
    for name in ["root", "nobody", "daemon"] {
        let Some(line) = tool(&["getent", "passwd", name]) else {
            continue;
        };
        let theirs = parse_passwd_line(&line).unwrap();
        let ours = db
            .user_by_name(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name} not found"));
        assert_eq!(ours, theirs, "{name}");
        assert_eq!(db.user_by_uid(ours.uid).unwrap().unwrap().name, name);
        let mut theirs: Vec<u32> = tool(&["id", "-G", name])
            .unwrap()
            .split_whitespace()
            .map(|g| g.parse().unwrap())
            .collect();
        let mut ours = db.group_list(name, ours.gid).unwrap();
        theirs.sort_unstable();
        ours.sort_unstable();
        assert_eq!(ours, theirs, "groups of {name}");
    }
    let root_group = tool(&["getent", "group", "0"]).unwrap();
    assert_eq!(
        db.group_by_gid(0).unwrap().unwrap(),
        parse_group_line(&root_group).unwrap()
    );
}

#[test]
fn user_names_are_checked_without_a_lookup() {
    for ok in ["web1", "_x", "a.b-c_d", &"a".repeat(32)] {
        assert_eq!(check_user_name(ok), Ok(()), "{ok}");
    }
    for bad in ["", "1web", "Web", "a/b", "..", "-a", "a b", &"a".repeat(33)] {
        assert!(check_user_name(bad).is_err(), "{bad:?}");
    }
    assert!(check_user_name("../x")
        .unwrap_err()
        .to_string()
        .contains("not a tenant name"));
}
